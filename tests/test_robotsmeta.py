"""crawlproj.robots.meta and its part of crawlproj.extract: robots meta tags,
X-Robots-Tag, rel=nofollow, canonical links and refreshes, as real sites
write them, and as hostile or broken pages do."""

from __future__ import annotations

import calendar
import os
from pathlib import Path

import pytest

from crawlproj.extract import extract_page
from crawlproj.robots.meta import (
    NOTHING,
    Directives,
    agent_tokens,
    is_nofollow_rel,
    link_header_canonical,
    parse_content,
    parse_x_robots_tag,
    refresh_url,
)

AGENTS = agent_tokens("crawlproj", "crawlproj/0.1 (+https://example.org/about)")
NAMES = AGENTS | {"robots"}
NOW = calendar.timegm((2025, 6, 1, 0, 0, 0))
PAGE = "http://docs.python.test/library/json.html"
PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
REAL_WEB_REQUIRED = os.environ.get("REAL_WEB_TESTS") == "required"


# --------------------------------------------------------------------------
# Meta content
# --------------------------------------------------------------------------


@pytest.mark.parametrize("content, expected", [
    ("noindex", Directives(noindex=True)),
    ("NOINDEX, NOFOLLOW", Directives(noindex=True, nofollow=True)),
    (" noindex ,nofollow ", Directives(noindex=True, nofollow=True)),
    ("none", Directives(noindex=True, nofollow=True)),
    ("noarchive", Directives(noarchive=True)),
    ("nocache", Directives(noarchive=True)),  # Bing's name for it
    ("nosnippet, max-image-preview:large", Directives(nosnippet=True)),
    ("noindex nofollow", Directives(noindex=True, nofollow=True)),  # spaces for commas
    ("index, follow", NOTHING),
    ("all", NOTHING),
    ("max-snippet:-1, max-image-preview:large, max-video-preview:-1", NOTHING),
    ("noimageindex, notranslate, noodp", NOTHING),
    ("", NOTHING),
    (None, NOTHING),
    (",,, ;;; \x00\ufffd", NOTHING),
    ("noindex\x00", NOTHING),  # not the word
    ("follow, noindex, index", Directives(noindex=True)),  # the restrictive one wins
])  # fmt: skip
def test_meta_content(content, expected):
    assert parse_content(content, NOW) == expected


def test_unavailable_after_dates():
    # RFC 822, RFC 850 (with a comma of its own), ISO 8601; passed or not
    for value in ("25 Jun 2010 15:00:00 PST", "Friday, 25-Jun-10 15:00:00 GMT",
                  "2010-06-25T15:00:00+00:00", "2010-06-25"):
        assert parse_content(f"unavailable_after: {value}", NOW) == Directives(noindex=True), value
    assert parse_content("unavailable_after: 2099-01-01", NOW) == NOTHING
    assert parse_content("unavailable_after: Friday, 25-Jun-99 15:00:00 GMT, nofollow", NOW) \
        == Directives(noindex=True, nofollow=True)
    assert parse_content("unavailable_after: when pigs fly", NOW) == NOTHING
    assert parse_content("unavailable_after:", NOW) == NOTHING


def test_directives_combine():
    a, b = Directives(noindex=True), Directives(nofollow=True, noarchive=True)
    assert a | b == Directives(noindex=True, nofollow=True, noarchive=True)
    assert (a | NOTHING) is a and (NOTHING | b) is b
    assert not NOTHING and bool(a)
    assert (a | b).names() == ["noindex", "nofollow", "noarchive"]


# --------------------------------------------------------------------------
# X-Robots-Tag
# --------------------------------------------------------------------------


@pytest.mark.parametrize("values, expected", [
    ([b"noindex"], Directives(noindex=True)),
    ([b"noindex, nofollow"], Directives(noindex=True, nofollow=True)),
    ([b"noindex", b"nofollow"], Directives(noindex=True, nofollow=True)),  # several headers
    ([b"crawlproj: noindex"], Directives(noindex=True)),
    ([b"CrawlProj : NoIndex"], Directives(noindex=True)),
    ([b"otherbot: nofollow"], NOTHING),
    ([b"googlebot: noindex", b"otherbot: noindex, nofollow"], NOTHING),
    ([b"googlebot: noindex, crawlproj: nofollow"], Directives(nofollow=True)),
    ([b"crawlproj: noarchive, googlebot: noindex"], Directives(noarchive=True)),
    ([b"otherbot: noindex", b"nofollow"], Directives(nofollow=True)),
    ([b"unavailable_after: 25 Jun 2010 15:00:00 PST"], Directives(noindex=True)),
    ([b"crawlproj: unavailable_after: 25 Jun 2010 15:00:00 PST"], Directives(noindex=True)),
    ([b"max-snippet: 20, noarchive"], Directives(noarchive=True)),
    ([b"all"], NOTHING),
    ([b""], NOTHING),
    ([], NOTHING),
    (None, NOTHING),
    ([b"\xff\xfe:noindex"], NOTHING),  # a name nobody answers to
    ([b"::::,,,"], NOTHING),
    (["noindex"], Directives(noindex=True)),  # str values too
])  # fmt: skip
def test_x_robots_tag(values, expected):
    assert parse_x_robots_tag(values, AGENTS, NOW) == expected


