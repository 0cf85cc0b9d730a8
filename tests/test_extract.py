"""crawlproj.extract on real pages and on hand-written edge cases.

Real pages: the ~1,470 HTML files under /work/shared/data/html (Zyte article
benchmark, Mozilla Readability test pages, Trafilatura evaluation set; see
SOURCES.md there). Figures measured with this code, asserted below with some
margin:

* every file (1,473) extracts without an exception; 136,550 links in all; one
  page has no visible text (business-punk.com, a script-rendered shell);
* root-relative hrefs on pages with a known URL and no <base>: all 48,652
  resolve onto the page's own scheme and host;
* Zyte, 181 pages with gold article bodies: gold word tokens found in our
  text (multiset recall) >= 0.9 on 181/181 pages, >= 0.95 on 180/181, mean
  0.9996;
* Trafilatura, 990 pages with "must contain" snippets: 2,929/2,951 snippets
  (99.3%) appear in our text; pages where all do: 98.9%;
* Readability, 130 cases: the expected article's word tokens are in our text
  of the source page (recall >= 0.9) for 128/130 (the two others: "qq" is
  stored as UTF-8 but declares gb2312, so it decodes as a browser would,
  into mojibake; in "hukumusume" Readability's output runs the Japanese
  text of adjacent table cells together, which we keep apart, so its long
  space-free tokens differ from ours);
* links, against Scrapy's LinkExtractor as an independent oracle, on the
  1,134 pages with a known http(s) URL, self-links aside, both sides spelled
  by w3lib's canonicalize_url: 112,083 links ours; Scrapy finds 162 we do
  not and we find 138 it does not. 134 and 135 of these are one link each
  spelled two ways, where urljoin drops the empty segment of a base path
  such as https://web.archive.org/web/2011/http://site/x (a browser keeps it,
  and so do we); the rest are deliberate (fragment-only hrefs under a <base>,
  "{{placeholder}}" template hrefs, hosts with spaces, "http://"), or Scrapy
  resolving otherwise than browsers (a backslash path, a percent-encoded
  host where browsers send IDNA). The test uses every third page (378 pages:
  36,432 links, 2 and 12 differences).

    /tmp/venv/bin/python -m pytest tests/test_extract.py -q
"""

from __future__ import annotations

import collections
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from lxml import etree
from scrapy.http import HtmlResponse, Response, TextResponse

from crawlproj.extract import (
    DEFAULT_MAX_LINKS,
    Extracted,
    extract_page,
    is_html,
    is_html_type,
    looks_binary,
    mime_type,
    resolve_link,
)
from tests.data import SHARED_DATA, require

HTML_DIR = SHARED_DATA / "html"
ZYTE = HTML_DIR / "zyte_article_extraction_benchmark"
READABILITY = HTML_DIR / "mozilla_readability_test_pages"
TRAFILATURA = HTML_DIR / "trafilatura_eval"
# The URL Readability's own tests give every page.
READABILITY_URL = "http://fakehost/test/page.html"

_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> collections.Counter:
    return collections.Counter(t.lower() for t in _TOKEN.findall(text))


def token_recall(gold: str, ours: str) -> float | None:
    """Share of the gold text's word tokens (with multiplicity) in ours."""
    g, o = _tokens(gold), _tokens(ours)
    total = sum(g.values())
    if not total:
        return None
    return sum(min(n, o[t]) for t, n in g.items()) / total


# --------------------------------------------------------------------------
# The corpus, extracted once per test session
# --------------------------------------------------------------------------


class Page:
    __slots__ = ("path", "url", "body", "result", "kind")

    def __init__(self, path: Path, url: str | None, kind: str):
        self.path, self.url, self.kind = path, url, kind
        self.body = gzip.decompress(path.read_bytes())
        self.result: Extracted | None = None


