"""Trap hosts of the simulated web: crawler traps and hostile servers.

With the generate option ``traps`` (``"all"`` or comma-separated names), the
simulated web also serves one host per trap, ``<name>.trap.example``, beside
its ordinary hosts. Each trap's root ``/`` is an ordinary page that leads
into the trap; ``web.trap_seeds()`` lists the roots (``scrapy simweb serve
--traps all --seeds-out FILE`` writes them after the ordinary seeds).

Two families:

* URL-space traps, ordinary HTML pages whose links never end: calendars,
  session ids in paths, ``/a/a/a/...``, relative links under a soft 404,
  query parameters piling up, redirect loops and chains. A polite crawler
  fetches a few of their pages and stops; ``TRAPS[name].worth`` fetches of
  the host (besides ``/`` and robots.txt) are worth making, and every other
  fetch is wasted.
* Hostile responses, which the server sends as no ordinary page:
  decompression bombs (gzip, deflate, br, zstd: a few KB that expand to
  1 GiB), endless bodies and headers, slow drips, silence, huge headers,
  a 10 MB page, 100,000 links on a page. A crawler must bound each in memory
  and time and keep crawling other hosts.

Every response is a pure function of the host and path, like the rest of the
simulated web: the server and a test build the same answers.
"""

from __future__ import annotations

import functools
import hashlib
import html
import re
import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import parse_qsl, urlencode

from crawlproj.errors import CrawlprojError

from .responses import HTML, TEXT, Response

__all__ = ["TRAPS", "TrapHosts", "trap_names"]

SUFFIX = ".trap.example"
GiB = 1 << 30

# The template every trap page shares, as a real site's pages share their
# header and footer: what makes a calendar's months near duplicates.
_HEADER = ("Riverside community portal home news events clubs sports schools "
           "libraries parks transport waste recycling council contact search")
_FOOTER = ("About this site accessibility statement privacy notice cookie settings "
           "terms of use copyright Riverside community portal all rights reserved "
           "follow us newsletter sign up report a problem with this page")


def _page(title: str, text: str, links: list[tuple[str, str]], head: str = "") -> bytes:
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(a)}</a></li>\n'
                    for h, a in links)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title>{head}</head>\n<body><nav>{_HEADER}</nav>\n<h1>{html.escape(title)}</h1>\n"
            f"<p>{html.escape(text)}</p>\n<ul>\n{items}</ul>\n<footer>{_FOOTER}</footer>\n"
            "</body></html>\n").encode()


def _ok(title: str, text: str, links: list[tuple[str, str]], head: str = "") -> Response:
    return Response(200, HTML, _page(title, text, links, head))


def _redirect(location: str, status: int = 302) -> Response:
    return Response(status, HTML, b"<html><body>moved</body></html>\n", location=location)


def _not_found() -> Response:
    return Response(404, HTML, b"<html><body><h1>Not Found</h1></body></html>\n")


def _token(*parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=6).hexdigest()


_NO_EVENTS = "no events are listed for this day"