def test_agent_tokens():
    assert agent_tokens("crawlproj", "crawlproj/1.0 (+mailto:a@b.example)") == {"crawlproj"}
    assert agent_tokens("mybot", "MyBot/2.1 (+https://x.example/)") == {"crawlproj", "mybot"}
    # a User-Agent that is no product token adds nothing
    assert agent_tokens(None, "Mozilla/5.0 (compatible; x)") == {"crawlproj", "mozilla"}
    assert agent_tokens("", "") == {"crawlproj"}
    assert agent_tokens("bad name!", "a b/1") == {"crawlproj"}
    tokens = agent_tokens("MyBot", None)
    assert parse_x_robots_tag([b"mybot: noindex"], tokens) == Directives(noindex=True)


# --------------------------------------------------------------------------
# Link types, Link headers, refreshes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("rel, nofollow", [
    ("nofollow", True), ("NoFollow", True), ("noopener nofollow", True),
    ("ugc", True), ("sponsored noopener", True), ("\tnofollow\n", True),
    ("noopener noreferrer", False), ("bookmark", False), ("", False),
    ("nofollowers", False), ("sponsoredby", False), ("follow", False),
])  # fmt: skip
def test_nofollow_rels(rel, nofollow):
    assert is_nofollow_rel(rel) is nofollow


@pytest.mark.parametrize("values, expected", [
    ([b'<https://example.org/a>; rel="canonical"'], "https://example.org/a"),
    ([b"</a?x=1>; rel=canonical"], "http://docs.python.test/a?x=1"),
    ([b'<https://cdn.example/s.css>; rel="preload"; as="style", <https://example.org/a>; rel="canonical"'],
     "https://example.org/a"),
    ([b'<https://example.org/a>; rel="alternate canonical"'], "https://example.org/a"),
    ([b'<https://example.org/a>; rel="alternate"'], None),
    ([b'<https://example.org/a>; rel="canonical"', b'<https://example.org/b>; rel="canonical"'], None),
    ([b'<javascript:alert(1)>; rel="canonical"'], None),
    ([b'<>; rel="canonical"'], "http://docs.python.test/library/json.html"),
    ([b"garbage; rel=canonical"], None),
    ([b"<<<>>>;;;"], None),
    ([], None),
])  # fmt: skip
def test_link_header_canonical(values, expected):
    assert link_header_canonical(values, PAGE) == expected


@pytest.mark.parametrize("content, expected", [
    ("0; url=https://example.org/next", "https://example.org/next"),
    ("0;URL='/next.html'", "http://docs.python.test/next.html"),
    ('5 ; Url = "next.html" trailing', "http://docs.python.test/library/next.html"),
    ("3, next.html", "http://docs.python.test/library/next.html"),
    ("1.5; url=/n", "http://docs.python.test/n"),
    ("0 url=/n", "http://docs.python.test/n"),
    (".5; url=/n", "http://docs.python.test/n"),
    ("30", None),  # a reload of the page itself
    ("30;", None),
    ("", None),
    (None, None),
    ("soon; url=/n", None),  # no delay: browsers ignore it
    ("0; url=javascript:alert(1)", None),
    ("0; url='", None),
    (b"0; url=/bytes", "http://docs.python.test/bytes"),
])  # fmt: skip
def test_refresh_url(content, expected):
    assert refresh_url(content, PAGE) == expected


# --------------------------------------------------------------------------
# In the extraction's one pass
# --------------------------------------------------------------------------


TAGGED = b"""<!DOCTYPE html><html><head><title>Tagged</title>
<meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="Robots" content="noindex">
<meta name="googlebot" content="nofollow, noarchive">
<meta name=" CRAWLPROJ " content="noarchive">
<link rel="stylesheet" href="/s.css"><link rel="Canonical" href="/library/canonical.html">
<meta http-equiv="REFRESH" content="10; url=/library/next.html">
<meta http-equiv="refresh" content="0; url=/second-refresh-ignored">
</head><body>
<a href="a.html">a</a>
<a href="b.html" rel="nofollow">b, nofollow</a>
<a href="c.html" rel="ugc">c, ugc</a> <a href="c.html">c again, followed</a>
<a href="d.html" rel="sponsored noopener">d</a> <a href="d.html" rel="nofollow">d again</a>
<area href="e.html" rel="nofollow" alt="e">
<link rel="canonical" href="/in-the-body.html">
</body></html>"""