def _load_corpus() -> list[Page]:
    pages: list[Page] = []
    gold = json.loads(gzip.decompress((ZYTE / "ground-truth.json.gz").read_bytes()))
    for key, entry in sorted(gold.items()):
        pages.append(Page(ZYTE / "html" / f"{key}.html.gz", entry["url"], "zyte"))
    evaldata = json.loads(gzip.decompress((TRAFILATURA / "evaldata.json.gz").read_bytes()))
    known: dict[Path, str] = {}
    for url, entry in evaldata.items():
        for sub in ("eval", "cache"):
            p = TRAFILATURA / sub / f"{entry['file']}.gz"
            if p.exists():
                known.setdefault(p, url.strip())
                break
    for p in sorted(TRAFILATURA.glob("*/*.html.gz")):
        pages.append(Page(p, known.get(p), "trafilatura"))
    for p in sorted(READABILITY.glob("*/*.html.gz")):
        pages.append(Page(p, READABILITY_URL, "readability"))
    return pages


@pytest.fixture(scope="module")
def corpus() -> list[Page]:
    require(HTML_DIR)
    pages = _load_corpus()
    for page in pages:
        page.result = extract_page(page.body, page.url or "http://unknown.invalid/")
    return pages


@pytest.mark.slow
def test_corpus_size(corpus):
    assert len(corpus) > 1400
    assert sum(p.url is not None and p.kind != "readability" for p in corpus) > 1100


@pytest.mark.slow
def test_every_page_extracts(corpus):
    empty_text = [p.path.name for p in corpus if not p.result.text]
    # Pages with no visible text at all: JavaScript-only shells and the like.
    assert len(empty_text) < len(corpus) * 0.01, empty_text
    assert sum(len(p.result.links) for p in corpus) > 100_000


@pytest.mark.slow
def test_links_are_absolute_http_without_fragments(corpus):
    for page in corpus:
        for url, anchor in page.result.links:
            parts = urlsplit(url)
            assert parts.scheme in ("http", "https"), url
            assert parts.hostname, url
            assert "#" not in url, url
            assert not re.search(r"\s", url), url
            assert url.isascii(), url
            assert len(anchor) <= 200
            assert anchor == " ".join(anchor.split())
        urls = [u for u, _ in page.result.links]
        assert len(urls) == len(set(urls)), page.path


@pytest.mark.slow
def test_root_relative_links_resolve_against_page_url(corpus):
    """On pages with a known URL and no <base>, every root-relative href
    becomes a link on the page's own scheme and host."""
    checked = 0
    for page in corpus:
        if page.url is None or page.kind == "readability" or not page.url.startswith("http"):
            continue  # (evaldata.json names a few pages "hard::...", not URLs)
        root = etree.fromstring(page.body, etree.HTMLParser())
        if root is None or root.find(".//base[@href]") is not None:
            continue
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(page.url))
        ours = {u for u, _ in page.result.links}
        for a in root.iter("a"):
            href = (a.get("href") or "").strip()
            if not re.fullmatch(r"/[A-Za-z0-9_\-./~%=&?;:@+,!$]*", href) or "/." in href:
                continue  # plain ASCII root-relative paths only: no escaping
            if href.startswith("//") or href.endswith("?"):
                continue
            assert origin + href in ours, (page.path.name, href)
            checked += 1
    assert checked > 40_000  # measured: 48,652