def _distinct(path: str, query: str = "") -> str:
    """Sixty words of its own for the page at path: pages that no
    near-duplicate test joins, so that a URL rule has to stop their trap."""
    digest = hashlib.blake2b(f"{path}?{query}".encode(), digest_size=60).digest()
    return " ".join(_SYLLABLES[b % 50] + _SYLLABLES[(b * 7 + 3) % 50] + _SYLLABLES[b // 5 % 50]
                    for b in digest)


_SYLLABLES = [c + v for c in "bdfgklmnpr" for v in "aeiou"]


# ---- URL-space traps ------------------------------------------------------------

def calendar(path: str, query: str) -> Response:
    """A month view with links to the previous and next months and years:
    every month of every year exists."""
    m = re.fullmatch(r"/events/(\d{4})/(\d{2})/", path)
    if not m:
        return _not_found()
    y, mo = int(m[1]), int(m[2])
    if not 1 <= mo <= 12 or not 1000 <= y <= 9999:
        return _not_found()

    def month(yy: int, mm: int) -> str:
        yy, mm = yy + (mm - 1) // 12, (mm - 1) % 12 + 1
        return f"/events/{yy:04d}/{mm:02d}/"
    days = " ".join(f"{d} {_NO_EVENTS}" for d in range(1, 29))
    return _ok(f"Events in {y}-{mo:02d}", f"Community events calendar {days}",
               [(month(y, mo - 1), "previous month"), (month(y, mo + 1), "next month"),
                (month(y - 1, mo), "previous year"), (month(y + 1, mo), "next year")])


def soft404(path: str, query: str) -> Response:
    """Every path answers 200 with a "not found" page that names it and has
    relative links: each page makes three deeper ones."""
    return _ok("Page not found", f"Sorry, we could not find {path} on this site. "
               "Try the help pages, the search or the contact form.",
               [("help/", "help"), ("search/", "search"), ("contact/", "contact")])


def session_path(path: str, query: str) -> Response:
    """Five articles, each linking to the next under a new session id in the
    path: /s/<id>/article<k>.html."""
    m = re.fullmatch(r"/s/([0-9a-f]{12})/article(\d)\.html", path)
    if not m:
        return _not_found()
    k = int(m[2])
    if k > 4:
        return _not_found()
    sid = _token("sid", m[1])
    return _ok(f"Article {k}", f"Article number {k} of the community news. "
               + ARTICLES[k], [(f"/s/{sid}/article{(k + 1) % 5}.html", "next article"),
                               (f"/s/{sid}/article0.html", "first article")])


ARTICLES = [
    "The river festival returns in June with boats music and food stalls along the quay",
    "Library opening hours change in winter as the reading room is refurbished",
    "School sports day results football relay and long jump champions announced",
    "New cycle lanes connect the station with the market square from next spring",
    "Volunteers planted four hundred trees in the park over one weekend",
]


def session_query(path: str, query: str) -> Response:
    """Links carry a new jsessionid each time: a parameter the DUE strips."""
    sid = _token("q", query)
    return _ok("Welcome", "Members area of the community portal. " + ARTICLES[0],
               [(f"/?jsessionid={sid}", "home"), (f"/?jsessionid={sid}&x=1", "more")])


def repeat_path(path: str, query: str) -> Response:
    """A relative link "a/" on every page: /a/, /a/a/, /a/a/a/, ..."""
    return _ok("Directory", _distinct(path), [("a/", "subdirectory")])


def alternate_path(path: str, query: str) -> Response:
    """Relative links "x/y/" on every page: /x/y/x/y/..., no segment twice in a row."""
    return _ok("Directory", _distinct(path), [("x/y/", "subdirectory")])


def deep_path(path: str, query: str) -> Response:
    """One distinct segment deeper on every page: /d1/d2/d3/..."""
    n = path.rstrip("/").count("/") + 1
    return _ok("Archive", _distinct(path), [(f"d{n}/", "deeper")])


def param_append(path: str, query: str) -> Response:
    """Every page links to itself with one more distinct parameter."""
    params = parse_qsl(query)
    more = urlencode(params + [(f"f{len(params)}", "1")])
    return _ok("Search results", _distinct(path, query), [(f"/list?{more}", "add a filter")])


def param_repeat(path: str, query: str) -> Response:
    """Every page links to itself with the same parameter once more."""
    return _ok("Search results", "No results match your filters.",
               [(f"/list?{query + '&' if query else ''}page=1", "next")])


def facets(path: str, query: str) -> Response:
    """A shop's facets: each link sets one of three facets to one of four
    values, keeping the others (4^3 combinations, in any order)."""
    params = dict(parse_qsl(query))
    links = []
    for facet in ("colour", "size", "brand"):
        for v in ("a", "b", "c", "d"):
            links.append((f"/shop?{urlencode({**params, facet: v})}", f"{facet} {v}"))
    return _ok("Shop", "No products match this selection. Try other filters.", links)


def long_url(path: str, query: str) -> Response:
    """Every page links to a URL 120 characters longer."""
    return _ok("Item", _distinct(path),
               [(f"{path.rstrip('/')}/{'x' * 119}/", "related item")])


def pagination(path: str, query: str) -> Response:
    """Pages of a list that has three pages of items, and "next" forever."""
    n = int(dict(parse_qsl(query)).get("page", "1") or 1) if query.startswith("page=") else 1
    items = ARTICLES[n - 1] if n <= 3 else "There are no more items in this list."
    return _ok("Listing", items, [(f"/list?page={n + 1}", "next page")])


def counter_path(path: str, query: str) -> Response:
    """/n/1, /n/2, ...: the same page under every number."""
    m = re.fullmatch(r"/n/(\d+)", path)
    n = int(m[1]) if m else 0
    return _ok("Gallery", "This gallery has no pictures yet.", [(f"/n/{n + 1}", "next")])


def redirect_loop(path: str, query: str) -> Response:
    """/loop/a redirects to /loop/b, which redirects back."""
    return _redirect("/loop/b" if path == "/loop/a" else "/loop/a")


def redirect_chain(path: str, query: str) -> Response:
    """/chain/<n> redirects to /chain/<n+1>, forever."""
    m = re.fullmatch(r"/chain/(\d+)", path)
    return _redirect(f"/chain/{int(m[1]) + 1 if m else 1}", 301)


def redirect_grow(path: str, query: str) -> Response:
    """/g/ redirects to /g/g/, which redirects to /g/g/g/, ..."""
    return _redirect(path.rstrip("/") + "/g/")


def redirect_self(path: str, query: str) -> Response:
    """A redirect to the very URL asked for."""
    return _redirect(path + (f"?{query}" if query else ""), 301)


def redirect_param(path: str, query: str) -> Response:
    """/r?i=<n> redirects to /r?i=<n+1>, forever."""
    n = int(query[2:]) if query.startswith("i=") and query[2:].isdigit() else 0
    return _redirect(f"/r?i={n + 1}")


def meta_refresh(path: str, query: str) -> Response:
    """A page that refreshes to the next page, forever."""
    m = re.fullmatch(r"/m/(\d+)", path)
    n = int(m[1]) + 1 if m else 1
    return _ok("Please wait", "Redirecting.", [],
               head=f'<meta http-equiv="refresh" content="0; url=/m/{n}">')


def fragments(path: str, query: str) -> Response:
    """A page with 2,000 links to itself, each with its own #fragment."""
    return _ok("Contents", "Table of contents. " + ARTICLES[1],
               [(f"/frag#s{i}", f"section {i}") for i in range(2000)])


def dot_segments(path: str, query: str) -> Response:
    """Links whose dot segments resolve to the page itself."""
    return _ok("Dots", "Every link here leads back here. " + ARTICLES[2],
               [(f"./{'x/../' * i}dots", f"link {i}") for i in range(50)])


def many_links(path: str, query: str) -> Response:
    """100,000 distinct links, each a filter combination with 15 parameters."""
    return Response(200, HTML, _links_page("&".join("abcdefghijklmn")))


@functools.lru_cache(maxsize=1)
def _links_page(more: str) -> bytes:
    items = "".join(f'<a href="/item?id={i}&amp;{more.replace("&", "&amp;")}">{i}</a>\n'
                    for i in range(100_000))
    return f"<html><head><title>All items</title></head><body>{items}</body></html>".encode()


def big_page(path: str, query: str) -> Response:
    """A 10 MB HTML page of text and links."""
    return Response(200, HTML, _big_page())


@functools.lru_cache(maxsize=1)
def _big_page() -> bytes:
    para = "<p>" + " ".join(ARTICLES) + ' <a href="/big">again</a></p>\n'
    n = 10_000_000 // len(para) + 1
    return ("<html><head><title>Big</title></head><body>" + para * n
            + "</body></html>").encode()


def invalid_utf8(path: str, query: str) -> Response:
    """A page that says UTF-8 and is not."""
    body = _page("Broken", "bytes that are not UTF-8 follow", [("/", "home")])
    return Response(200, HTML, body.replace(b"<p>", b"<p>\xff\xfe\xc3(\xa0\xed\xa0\x80", 1))


# ---- hostile responses ----------------------------------------------------------

@functools.cache
def _deflate_zeros(size: int) -> tuple[bytes, int, int]:
    """(raw deflate stream of size zero bytes, its CRC-32, its Adler-32),
    made in about a second: after a full flush the compressor's output for
    the next MiB of zeros does not depend on what came before, so it is
    made once and repeated."""
    mib = b"\0" * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    middle = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(mib) + c.flush()
    n = size >> 20
    crc, adler = 0, 1
    for _ in range(n):
        crc, adler = zlib.crc32(mib, crc), zlib.adler32(mib, adler)
    return first + middle * (n - 2) + last, crc, adler


@functools.cache
def bomb(encoding: str, size: int = GiB) -> bytes:
    """size zero bytes compressed with encoding (gzip, deflate, br, zstd)."""
    if encoding in ("gzip", "deflate"):
        raw, crc, adler = _deflate_zeros(size)
        if encoding == "gzip":
            return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + raw
                    + struct.pack("<II", crc, size & 0xFFFFFFFF))
        return b"\x78\xda" + raw + struct.pack(">I", adler)
    mib = b"\0" * (1 << 20)
    if encoding == "br":
        import brotli
        c = brotli.Compressor(quality=1)  # 1 GiB in 190 KB, made in half a second
        return b"".join(c.process(mib) for _ in range(size >> 20)) + c.finish()
    if encoding == "zstd":
        try:
            from compression import zstd
        except ImportError:
            from backports import zstd
        c = zstd.ZstdCompressor()
        return b"".join(c.compress(mib) for _ in range(size >> 20)) + c.flush()
    raise ValueError(f"no such encoding: {encoding}")


