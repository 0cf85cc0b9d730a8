"""Link and text extraction from fetched pages, with lxml.

This is the crawler's Link Extractor [Mercator §3, steps 5-6: the processing
module for text/html converts each link of a page into an absolute URL for the
URL filter and the DUE], plus the page's title and text. It runs on every page
of a broad crawl, so:

* each page is decoded once and parsed once, and the title, the visible text
  and the links all come from that one tree;
* nothing here raises on bad input: broken markup, stray or NUL bytes, an empty
  body or a document libxml2 refuses give an empty or partial result;
* memory is bounded: at most ``max_links`` distinct links are kept (the rest are
  only counted), the text is capped at ``max_text_chars``, anchors at
  ``max_anchor_chars``.

Content-type handling (:func:`is_html`, :func:`is_html_type`) decides what is
parsed at all, as Mercator picks processing modules by content type: only
``text/html`` and ``application/xhtml+xml``, or, when the server sent no usable
Content-Type, a body that sniffs as HTML and not binary.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from typing import Any

from lxml import etree
from w3lib.encoding import html_to_unicode, read_bom, to_unicode

from crawlproj.robots.meta import NOTHING, Directives, is_nofollow_rel, parse_content, refresh_url
from crawlproj.urls import resolve

__all__ = [
    "Extracted",
    "extract_page",
    "is_html",
    "is_html_type",
    "looks_binary",
    "mime_type",
    "resolve_link",
    "HTML_TYPES",
    "DEFAULT_MAX_LINKS",
    "DEFAULT_MAX_TEXT_CHARS",
    "DEFAULT_MAX_ANCHOR_CHARS",
    "DEFAULT_MAX_TITLE_CHARS",
    "DEFAULT_MAX_HTML_CHARS",
]

DEFAULT_MAX_LINKS = 10_000
DEFAULT_MAX_TEXT_CHARS = 100_000  # = PAGE_TEXT_MAX_CHARS's default
DEFAULT_MAX_ANCHOR_CHARS = 200
# An unclosed <title> swallows the rest of the document (browsers do the same),
# so the title needs a cap of its own.
DEFAULT_MAX_TITLE_CHARS = 1_000
# Only the first 32 Mi characters of a page are parsed (DOWNLOAD_MAXSIZE is
# 16 MiB in settings/base.py, so this only bites if that is raised).
DEFAULT_MAX_HTML_CHARS = 32 * 1024 * 1024

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# Content types that carry no information: the body is sniffed instead
# (WHATWG MIME Sniffing §7.1 treats these like a missing header).
_UNKNOWN_TYPES = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})

# Elements whose content is never rendered. Scripts and styles hold no links.
# <template> content is inert until a script copies it into the page, which
# sites do for lazily rendered menus and footers: its links are followed (as
# Scrapy's LinkExtractor does), unless they are unfilled placeholders such as
# "{{link}}", but its text is not page text.
_INERT_TAGS = ("script", "style")
_TEMPLATE_TAGS = ("template",)
# <noscript>: its links are kept (it is the no-JavaScript fallback, and a
# crawler is a client without JavaScript), its text is dropped as fallback
# boilerplate ("please enable JavaScript") unless it holds a large share of the
# page's text: see _drop_noscript_text().
_NOSCRIPT_SHARE = 1 / 3
# Characters lxml refuses in text (XML 1.0 forbids them). libxml2's HTML parser
# lets them into the tree, and the tree edits below would then fail.
_XML_ILLEGAL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

# Elements that separate words: their start and end get a space, so that
# "<p>a</p><p>b</p>" gives "a b" and not "ab", while inline markup such as
# "<b>W</b>ord" stays one word.
_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "body", "br", "button",
    "caption", "dd", "details", "dialog", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hgroup", "hr", "iframe", "img", "input", "label", "legend",
    "li", "main", "menu", "nav", "ol", "option", "p", "pre", "section",
    "select", "summary", "table", "tbody", "td", "textarea", "tfoot", "th",
    "thead", "tr", "ul", "video", "audio", "canvas", "svg", "math",
)  # fmt: skip

_HTML5_WS = " \t\n\r\f"


@dataclass(slots=True)
class Extracted:
    """What :func:`extract_page` found on one page.

    ``links`` are ``(absolute_url, anchor_text)`` pairs in document order,
    de-duplicated by URL: the first occurrence fixes the position, and its
    anchor text is kept unless it is empty, in which case the first non-empty
    anchor of a later occurrence is used (an image link without alt text
    followed by a text link to the same URL is common).

    ``links_dropped`` counts the ``<a href>``/``<area href>`` elements that
    were not examined because ``max_links`` distinct links had already been
    kept (an upper bound on the distinct links lost: some may be duplicates or
    invalid).
    """

    title: str = ""
    text: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)
    #: URL -> the text around its first link (before and after the element,
    #: within its parent), each side at most ``max_anchor_chars``
    around: dict[str, str] = field(default_factory=dict)
    links_dropped: int = 0
    encoding: str | None = None
    #: what the page's robots meta tags say to this crawler (crawlproj/robots/meta.py)
    robots: Directives = NOTHING
    #: the URLs of ``links`` whose every link is rel="nofollow" (or ugc, sponsored)
    nofollow: frozenset[str] | set[str] = frozenset()
    #: the page's ``<link rel="canonical">`` in its head, resolved; None if it
    #: names none, or several that disagree
    canonical: str | None = None
    #: where its ``<meta http-equiv="refresh">`` leads, resolved; None if nowhere
    refresh: str | None = None


# --------------------------------------------------------------------------
# Content types and sniffing
# --------------------------------------------------------------------------


def mime_type(content_type: bytes | str | None) -> str:
    """The lower-cased ``type/subtype`` of a Content-Type value, or ``""``.

    Parameters (``; charset=...``) are dropped. A value without a ``/`` is not
    a MIME type and gives ``""`` (treated as missing).
    """
    if not content_type:
        return ""
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    value = content_type.split(";", 1)[0].strip(_HTML5_WS).lower()
    return value if "/" in value else ""


# Leading bytes of common binary formats (WHATWG MIME Sniffing §6 and a few
# more that crawlers meet): images, audio/video, archives, PDF, fonts, wasm.
_BINARY_MAGIC = (
    b"%PDF-", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a",
    b"RIFF", b"BM", b"\x00\x00\x01\x00", b"\x1f\x8b\x08", b"PK\x03\x04",
    b"PK\x05\x06", b"Rar!\x1a\x07", b"7z\xbc\xaf\x27\x1c", b"BZh",
    b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"OggS", b"ID3", b"fLaC",
    b"\x1aE\xdf\xa3", b"wOFF", b"wOF2", b"\x00\x01\x00\x00", b"OTTO",
    b"\x00asm", b"\xca\xfe\xba\xbe", b"\x7fELF", b"MZ", b"\xd0\xcf\x11\xe0",
    b"II*\x00", b"MM\x00*", b"\x00\x00\x00\x0cjP  ",
)  # fmt: skip
# Signatures made only of printable ASCII ("BM", "MZ", "RIFF", "OTTO", ...) can
# begin a text page too: they count only when the server named no type.
_BINARY_MAGIC_TEXTLIKE = tuple(
    m
    for m in _BINARY_MAGIC
    if all(32 <= b < 127 for b in m) and m not in (b"%PDF-", b"GIF87a", b"GIF89a")
)
_BINARY_MAGIC_STRONG = tuple(m for m in _BINARY_MAGIC if m not in _BINARY_MAGIC_TEXTLIKE)
# ISO BMFF (MP4, MOV, AVIF, HEIC): "ftyp" at offset 4.
_FTYP = b"ftyp"
# Bytes that never occur in text (WHATWG MIME Sniffing §7.2 "binary data byte").
_BINARY_BYTES = frozenset(
    b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0e\x0f\x10\x11\x12\x13\x14"
    b"\x15\x16\x17\x18\x19\x1a\x1c\x1d\x1e\x1f"
)
_SNIFF_BYTES = 1024


def looks_binary(body: bytes, *, strict: bool = True) -> bool:
    """True when the start of ``body`` is a known binary format.

    A UTF-16/UTF-32 byte-order mark means text. Otherwise a known magic number
    means binary; with ``strict`` (used when the server sent no Content-Type)
    so do the all-ASCII signatures ("BM", "RIFF", ...) and any binary-data
    byte (NUL and other C0 controls) in the first KiB, as WHATWG sniffing
    does. Without ``strict`` (the server said HTML) a page may start with a
    word such as "OTTO", a few stray NUL bytes are tolerated and only a body
    that is mostly control bytes counts as binary, so a broken HTML page is
    still parsed.
    """
    head = body[:_SNIFF_BYTES]
    if not head:
        return False
    if head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    if head.startswith(_BINARY_MAGIC_STRONG) or head[4:8] == _FTYP:
        return True
    if strict and head.startswith(_BINARY_MAGIC_TEXTLIKE):
        return True
    n_binary = sum(1 for b in head if b in _BINARY_BYTES)
    if strict:
        return n_binary > 0
    return n_binary * 10 > len(head)  # over 10% control bytes


# WHATWG MIME Sniffing §7.1, "identifying a resource with an unknown MIME
# type": the HTML patterns, after leading whitespace, followed by a space or ">".
_HTML_SNIFF_RE = re.compile(
    rb"[\t\n\x0c\r ]*(?:<!DOCTYPE HTML|<HTML|<HEAD|<SCRIPT|<IFRAME|<H1|<DIV|"
    rb"<FONT|<TABLE|<A|<STYLE|<TITLE|<B|<BODY|<BR|<P)[ >]|[\t\n\x0c\r ]*<!--",
    re.IGNORECASE,
)


def _sniffs_as_html(body: bytes) -> bool:
    head = body[:_SNIFF_BYTES]
    bom, _ = read_bom(head)
    if bom is not None and not bom.startswith("utf-8"):
        # UTF-16/32 text: look at the decoded start instead of the raw bytes.
        try:
            head = to_unicode(head, bom).lstrip("\ufeff").encode("ascii", "ignore")
        except LookupError:  # pragma: no cover - w3lib only returns known codecs
            return False
    elif head.startswith(codecs.BOM_UTF8):
        head = head[3:]
    return _HTML_SNIFF_RE.match(head) is not None


def is_html_type(content_type: bytes | str | None, body: bytes) -> bool:
    """Whether a body with this Content-Type header value is parsed as HTML.

    * ``text/html`` / ``application/xhtml+xml``: yes, unless the body starts
      with a binary magic number or is mostly control bytes (servers do label
      images as text/html);
    * a missing or meaningless type (``""``, ``unknown/unknown``, ``*/*``):
      the body is sniffed: binary bytes or magic → no; an HTML start → yes;
    * anything else (images, PDF, ``application/octet-stream``, JSON, XML,
      ``text/plain``, ...): never.
    """
    mime = mime_type(content_type)
    if mime in HTML_TYPES:
        return not looks_binary(body, strict=False)
    if mime in _UNKNOWN_TYPES:
        return not looks_binary(body, strict=True) and _sniffs_as_html(body)
    return False


def is_html(response: Any) -> bool:
    """Whether a Scrapy response is parsed as HTML (see :func:`is_html_type`).

    Decided from the Content-Type header and the body, not from the response
    class: Scrapy picks ``HtmlResponse`` from the URL's file extension too, and
    an ``.html`` URL may well serve a JPEG.
    """
    content_type = response.headers.get(b"Content-Type")
    return is_html_type(content_type, response.body)


# --------------------------------------------------------------------------
# Decoding and parsing
# --------------------------------------------------------------------------


def _decode(
    body: bytes, encoding: str | None, content_type: bytes | str | None
) -> tuple[str, str]:
    """Decode ``body`` once: a byte-order mark wins, then the caller's encoding
    (e.g. Scrapy's ``TextResponse.encoding``, which already weighed the HTTP
    header, the ``<meta charset>`` and auto-detection), else w3lib's detection
    from the header and the body's own declaration (defaulting to UTF-8)."""
    if encoding:
        bom_enc, bom = read_bom(body)
        if bom_enc is not None and bom is not None:
            return bom_enc, to_unicode(body[len(bom) :], bom_enc)
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            name = None
        if name is not None:
            return name, to_unicode(body, name)
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    header = f"text/html; {content_type}" if content_type else None
    enc, text = html_to_unicode(header, body)
    try:
        enc = codecs.lookup(enc).name
    except LookupError:  # pragma: no cover - w3lib decoded with it already
        pass
    return enc, text


def _parse(text: str) -> etree._Element | None:
    """Parse decoded HTML. Returns the root, or None for an empty document.

    The text is handed to libxml2 as UTF-8 bytes with the encoding forced:
    libxml2 then ignores any ``<meta charset>`` or XML declaration (the
    decision was made in :func:`_decode`), and lxml does not refuse str input
    that carries an XML encoding declaration (XHTML pages do).
    """
    parser = etree.HTMLParser(
        encoding="utf-8",
        remove_comments=True,  # comment text is neither visible nor anchor text
        remove_pis=True,
        no_network=True,
        # Lifts libxml2's nesting limit (256 → 2048; unclosed tags nest) and
        # its 10 MB text-node limit; the HTML parser expands no entities, so
        # this opens no XML entity-expansion attack.
        huge_tree=True,
        default_doctype=False,
    )
    text = _XML_ILLEGAL_RE.sub(" ", text)
    data = text.encode("utf-8", "replace")
    try:
        return etree.fromstring(data, parser)
    except (etree.LxmlError, ValueError, UnicodeError):
        return None


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


# --------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------


# What the URL parser strips from the start of an href: C0 controls and space.
_C0_SPACE = "".join(map(chr, range(0x21)))


def resolve_link(base: str, href: str, encoding: str = "utf-8") -> str | None:
    """The URL a link ``href`` leads to from a page whose base URL is ``base``,
    or None.

    The crawl's URL rule resolves it (:func:`crawlproj.urls.resolve`: the
    WHATWG URL Standard, as a browser does; the query in the page's
    ``encoding``; the fragment removed); None when the result is not an
    http(s) URL or does not parse. None also for hrefs that lead to no other
    resource: an empty or fragment-only href (the page itself, fetched
    already) and a client-side template placeholder such as ``{{link}}``.
    Never raises.
    """
    first = href[:1]
    if first <= " " or first == "#":  # ("" <= " ")
        start = href.lstrip(_C0_SPACE)
        if not start or start[0] == "#":
            return None
    if "{{" in href:
        return None
    return resolve(href, base, encoding)


@dataclass(slots=True)
class _Tags:
    """What the page's <base>, <meta> and <link> elements say."""

    base: str
    robots: Directives = NOTHING
    canonical: str | None = None
    refresh: str | None = None


def _anchor_text(el: etree._Element, max_chars: int) -> str:
    if el.tag == "area":
        raw = el.get("alt") or ""
    else:
        raw = "".join(el.itertext())
        # Image links: the alt text is the anchor text, "the words that
        # describe a link to another document" [WebCrawler], which a
        # prioritizer may match against a topic.
        alts = [img.get("alt") for img in el.iter("img")]
        if alts:
            raw = " ".join([raw, *filter(None, alts)])
    if len(raw) > 4 * max_chars + 64:
        raw = raw[: 4 * max_chars + 64]  # bound the work on giant anchors
    return _norm_ws(raw)[:max_chars].rstrip()


def _around_text(el: etree._Element, max_chars: int) -> str:
    """The text next to a link inside its parent: what precedes it (the
    previous sibling's tail, or the parent's text) and what follows (its
    tail), the words that often say where a link leads when its anchor is
    short [WebCrawler: "anchor texts are usually short"]."""
    prev = el.getprevious()
    if prev is not None:
        before = prev.tail or ""
    else:
        parent = el.getparent()
        before = (parent.text or "") if parent is not None else ""
    before = _norm_ws(before[-(4 * max_chars + 64):])[-max_chars:].lstrip()
    after = _norm_ws((el.tail or "")[: 4 * max_chars + 64])[:max_chars].rstrip()
    return f"{before} {after}".strip()


def _extract_links(
    root: etree._Element,
    page_url: str,
    encoding: str,
    max_links: int,
    max_anchor_chars: int,
    around: dict[str, str] | None = None,
    nofollow: set[str] | None = None,
    tags: _Tags | None = None,
    robots_names: frozenset[str] | None = None,
) -> tuple[list[tuple[str, str]], int]:
    """The page's links (see :class:`Extracted`), and what its <base>,
    <meta> and <link> elements say (into ``tags``), from one walk over the
    tree.

    Links resolve against the document base URL: the first ``<base href>``
    resolved against the page URL (HTML §2.4.1 "frozen base URL": only the
    first ``<base>`` with an ``href`` counts), unless it is not a valid
    http(s) URL, in which case the page URL itself is the base. It applies to
    the whole document, links before it too: a page whose <base> comes after
    a link (seldom) is walked again.

    ``nofollow``, when given, gets the URLs whose every link has a nofollow
    link type: a URL linked both ways is followed (the site vouches for it
    once). ``robots_names``: the meta names whose robots directives apply
    (None: not read). A canonical link counts in the head only, where Google
    reads it (a body holds what visitors wrote), and only when every one
    there that names an http(s) URL names the same URL (RFC 6596 §5:
    several are an error; Debian's Sphinx manuals add one to a file: URL);
    the first refresh counts, as in browsers, wherever it is.
    """
    base = page_url
    while True:
        # url -> [url, anchor]; a dict keeps insertion (document) order.
        found: dict[str, list[str]] = {}
        # raw href -> resolved URL or None: navigation repeats the same hrefs,
        # and resolving is the costly part.
        resolved: dict[str, str | None] = {}
        dropped = 0
        base_href = refresh = None
        canonicals: list[str] = []
        robots = NOTHING
        again = False
        for el in root.iter("a", "area", "base", "meta", "link"):
            tag = el.tag
            if tag == "a" or tag == "area":
                href = el.get("href")
                if href is None:
                    continue
                if dropped:
                    # Cap reached: count what is left, without resolving it.
                    dropped += 1
                    continue
                if href in resolved:
                    url = resolved[href]
                else:
                    url = resolved[href] = resolve_link(base, href, encoding)
                if url is None:
                    continue
                entry = found.get(url)
                if entry is None:
                    if len(found) >= max_links:
                        dropped = 1
                        continue
                    found[url] = [url, _anchor_text(el, max_anchor_chars)]
                    if around is not None:
                        text = _around_text(el, max_anchor_chars)
                        if text:
                            around[url] = text
                    if nofollow is not None:
                        rel = el.get("rel")
                        if rel is not None and is_nofollow_rel(rel):
                            nofollow.add(url)
                    continue
                if not entry[1]:
                    entry[1] = _anchor_text(el, max_anchor_chars)
                if nofollow and url in nofollow:
                    rel = el.get("rel")
                    if rel is None or not is_nofollow_rel(rel):
                        nofollow.discard(url)
            elif tag == "meta":
                name = el.get("name")
                if name is not None:
                    if robots_names is not None and name.strip(_HTML5_WS).lower() in robots_names:
                        robots = robots | parse_content(el.get("content"))
                elif refresh is None:
                    equiv = el.get("http-equiv")
                    if equiv is not None and equiv.strip(_HTML5_WS).lower() == "refresh":
                        refresh = el.get("content") or None
            elif tag == "link":
                rel = el.get("rel")
                if rel is not None and "canonical" in rel.lower().split():
                    href = el.get("href")
                    parent = el.getparent()
                    if href is not None and parent is not None and parent.tag == "head":
                        canonicals.append(href)
            elif base_href is None:
                base_href = el.get("href")
                if base_href is not None:
                    frozen = resolve(base_href, page_url) or page_url
                    if frozen != base:
                        again = bool(resolved)
                        base = frozen
                        if again:
                            break
        if not again:
            break
        # the links met before the <base> resolved against the page URL
        if around is not None:
            around.clear()
        if nofollow is not None:
            nofollow.clear()
    if tags is not None:
        tags.base, tags.robots = base, robots
        if canonicals:
            named = {resolve_link(base, href, encoding) for href in canonicals[:16]}
            named.discard(None)
            if len(named) == 1:
                tags.canonical = named.pop()
        if refresh is not None:
            tags.refresh = refresh_url(refresh, base)
    return [(u, a) for u, a in found.values()], dropped


# --------------------------------------------------------------------------
# Title and text
# --------------------------------------------------------------------------


def _title(root: etree._Element, max_chars: int) -> str:
    # The first <title> of the document, as browsers take it, but not an
    # inline <svg><title> (a tooltip, in the SVG namespace for browsers; lxml's
    # HTML parser has no namespaces, so look at the ancestors).
    el = root.find("head/title")
    if el is None:
        for candidate in root.iter("title"):
            if not any(a.tag in ("svg", "math") for a in candidate.iterancestors()):
                el = candidate
                break
    if el is None:
        return ""
    raw = "".join(el.itertext())
    return _norm_ws(raw[: 4 * max_chars + 64])[:max_chars].rstrip()


def _mark_blocks(root: etree._Element) -> None:
    """Put a space at the start and end of every word-separating element, so
    that serialising the tree as text keeps block boundaries as spaces."""
    for el in root.iter(*_BLOCK_TAGS):
        text = el.text
        tail = el.tail
        try:
            el.text = " " + text if text else " "
            el.tail = " " + tail if tail else " "
        except ValueError:
            # A character reference such as &#1; put a control character in
            # the tree (the input itself was cleaned in _parse()).
            el.text = " " + _XML_ILLEGAL_RE.sub(" ", text) if text else " "
            el.tail = " " + _XML_ILLEGAL_RE.sub(" ", tail) if tail else " "


def _text_of(el: etree._Element) -> str:
    return etree.tostring(el, method="text", encoding="unicode", with_tail=False)


def _drop_noscript_text(body: etree._Element, raw: str) -> str:
    """Remove <noscript> content from the text, except where it is a large
    share of the page.

    A browser running scripts shows none of it, but a large <noscript> is
    either the page's real content for clients without scripts (some blog
    platforms) or the result of a mis-nesting: browsers read <noscript> as
    raw text up to the first </noscript>, libxml2 parses markup inside it and
    ignores a </noscript> met while a child element is still open
    (``<noscript><div></noscript>``), so the rest of the page ends up inside.
    Returns the text to use.
    """
    total = len(raw)
    dropped = False
    for ns in list(body.iter("noscript")):
        parent = ns.getparent()
        if parent is None:
            continue  # inside a <noscript> removed already
        if len(_text_of(ns)) < total * _NOSCRIPT_SHARE:
            _remove_keep_tail(ns, parent)
            dropped = True
    return _text_of(body) if dropped else raw


def _remove_keep_tail(el: etree._Element, parent: etree._Element) -> None:
    """Remove ``el`` and its content, keeping the text that follows it."""
    tail = el.tail
    if tail:
        tail = _XML_ILLEGAL_RE.sub(" ", tail)
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(el)


def _visible_text(root: etree._Element, max_chars: int) -> str:
    body = root.find("body")
    if body is None:
        # A frameset page or a tree libxml2 built oddly: everything but <head>.
        for head in root.findall("head"):
            root.remove(head)
        body = root
    raw = _text_of(body)
    if body.find(".//noscript") is not None:
        raw = _drop_noscript_text(body, raw)
    # Normalise in bounded chunks: at most about max_chars characters of words
    # are kept, whatever the page size.
    if len(raw) <= 2 * max_chars + 1024:
        return _norm_ws(raw)[:max_chars].rstrip()
    words: list[str] = []
    size = 0
    step = max(4 * max_chars, 65536)
    pos = 0
    carry = ""
    while pos < len(raw) and size <= max_chars:
        chunk = carry + raw[pos : pos + step]
        pos += step
        parts = chunk.split()
        # The last word of the chunk may continue in the next one.
        if pos < len(raw) and parts and not chunk[-1].isspace():
            carry = parts.pop()
            if len(carry) > max_chars:  # one giant "word": it fills the cap
                parts.append(carry)
                carry = ""
        else:
            carry = ""
        for w in parts:
            words.append(w)
            size += len(w) + 1
            if size > max_chars:
                break
    return " ".join(words)[:max_chars].rstrip()


# --------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------


def extract_page(
    body: bytes,
    url: str,
    encoding: str | None = None,
    *,
    content_type: bytes | str | None = None,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    max_links: int = DEFAULT_MAX_LINKS,
    max_anchor_chars: int = DEFAULT_MAX_ANCHOR_CHARS,
    max_title_chars: int = DEFAULT_MAX_TITLE_CHARS,
    max_html_chars: int = DEFAULT_MAX_HTML_CHARS,
    robots_names: frozenset[str] | None = None,
) -> Extracted:
    """Title, visible text and links of an HTML page, from one parse.

    ``body`` is the raw response body; ``url`` the page's (final) URL, against
    which relative links and ``<base href>`` are resolved. ``encoding`` is the
    page's encoding if already known (pass Scrapy's ``response.encoding``);
    when None it is detected from ``content_type`` (the Content-Type header
    value) and the body (BOM, ``<meta charset>``, default UTF-8). Undecodable
    bytes become U+FFFD.

    Links come from ``<a href>`` and ``<area href>`` only; see
    :func:`resolve_link` for what is dropped and :class:`Extracted` for the
    de-duplication and cap rules. Text excludes ``<head>``, ``<script>``,
    ``<style>``, ``<template>`` and ``<noscript>`` (but see
    :func:`_drop_noscript_text` for a large ``<noscript>``); whitespace is
    collapsed to single spaces. Never raises on any body.

    From the same tree: the page's canonical link and refresh target, and,
    with ``robots_names`` (the lower-case meta names addressed to this
    crawler: crawlproj.robots.meta.agent_tokens and "robots"), its robots meta
    tags and the links marked nofollow; None reads neither.
    """
    try:
        enc, text = _decode(body, encoding, content_type)
    except Exception:  # any codec failure: give up on the page
        return Extracted()
    if not text or text.isspace():
        return Extracted(encoding=enc)
    if len(text) > max_html_chars:
        # Bound the tree (libxml2 needs about 12 bytes per byte of HTML): the
        # rest of the page is ignored, as DOWNLOAD_MAXSIZE would have done.
        text = text[:max_html_chars]
    root = _parse(text)
    del text
    if root is None:
        return Extracted(encoding=enc)
    # Each stage is guarded on its own so that one failure keeps the rest.
    # Defensive only: no failure is known (the input was cleaned in _parse()).
    title = page_text = ""
    links: list[tuple[str, str]] = []
    around: dict[str, str] = {}
    nofollow: set[str] | None = set() if robots_names is not None else None
    dropped = 0
    tags = _Tags(url)
    try:
        title = _title(root, max_title_chars)
    except Exception:  # a page must never kill the callback
        pass
    try:
        etree.strip_elements(root, *_INERT_TAGS, with_tail=False)
        _mark_blocks(root)
        links, dropped = _extract_links(root, url, enc, max_links, max_anchor_chars, around,
                                        nofollow, tags, robots_names)
    except Exception:
        pass
    try:
        etree.strip_elements(root, *_TEMPLATE_TAGS, with_tail=False)
    except Exception:
        pass
    try:
        page_text = _visible_text(root, max_text_chars)
    except Exception:
        pass
    return Extracted(
        title=title, text=page_text, links=links, around=around, links_dropped=dropped,
        encoding=enc, robots=tags.robots, nofollow=nofollow or frozenset(),
        canonical=tags.canonical, refresh=tags.refresh,
    )