@pytest.mark.slow
def test_links_agree_with_scrapy_link_extractor(corpus):
    """Scrapy's own LinkExtractor as an oracle (every third page with a known
    URL, to keep the test fast). Both link sets are spelled by w3lib's
    canonicalize_url, so that only different links count, not escaping or
    the "/" of an empty path."""
    from scrapy.linkextractors import LinkExtractor
    from w3lib.url import canonicalize_url

    extractor = LinkExtractor(
        tags=("a", "area"), attrs=("href",), canonicalize=False, unique=True, deny_extensions=[]
    )
    pages = [
        p for p in corpus
        if p.url is not None and p.kind != "readability" and p.url.startswith("http")
    ][::3]  # fmt: skip
    ours_total = only_ours = only_scrapy = 0
    for page in pages:
        response = HtmlResponse(page.url, body=page.body, encoding=page.result.encoding)
        theirs = {
            canonicalize_url(link.url)
            for link in extractor.extract_links(response)
            if link.url.startswith(("http://", "https://"))
        }
        # Self-links: "#top"-style hrefs give one in Scrapy only (we drop them).
        self_url = canonicalize_url(page.url)
        theirs.discard(self_url)
        ours = {canonicalize_url(u) for u, _ in page.result.links} - {self_url}
        ours_total += len(ours)
        only_ours += len(ours - theirs)
        only_scrapy += len(theirs - ours)
    assert ours_total > 30_000  # measured 36,432
    assert only_ours <= ours_total * 0.0005  # measured 2
    assert only_scrapy <= ours_total * 0.001  # measured 12


@pytest.mark.slow
def test_zyte_article_text_recall(corpus):
    gold = json.loads(gzip.decompress((ZYTE / "ground-truth.json.gz").read_bytes()))
    recalls = []
    for page in corpus:
        if page.kind != "zyte":
            continue
        key = page.path.name.removesuffix(".html.gz")
        recalls.append(token_recall(gold[key]["articleBody"], page.result.text))
    assert len(recalls) == 181
    assert sum(r >= 0.9 for r in recalls) / len(recalls) >= 0.98  # measured 1.000
    assert sum(r >= 0.8 for r in recalls) / len(recalls) >= 0.99  # measured 1.000
    assert sum(recalls) / len(recalls) >= 0.98  # measured 0.9996


@pytest.mark.slow
def test_trafilatura_snippets_found(corpus):
    evaldata = json.loads(gzip.decompress((TRAFILATURA / "evaldata.json.gz").read_bytes()))
    by_path = {p.path: p for p in corpus if p.kind == "trafilatura"}
    found = total = 0
    for entry in evaldata.values():
        page = next(
            (by_path[p] for sub in ("eval", "cache")
             if (p := TRAFILATURA / sub / f"{entry['file']}.gz") in by_path),
            None,
        )  # fmt: skip
        assert page is not None, entry["file"]
        text = page.result.text
        squeezed = re.sub(r"\s+", "", text)
        for snippet in entry.get("with", []):
            total += 1
            found += " ".join(snippet.split()) in text or re.sub(r"\s+", "", snippet) in squeezed
    assert total > 2900
    assert found / total >= 0.98  # measured 2,929 / 2,951 = 0.993


@pytest.mark.slow
def test_readability_expected_article_in_text(corpus):
    results = {}
    for page in corpus:
        if page.kind == "readability":
            results[(page.path.parent.name, page.path.name)] = page.result
    recalls = []
    for (case, name), result in results.items():
        if name != "source.html.gz":
            continue
        expected = results[(case, "expected.html.gz")]
        r = token_recall(expected.text, result.text)
        if r is not None:
            recalls.append(r)
    assert len(recalls) == 130
    assert sum(r >= 0.9 for r in recalls) >= 127  # measured 128


@pytest.mark.parametrize(
    "case", ["base-url", "base-url-base-element", "base-url-base-element-relative"]
)
def test_base_href_matches_readability(case):
    """Readability's expected output has the links as a browser resolved them
    (page URL http://fakehost/test/page.html, with or without <base>)."""
    source = gzip.decompress((READABILITY / case / "source.html.gz").read_bytes())
    expected = gzip.decompress((READABILITY / case / "expected.html.gz").read_bytes())
    src_hrefs = [a.get("href") for a in etree.fromstring(source, etree.HTMLParser()).iter("a")]
    exp_hrefs = [a.get("href") for a in etree.fromstring(expected, etree.HTMLParser()).iter("a")]
    assert len(src_hrefs) == len(exp_hrefs) == 8
    want = []
    for src, exp in zip(src_hrefs, exp_hrefs):
        if src.startswith("#"):
            continue  # fragment-only: dropped by design
        url = exp.split("#", 1)[0]
        if url not in want:
            want.append(url)
    got = [u for u, _ in extract_page(source, READABILITY_URL).links]
    assert got == want