def _bomb_response(encoding: str, layers: int = 1) -> Callable[[str, str], Response]:
    def respond(path: str, query: str) -> Response:
        if path != "/bomb":
            return _not_found()
        body = bomb(encoding)
        for _ in range(layers - 1):
            body = zlib.compress(body, 9, wbits=31) if encoding == "gzip" else body
        return Response(200, HTML, body,
                        headers=(("Content-Encoding", ", ".join([encoding] * layers)),))
    respond.__doc__ = f"1 GiB of zeros as a {encoding} body{' twice encoded' * (layers > 1)}."
    return respond


def _stream(kind: str, path_: str = "/x", **headers: str) -> Callable[[str, str], Response]:
    def respond(path: str, query: str) -> Response:
        if path != path_:
            return _not_found()
        return Response(200, HTML, _page("Slow", ARTICLES[3], [("/", "home")]),
                        headers=tuple(headers.items()), stream=kind)
    return respond


def huge_header(path: str, query: str) -> Response:
    """One 1 MiB header."""
    return Response(200, HTML, _page("Header", ARTICLES[4], [("/", "home")]),
                    headers=(("X-Filler", "a" * (1 << 20)),))


def many_headers(path: str, query: str) -> Response:
    """100,000 headers of 20 bytes."""
    return Response(200, HTML, _page("Headers", ARTICLES[4], [("/", "home")]),
                    headers=tuple((f"X-F{i}", "v") for i in range(100_000)))