def test_extracted_tags():
    e = extract_page(TAGGED, PAGE, robots_names=NAMES)
    assert e.robots == Directives(noindex=True, noarchive=True)  # googlebot's are not ours
    assert e.canonical == "http://docs.python.test/library/canonical.html"  # the head's
    assert e.refresh == "http://docs.python.test/library/next.html"  # the first
    base = "http://docs.python.test/library/"
    assert [u for u, _ in e.links] == [base + x for x in ("a.html", "b.html", "c.html", "d.html", "e.html")]
    assert e.nofollow == {base + "b.html", base + "d.html", base + "e.html"}  # c is linked both ways
    # not asked: no robots tags, no marks; canonical and refresh all the same
    plain = extract_page(TAGGED, PAGE)
    assert plain.robots == NOTHING and not plain.nofollow
    assert plain.canonical == e.canonical and plain.refresh == e.refresh


def test_base_after_links_and_canonical_conflicts():
    # the frozen base URL applies to the links before the <base> too (HTML §2.4.1)
    body = b"""<html><body><a href="x.html" rel="nofollow">x</a>
    <base href="http://other.test/dir/"><a href="y.html">y</a></body></html>"""
    e = extract_page(body, PAGE, robots_names=NAMES)
    assert e.links == [("http://other.test/dir/x.html", "x"), ("http://other.test/dir/y.html", "y")]
    assert e.nofollow == {"http://other.test/dir/x.html"}
    two = b"""<html><head><link rel=canonical href=/a><link rel=canonical href=/b></head></html>"""
    assert extract_page(two, PAGE).canonical is None  # RFC 6596 §5: several are an error
    same = b"""<html><head><link rel=canonical href=/a><link rel=canonical href=/a></head></html>"""
    assert extract_page(same, PAGE).canonical == "http://docs.python.test/a"
    # one that names no http(s) URL does not count (Debian's manuals name a file: URL)
    odd = b"""<html><head><link rel=canonical href="file:///usr/share/doc/x.html">
    <link rel=canonical href="/a"><link rel=canonical href="javascript:void(0)"></head></html>"""
    assert extract_page(odd, PAGE).canonical == "http://docs.python.test/a"


@pytest.mark.parametrize("body", [
    b"", b"\x00\x01\x02", b"<meta name=robots content>", b"<meta name=robots>",
    b"<meta content=noindex>", b"<link rel=canonical>", b"<link rel=canonical href='javascript:x'>",
    b"<meta http-equiv=refresh>", b"<meta http-equiv=refresh content='0; url=http://[::1'>",
    b"<a rel=nofollow>no href</a>",
    "<meta name=robots content='n\u00f6index'><a href='\u00e9' rel='n\u00f6follow'>x</a>".encode(),
])  # fmt: skip
def test_garbage_says_nothing(body):
    e = extract_page(body, PAGE, robots_names=NAMES)
    assert e.robots == NOTHING and not e.nofollow and e.canonical is None and e.refresh is None


def test_real_page_with_tags_injected(tmp_path):
    """A real page of the Python manual, as nginx serves it in the end-to-end
    test, with tags put into its head and a link's rel changed."""
    source = PYTHON_DOCS / "library" / "json.html"
    if not source.is_file():  # CI installs it (REAL_WEB_TESTS=required): fail there
        message = f"{source} (Debian: python3.11-doc) is not installed"
        if REAL_WEB_REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    html = source.read_bytes()
    plain = extract_page(html, PAGE, robots_names=NAMES)
    assert plain.robots == NOTHING and plain.refresh is None and plain.canonical is None
    # the manual's own "Show Source" link is rel="nofollow"
    assert plain.nofollow == {"https://github.com/python/cpython/blob/3.11/Doc/library/json.rst"}
    assert len(plain.links) > 20
    target = next(u for u, _ in plain.links if u.endswith("/library/pickle.html"))
    tagged = html.replace(b"<head>", b'<head><meta name="robots" content="noindex,nofollow">', 1) \
        .replace(b'href="pickle.html', b'rel="nofollow" href="pickle.html')
    e = extract_page(tagged, PAGE, robots_names=NAMES)
    assert e.robots == Directives(noindex=True, nofollow=True)
    assert target in e.nofollow
    assert [u for u, _ in e.links] == [u for u, _ in plain.links]
    assert e.text == plain.text and e.title == plain.title