# --------------------------------------------------------------------------
# Hand-written cases: links
# --------------------------------------------------------------------------

PAGE = "http://example.com/dir/page.html"


def links(html: str | bytes, url: str = PAGE, **kw) -> list[str]:
    body = html.encode("utf-8") if isinstance(html, str) else html
    return [u for u, _ in extract_page(body, url, **kw).links]


def test_relative_forms():
    html = """
      <a href="other.html">rel</a>
      <a href="/root.html">root</a>
      <a href="../up.html">up</a>
      <a href="./same.html">dot</a>
      <a href="sub/../x.html">dotdot inside</a>
      <a href="//cdn.example.org/lib">proto-relative</a>
      <a href="?q=1">query</a>
      <a href="https://other.example/abs">abs</a>
      <a href="HTTP://UPPER.Example/Path">upper</a>
    """
    assert links(html) == [
        "http://example.com/dir/other.html",
        "http://example.com/root.html",
        "http://example.com/up.html",
        "http://example.com/dir/same.html",
        "http://example.com/dir/x.html",
        "http://cdn.example.org/lib",
        "http://example.com/dir/page.html?q=1",
        "https://other.example/abs",
        "http://upper.example/Path",
    ]
    # Protocol-relative takes the page's scheme.
    assert links('<a href="//cdn.example.org/lib">x</a>', "https://example.com/") == [
        "https://cdn.example.org/lib"
    ]


def test_dropped_schemes_and_fragments():
    html = """
      <a href="javascript:void(0)">js</a>
      <a href=" JavaScript:alert(1)">js2</a>
      <a href="java&#10;script:alert(1)">js split by a newline</a>
      <a href="mailto:me@example.com">mail</a>
      <a href="data:text/html,hi">data</a>
      <a href="tel:+123">tel</a>
      <a href="ftp://ftp.example.com/f">ftp</a>
      <a href="about:blank">about</a>
      <a href="#top">frag</a>
      <a href="#">empty frag</a>
      <a href="">empty</a>
      <a>no href</a>
      <a href="http://[broken">broken</a>
      <a href="http://example.com:99999/">bad port</a>
      <a href="http://">no host</a>
      <a href="http://exa mple.com/">space in host</a>
      <a href="{{link}}">template placeholder</a>
      <a href="keep.html#section">kept, fragment cut</a>
    """
    assert links(html) == ["http://example.com/dir/keep.html"]


def test_whitespace_in_href_is_stripped():
    html = '<a href="  \n\tnext.html \r\n">n</a><a href="pa\tth/x.html">tab inside</a>'
    assert links(html) == [
        "http://example.com/dir/next.html",
        "http://example.com/dir/path/x.html",
    ]


def test_only_a_and_area_hrefs():
    html = """
      <link href="/style.css" rel="stylesheet"><script src="/app.js"></script>
      <img src="/img.png"><iframe src="/frame.html"></iframe>
      <script>var a = '<a href="/in-script">x</a>';</script>
      <style>a[href="/in-style"] {}</style>
      <map><area href="/area.html" alt="Area"></map>
      <a href="/a.html">a</a>
    """
    assert links(html) == ["http://example.com/area.html", "http://example.com/a.html"]