def length_lie(path: str, query: str) -> Response:
    """Content-Length: 10 GiB, then an endless body."""
    return Response(200, HTML, b"", headers=(("Content-Length", str(10 * GiB)),),
                    stream="endless")


class Trap(NamedTuple):
    entry: str                # the root page links here
    respond: Callable[[str, str], Response]  # (path, query) -> Response
    worth: int = 0            # fetches worth making besides / and /robots.txt
    hostile: bool = False     # a hostile response rather than a URL space


_BOMBS = {f"{e}-bomb": Trap("/bomb", _bomb_response(e), hostile=True)
          for e in ("gzip", "deflate", "br", "zstd")}

TRAPS: dict[str, Trap] = {
    "calendar": Trap("/events/2030/01/", calendar),
    "soft404": Trap("/nothing-here/", soft404),
    "session-path": Trap(f"/s/{'0' * 12}/article0.html", session_path, worth=5),
    "session-query": Trap("/?jsessionid=start", session_query),
    "repeat-path": Trap("/a/", repeat_path),
    "alternate-path": Trap("/x/y/", alternate_path),
    "deep-path": Trap("/d1/", deep_path),
    "param-append": Trap("/list?f0=1", param_append),
    "param-repeat": Trap("/list?page=1", param_repeat),
    "facets": Trap("/shop", facets),
    "long-url": Trap("/item/", long_url),
    "pagination": Trap("/list?page=1", pagination,
                       worth=3),
    "counter-path": Trap("/n/1", counter_path),
    "redirect-loop": Trap("/loop/a", redirect_loop),
    "redirect-chain": Trap("/chain/1", redirect_chain),
    "redirect-grow": Trap("/g/", redirect_grow),
    "redirect-self": Trap("/self", redirect_self),
    "redirect-param": Trap("/r?i=1", redirect_param),
    "meta-refresh": Trap("/m/1", meta_refresh),
    "fragments": Trap("/frag", fragments, worth=1),
    "dot-segments": Trap("/dots", dot_segments, worth=1),
    "many-links": Trap("/all", many_links, worth=1, hostile=True),
    "big-page": Trap("/big", big_page, worth=1, hostile=True),
    "invalid-utf8": Trap("/broken", invalid_utf8, worth=1, hostile=True),
    **_BOMBS,
    "gzip-bomb-twice": Trap("/bomb", _bomb_response("gzip", layers=2), hostile=True),
    "endless-body": Trap("/x", _stream("endless"), hostile=True),
    "length-lie": Trap("/x", length_lie, hostile=True),
    "slow-drip": Trap("/x", _stream("drip"), hostile=True),
    "slow-head": Trap("/x", _stream("drip_head"), hostile=True),
    "silent": Trap("/x", _stream("silent"), hostile=True),
    "endless-head": Trap("/x", _stream("endless_head"), hostile=True),
    "huge-header": Trap("/x", huge_header, worth=1, hostile=True),
    "many-headers": Trap("/x", many_headers, worth=1, hostile=True),
}