def test_base_href():
    absolute = '<head><base href="https://cdn.example.net/base/"></head><a href="x">x</a>'
    assert links(absolute) == ["https://cdn.example.net/base/x"]
    relative = '<head><base href="/other/"></head><a href="x">x</a><a href="/r">r</a>'
    assert links(relative) == ["http://example.com/other/x", "http://example.com/r"]
    # Only the first <base href> counts (a later one, or one without href,
    # changes nothing).
    two = '<base target="_top"><base href="/first/"><base href="/second/"><a href="x">x</a>'
    assert links(two) == ["http://example.com/first/x"]
    # A javascript: or unparseable base is ignored: the page URL is the base.
    assert links('<base href="javascript:alert(1)"><a href="x">x</a>') == [
        "http://example.com/dir/x"
    ]
    assert links('<base href="http://[oops/"><a href="x">x</a>') == ["http://example.com/dir/x"]
    # A base in the body still counts (browsers use the first in the document).
    assert links('<body><base href="/b/"><a href="x">x</a></body>') == ["http://example.com/b/x"]


def test_dedup_keeps_first_position_and_first_nonempty_anchor():
    html = """
      <a href="/a"><img src="logo.png"></a>
      <a href="/b">Bee</a>
      <a href="/a">  Alpha
         page </a>
      <a href="/a#x">Alpha again</a>
      <a href="/c"><img src="c.png" alt="Sea"> text</a>
    """
    result = extract_page(html.encode(), PAGE)
    assert result.links == [
        ("http://example.com/a", "Alpha page"),
        ("http://example.com/b", "Bee"),
        ("http://example.com/c", "text Sea"),
    ]


def test_anchor_text_is_capped():
    html = f'<a href="/x">{"word " * 1000}</a>'
    [(url, anchor)] = extract_page(html.encode(), PAGE, max_anchor_chars=50).links
    assert len(anchor) <= 50 and anchor.startswith("word word")


def test_non_ascii_urls_are_escaped_in_page_encoding():
    html = '<meta charset="windows-1251"><a href="/путь?q=слово">x</a>'
    [url] = links(html.encode("cp1251"))
    # Path as UTF-8 (as browsers send it), query in the page's encoding.
    assert url == "http://example.com/%D0%BF%D1%83%D1%82%D1%8C?q=%F1%EB%EE%E2%EE"
    assert links('<a href="http://bücher.example/x">x</a>') == ["http://xn--bcher-kva.example/x"]


def test_resolve_link_never_raises():
    for href in ["http://[", "http://[::1", "//[", "http://a:b:c/", "\x00", "%", "http://%zz/",
                 "https://a.com:-1/", "http:", "https:", "\\\\evil.com", "x" * 100_000]:
        resolve_link(PAGE, href)  # no exception
    assert resolve_link(PAGE, "\\\\evil.com\\x") == "http://evil.com/x"  # as browsers do


# --------------------------------------------------------------------------
# Hand-written cases: text and title
# --------------------------------------------------------------------------


def test_text_title_and_invisible_content():
    html = """<html><head><title>  The
        Title </title><style>p { color: red }</style>
        <script>var hidden = 1;</script></head>
      <body><h1>Head</h1><p>One <b>bold</b>word.</p><p>Two</p>
        <script>document.write("no")</script><noscript>Enable JS</noscript>
        <template><p>inert</p></template><!-- a comment -->
        <ul><li>a</li><li>b</li></ul>tail<br>after
      </body></html>"""
    result = extract_page(html.encode(), PAGE)
    assert result.title == "The Title"
    assert result.text == "Head One boldword. Two a b tail after"


def test_svg_title_is_not_the_page_title():
    html = "<html><body><svg><title>icon</title></svg><p>x</p></body></html>"
    assert extract_page(html.encode(), PAGE).title == ""
    html = "<head><title>Real</title></head><body><svg><title>icon</title></svg></body>"
    assert extract_page(html.encode(), PAGE).title == "Real"


def test_large_noscript_content_is_kept():
    # libxml2 leaves the rest of the page inside <noscript> when its end tag
    # comes while a child is open; browsers would show that content.
    html = "<body><noscript><div id=x></noscript>" + "<p>real content here</p>" * 20 + "</body>"
    assert "real content here" in extract_page(html.encode(), PAGE).text


def test_text_is_capped():
    html = "<p>" + "abcdefghi " * 50_000 + "</p>"
    text = extract_page(html.encode(), PAGE, max_text_chars=1000).text
    assert len(text) <= 1000 and text.startswith("abcdefghi abcdefghi")
    text = extract_page(html.encode(), PAGE, max_text_chars=100_000).text
    assert 99_990 <= len(text) <= 100_000


def test_text_normalisation_of_huge_text_matches_the_simple_one():
    """Big texts are whitespace-normalised in chunks (bounded memory); the
    result must equal " ".join(text.split())[:cap]."""
    import random

    from crawlproj.extract import _visible_text

    rng = random.Random(3)
    for trial in range(40):
        longest = 300_000 if trial % 7 == 0 else 8  # some words longer than a chunk
        words = ["ab"[trial % 2] * rng.randint(1, longest) for _ in range(rng.randint(1, 400))]
        words += ["".join(rng.choices("abc", k=rng.randint(1, 8))) for _ in range(2000)]
        rng.shuffle(words)
        seps = [rng.choice([" ", "\n", "  \t ", " " * rng.randint(1, 5_000)]) for _ in words]
        raw = "".join(w + s for w, s in zip(words, seps))
        root = etree.fromstring(b"<html><body><pre>x</pre></body></html>", etree.HTMLParser())
        root.find("body/pre").text = raw
        for cap in (50, 1000, 30_000):
            assert _visible_text(root, cap) == " ".join(raw.split())[:cap].rstrip()


def test_one_giant_word():
    result = extract_page(b"<p>" + b"a" * 20_000_000, PAGE)  # completes (speed: a bench matter)
    assert result.text == "a" * 100_000


# --------------------------------------------------------------------------
# Broken input never raises
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   \n\t  ",
        b"\x00\x00\x00",
        b"<",
        b"<html",
        b"<!-- never closed",
        b"<?xml version='1.0' encoding='utf-8'?><html><body><p>xhtml</p></body></html>",
        b"<p>unclosed <b>tags <i>everywhere <a href='/x'>link",
        b"<p>stray \xff\xfe\xfa bytes and a \x00 NUL \x0b\x1f controls</p><a href='/y'>y</a>",
        b"<p>&#1; &#0; &#xFFFF; &#xD800; entities</p>",
        b"</p></div></body></html>",
        b"<table><tr><td><div></table></div>",
        b"\xef\xbb\xbf<p>BOM</p>",
        b"<div>" * 5000 + b"deep" + b"</div>" * 5000,
        b"<title>" + b"t" * 100_000,
        bytes(range(256)) * 10,
    ],
)
def test_broken_html_never_raises(body):
    result = extract_page(body, PAGE)
    assert isinstance(result, Extracted)
    assert isinstance(result.text, str) and isinstance(result.title, str)
    assert len(result.title) <= 1000


def test_broken_html_gives_partial_results():
    result = extract_page(b"<p>unclosed <b>tags <i>everywhere <a href='/x'>link", PAGE)
    assert result.text == "unclosed tags everywhere link"
    assert result.links == [("http://example.com/x", "link")]
    result = extract_page(b"<p>a\x00b \x0b c</p><a href='/y'>y</a>", PAGE)
    assert result.links == [("http://example.com/y", "y")]
    assert "c" in result.text


def test_empty_and_whitespace_bodies():
    assert extract_page(b"", PAGE) == Extracted(encoding=extract_page(b"", PAGE).encoding)
    result = extract_page(b"  \r\n ", PAGE)
    assert (result.title, result.text, result.links) == ("", "", [])


def test_page_url_that_is_not_http():
    # Relative links cannot be resolved against it; absolute ones still count.
    html = b'<a href="/x">x</a><a href="https://ok.example/">ok</a>'
    assert links(html, url="about:blank") == ["https://ok.example/"]