class NoSuchTrap(CrawlprojError, ValueError):
    """A trap name that TRAPS lacks; the message is one line."""


def trap_names(spec: str) -> list[str]:
    """The trap names of the generate option ``traps``: "" (none), "all", or
    comma-separated names."""
    spec = (spec or "").strip()
    if not spec:
        return []
    if spec == "all":
        return list(TRAPS)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in TRAPS]
    if unknown:
        raise NoSuchTrap(f"no such trap: {', '.join(unknown)} (known: {', '.join(TRAPS)})")
    return names


class TrapHosts:
    """The trap hosts of one simulated web."""

    def __init__(self, names: list[str]):
        self.names = names
        self.by_host = {f"{n}{SUFFIX}": TRAPS[n] for n in names}

    def prepare(self) -> None:
        """Make the large answers now (a server calls this before it serves)."""
        for trap in self.by_host.values():
            if trap.hostile:
                trap.respond(trap.entry, "")

    def hosts(self) -> list[str]:
        return list(self.by_host)

    def seeds(self) -> list[str]:
        return [f"http://{h}/" for h in self.by_host]

    def wasted(self, host: str, paths: list[str]) -> int:
        """How many of these fetches of host (paths, one per request) were
        not worth making."""
        inside = [p for p in paths if p not in ("/", "/robots.txt")]
        return max(0, len(inside) - self.by_host[host].worth)

    def respond(self, host: str, path: str) -> Response | None:
        """The answer of trap host `host` to GET path (with its query); None
        for a host that is no trap."""
        trap = self.by_host.get(host)
        if trap is None:
            return None
        if path == "/robots.txt":
            return Response(404, TEXT, b"no robots.txt\n")
        if path == "/":
            return _ok(f"Welcome to {host}", "A community site. " + ARTICLES[2],
                       [(trap.entry, "start here")])
        route, _, query = path.partition("?")
        return trap.respond(route, query)