# --------------------------------------------------------------------------
# Encodings
# --------------------------------------------------------------------------

_ENC_PAGE = "<html><head>{meta}<title>{text}</title></head><body><p>{text}</p></body></html>"


@pytest.mark.parametrize(
    "charset, text",
    [
        ("iso-8859-1", "Café crème brûlée à la française"),
        ("windows-1251", "Привет, мир: съешь же ещё этих мягких булок"),
        ("shift_jis", "日本語のテキスト、カタカナとひらがな"),
        ("euc-kr", "한국어 텍스트"),
        ("gb2312", "中文文本测试"),
    ],
)
def test_declared_encodings(charset, text):
    in_meta = _ENC_PAGE.format(meta=f'<meta charset="{charset}">', text=text).encode(charset)
    result = extract_page(in_meta, PAGE)
    assert (result.title, result.text) == (text, text)
    in_http_equiv = _ENC_PAGE.format(
        meta=f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">', text=text
    ).encode(charset)
    assert extract_page(in_http_equiv, PAGE).title == text
    # Declared only in the HTTP header.
    bare = _ENC_PAGE.format(meta="", text=text).encode(charset)
    assert extract_page(bare, PAGE, content_type=f"text/html; charset={charset}").title == text
    as_bytes = f"text/html; charset={charset}".encode()
    assert extract_page(bare, PAGE, content_type=as_bytes).title == text
    # Given by the caller (Scrapy's response.encoding).
    assert extract_page(bare, PAGE, charset).title == text
    # Through Scrapy's own detection, as the spider does it.
    response = HtmlResponse(
        PAGE, body=bare, headers={"Content-Type": f"text/html; charset={charset}"}
    )
    assert extract_page(response.body, response.url, response.encoding).text == text


def test_header_encoding_wins_over_meta_via_scrapy():
    body = '<meta charset="utf-8"><p>Fran\xe7ais</p>'.encode("latin-1")
    response = HtmlResponse(PAGE, body=body, headers={"Content-Type": "text/html; charset=latin-1"})
    assert extract_page(response.body, response.url, response.encoding).text == "Français"


def test_utf16_with_bom_and_unknown_encoding_name():
    body = "\ufeff<title>Ünïcödé</title>".encode("utf-16-le")
    assert extract_page(body, PAGE).title == "Ünïcödé"
    # An encoding name Python does not know falls back to detection.
    assert extract_page("<title>é</title>".encode(), PAGE, "x-no-such-charset").title == "é"


def test_meta_charset_does_not_override_given_encoding():
    # The bytes are UTF-8; a stale declaration must not make libxml2 re-decode.
    body = '<meta charset="shift_jis"><title>é日本</title>'.encode()
    assert extract_page(body, PAGE, "utf-8").title == "é日本"


# --------------------------------------------------------------------------
# Huge pages
# --------------------------------------------------------------------------


def _huge_page(n_links: int = 200_000) -> bytes:
    parts = [b"<html><head><title>Huge</title></head><body>"]
    for i in range(n_links):
        parts.append(
            b'<div class="item"><p>Item %d with some words of text</p>'
            b'<a href="/page/%d?x=1">link %d</a></div>\n' % (i, i, i)
        )
    parts.append(b"</body></html>")
    return b"".join(parts)


def test_huge_page_completes_and_caps():
    body = _huge_page()
    assert len(body) > 20_000_000
    result = extract_page(body, "http://example.com/")
    assert result.title == "Huge"
    assert len(result.links) == DEFAULT_MAX_LINKS == 10_000
    assert result.links_dropped == 190_000
    assert result.links[0] == ("http://example.com/page/0?x=1", "link 0")
    assert len(result.text) <= 100_000 and result.text.startswith("Item 0 with some words")


def test_huge_page_memory_is_bounded():
    """Peak memory of extracting a 23 MB page in a fresh interpreter (measured
    ~450 MB maxrss, of which ~275 MB is libxml2's tree)."""
    code = (
        "import resource, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
        "from tests.test_extract import _huge_page\n"
        "from crawlproj.extract import extract_page\n"
        "body = _huge_page()\n"
        "r = extract_page(body, 'http://example.com/')\n"
        "assert len(r.links) == 10000\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    maxrss_mb = int(out.stdout.strip()) / 1024
    assert maxrss_mb < 1024


def test_max_html_chars_bounds_the_parse():
    body = _huge_page(20_000)
    result = extract_page(body, "http://example.com/", max_html_chars=100_000)
    assert 0 < len(result.links) < 2_000


# --------------------------------------------------------------------------
# Content types: what is parsed at all
# --------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100)
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(50)
GZIP = b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes(20)
ZIP = b"PK\x03\x04" + bytes(30)
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(20)
HTML = b"<!DOCTYPE html><html><body><a href='/x'>x</a></body></html>"


def test_mime_type():
    assert mime_type(b"text/HTML; charset=UTF-8") == "text/html"
    assert mime_type(" application/xhtml+xml ") == "application/xhtml+xml"
    assert mime_type(None) == mime_type(b"") == mime_type("garbage") == ""


@pytest.mark.parametrize(
    "content_type, body, expected",
    [
        ("text/html", HTML, True),
        ("text/html; charset=utf-8", HTML, True),
        ("application/xhtml+xml", HTML, True),
        ("TEXT/HTML", HTML, True),
        ("text/html", b"", True),  # empty: parsed, gives nothing
        ("text/html", b"<p>a few stray \x00 NUL \x00 bytes</p>" * 10, True),
        ("text/html", PNG, False),  # mislabelled image
        ("text/html", GZIP, False),  # compressed body left compressed
        ("image/png", PNG, False),
        ("image/jpeg", JPEG, False),
        ("application/pdf", PDF, False),
        ("application/octet-stream", HTML, False),
        ("application/json", b'{"a": "<html>"}', False),
        ("text/plain", HTML, False),
        ("application/xml", b"<?xml version='1.0'?><rss/>", False),
        ("text/css", b"body{}", False),
        # No Content-Type: sniffed.
        (None, HTML, True),
        (None, b"  \n<html><p>x", True),
        (None, b"<!-- comment --><p>x</p>", True),
        (None, b"\xef\xbb\xbf<html>", True),
        (None, "\ufeff<html><p>x</p></html>".encode("utf-16-le"), True),
        (None, PNG, False),
        (None, PDF, False),
        (None, JPEG, False),
        (None, ZIP, False),
        (None, MP4, False),
        (None, b"<html>\x00<p>binary after all", False),
        (None, b"just some text", False),
        (None, b'{"json": true}', False),
        ("", HTML, True),
        ("unknown/unknown", HTML, True),
        ("garbage-without-slash", PNG, False),
    ],
)
def test_is_html_type(content_type, body, expected):
    assert is_html_type(content_type, body) is expected


def test_looks_binary():
    assert looks_binary(PNG) and looks_binary(PDF) and looks_binary(b"a\x00b")
    assert not looks_binary(b"a\x00b" + b"x" * 100, strict=False)
    assert not looks_binary(b"") and not looks_binary(HTML)


def test_is_html_on_scrapy_responses():
    assert is_html(HtmlResponse(PAGE, body=HTML, headers={"Content-Type": "text/html"}))
    # Scrapy picks HtmlResponse from the ".html" in the URL; the body is a JPEG.
    assert not is_html(HtmlResponse("http://example.com/photo.html", body=JPEG))
    assert not is_html(Response("http://example.com/x", body=PNG))
    assert is_html(Response("http://example.com/x", body=HTML))  # no Content-Type: sniffed
    assert not is_html(
        TextResponse(PAGE, body=b'{"a":1}', headers={"Content-Type": "application/json"})
    )
