"""Reading one sitemap file: the sitemaps.org protocol, within its limits.

A sitemap is XML (a ``<urlset>`` of ``<url>`` entries, or a
``<sitemapindex>`` of ``<sitemap>`` entries, each with a ``<loc>`` and an
optional ``<lastmod>``) or plain text (one URL a line), either of them
possibly gzip-compressed (sitemaps.org, "Sitemap file location", "Other
formats"). The protocol caps a file at 50,000 URLs and 50 MB uncompressed;
:class:`SitemapReader` stops there, whatever the file claims:

- gzip is told by its magic bytes (RFC 1952 §2.3.1: 1f 8b), not by the
  Content-Type or the file name, and inflated a chunk at a time, never past
  the byte limit: a gzip bomb costs the limit, not its ratio;
- XML is parsed as a stream (lxml's iterparse, fed that inflated stream a
  chunk at a time through its XMLPullParser form), each entry dropped from
  the tree once read, with no entity resolved (a
  "billion laughs" stays a few references), no DTD loaded, no network, and
  lxml's default bounds on text and depth (huge_tree off);
- what was read before a problem (malformed XML, a cut gzip, a limit) is
  kept: the entries come out as they are parsed, and the problem is said
  once, at the end (:attr:`SitemapReader.problems`).

No Scrapy and no Redis here: bytes in, entries out.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from lxml import etree

__all__ = ["Entry", "SitemapReader", "GZIP_MAGIC"]

GZIP_MAGIC = b"\x1f\x8b"
# Bytes handed to the parser (or the inflater) at a time.
CHUNK = 64 * 1024
# Enough of a file's start to tell XML, HTML and text apart.
SNIFF = 512

# kinds of file
URLSET, INDEX, TEXT = "urlset", "index", "text"


@dataclass(frozen=True)
class Entry:
    """One entry of a sitemap: its <loc> (or text line) and raw <lastmod>."""

    loc: str
    lastmod: str | None = None


class _Stream:
    """The file's bytes as a file object, inflated when gzip, cut at limit
    bytes (``cut`` is then True, as it is at the end of a body whose download
    was stopped: body_cut); ``bad_gzip`` holds what zlib said of a stream
    that is not gzip after all, or was cut short."""

    def __init__(self, body: bytes, limit: int, body_cut: bool = False):
        self.body, self.limit, self.body_cut = body, limit, body_cut
        self.pos = 0           # bytes of body consumed
        self.out = 0           # bytes handed out
        self.cut = False
        self.bad_gzip: str | None = None
        self.gzip = body[:2] == GZIP_MAGIC
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gzip else None
        self._pending = b""    # inflated bytes not handed out yet

    def _inflate(self, want: int) -> bytes:
        z = self._z
        out = []
        got = 0
        while got < want and self.bad_gzip is None:
            data = z.unconsumed_tail
            if not data:
                if z.eof:
                    # RFC 1952 §2.2: members may follow one another
                    rest = z.unused_data
                    if not rest.strip(b"\x00"):
                        break
                    if rest[:2] != GZIP_MAGIC:
                        self.bad_gzip = "bytes after the gzip stream"
                        break
                    self.body = rest
                    self.pos = 0
                    z = self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    continue
                if self.pos >= len(self.body):
                    if self.body_cut:
                        self.cut = True
                    else:
                        self.bad_gzip = "the gzip stream ends early (truncated)"
                    break
                data = self.body[self.pos:self.pos + CHUNK]
                self.pos += len(data)
            try:
                # max_length: never more than asked, whatever the ratio
                chunk = z.decompress(data, want - got)
            except zlib.error as exc:
                self.bad_gzip = f"not gzip after its first bytes ({exc})"
                break
            if chunk:
                out.append(chunk)
                got += len(chunk)
        return b"".join(out)

    def read(self, n: int = CHUNK) -> bytes:
        if n is None or n < 0:
            n = CHUNK
        room = self.limit - self.out
        if room <= 0:
            if self._more():
                self.cut = True
            return b""
        n = min(n, room)
        if self._z is None:
            data = self.body[self.pos:self.pos + n]
            self.pos += len(data)
            if not data and self.body_cut:
                self.cut = True
        else:
            data = self._pending[:n]
            self._pending = self._pending[n:]
            if len(data) < n:
                data += self._inflate(n - len(data))
        self.out += len(data)
        return data

    def _more(self) -> bool:
        """Is there anything past the limit?"""
        if self._z is None:
            return self.pos < len(self.body)
        if not self._pending:
            self._pending = self._inflate(1)
        return bool(self._pending)


def _localname(tag) -> str:
    if not isinstance(tag, str):
        return ""  # a comment, a processing instruction, an entity
    return tag.rpartition("}")[2] if tag[:1] == "{" else tag


class SitemapReader:
    """``for entry in SitemapReader(body, max_urls, max_bytes): ...``

    After the loop: ``kind`` is "urlset", "index" or "text" (None when the
    file is no sitemap); ``problems`` lists (reason, message) pairs, reasons
    among ``not_gzip`` (the gzip stream is corrupt or cut short),
    ``malformed`` (XML that stops parsing), ``not_sitemap`` (HTML, another
    XML root, no URL at all), ``too_large`` (past max_bytes uncompressed),
    ``too_many_urls`` (past max_urls entries) and ``bad_entry`` (an entry
    without a usable <loc>, counted in ``bad_entries``); ``entries`` the
    entries given; ``size`` the uncompressed bytes read. body_cut: the body
    is the start of a file whose download stopped at max_bytes (its end is
    the limit's, not a fault of the file).
    """

    def __init__(self, body: bytes, max_urls: int, max_bytes: int, body_cut: bool = False):
        self.body = body
        self.body_cut = body_cut
        self.max_urls = max_urls
        self.max_bytes = max_bytes
        self.kind: str | None = None
        self.problems: list[tuple[str, str]] = []
        self.entries = 0
        self.bad_entries = 0
        self.size = 0
        self.compressed = body[:2] == GZIP_MAGIC

    def problem(self, reason: str, message: str) -> None:
        self.problems.append((reason, message))

    def __iter__(self) -> Iterator[Entry]:
        stream = _Stream(self.body, self.max_bytes, self.body_cut)
        head = stream.read(SNIFF)
        start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if not start and stream.bad_gzip is None:
            self.problem("not_sitemap", "empty file")
        elif start[:1] == b"<":
            lowered = start[:64].lower()
            if lowered.startswith((b"<!doctype html", b"<html")):
                self.problem("not_sitemap", "an HTML page, not a sitemap")
            else:
                yield from self._xml(head, stream)
        elif start:
            yield from self._text(head, stream)
        self.size = stream.out
        if stream.bad_gzip is not None:
            self.problem("not_gzip", stream.bad_gzip)
        if stream.cut:
            self.problem("too_large", f"more than {self.max_bytes} bytes uncompressed; "
                                      f"read up to there")
        if self.bad_entries:
            self.problem("bad_entry", f"{self.bad_entries} entries without a usable <loc>")

    def _full(self) -> bool:
        if self.entries < self.max_urls:
            return False
        self.problem("too_many_urls", f"more than {self.max_urls} URLs; read up to there")
        return True

    # -- XML ------------------------------------------------------------------

    def _xml(self, head: bytes, stream: _Stream) -> Iterator[Entry]:
        # XMLPullParser is iterparse fed a chunk at a time: unlike iterparse
        # over a file, it keeps the events parsed before an error
        parser = etree.XMLPullParser(events=("start", "end"), resolve_entities=False,
                                     no_network=True, load_dtd=False, huge_tree=False,
                                     remove_comments=True, remove_pis=True)
        self._root = self._entry_tag = None
        data, error = head, None
        while error is None:
            try:
                if data:
                    parser.feed(data)
                else:
                    parser.close()
            except etree.XMLSyntaxError as exc:
                error = exc
                if not data:
                    # a document cut short: closing it ends its open elements,
                    # the entry being read among them, which is no entry
                    break
            for entry in self._events(parser.read_events()):
                if entry is None:
                    return
                yield entry
            if not data:
                break
            data = stream.read(CHUNK)
        if error is not None and not stream.cut and stream.bad_gzip is None and \
                not self.problems:
            self.problem("malformed", f"XML stops parsing: {_first_line(error)}")
        elif self._root is None and not self.problems and stream.bad_gzip is None:
            self.problem("malformed", "no XML element")

    def _events(self, events) -> Iterator[Entry | None]:
        """The entries of parser events; None once reading must stop."""
        for event, elem in events:
            root = self._root
            if root is None:
                self._root = elem
                name = _localname(elem.tag)
                if name == "urlset":
                    self.kind, self._entry_tag = URLSET, "url"
                elif name == "sitemapindex":
                    self.kind, self._entry_tag = INDEX, "sitemap"
                else:
                    what = "an HTML page" if name.lower() == "html" else f"XML whose root is <{name}>"
                    self.problem("not_sitemap", f"{what}, not <urlset> or <sitemapindex>")
                    yield None
                    return
                continue
            if event != "end" or elem.getparent() is not root:
                continue
            if _localname(elem.tag) == self._entry_tag:
                entry = self._entry(elem)
                if entry is not None:
                    if self._full():
                        yield None
                        return
                    self.entries += 1
                    yield entry
            # the tree keeps no entry once read
            elem.clear()
            root.remove(elem)

    def _entry(self, elem) -> Entry | None:
        loc = lastmod = None
        for child in elem:
            name = _localname(child.tag)
            if name not in ("loc", "lastmod"):
                continue
            if len(child):  # an entity or element inside: no plain value
                if name == "loc":
                    self.bad_entries += 1
                    return None
                continue
            text = (child.text or "").strip()
            if name == "loc":
                loc = text
            else:
                lastmod = text or None
        if not loc:
            self.bad_entries += 1
            return None
        return Entry(loc, lastmod)

    # -- plain text -------------------------------------------------------------

    def _text(self, head: bytes, stream: _Stream) -> Iterator[Entry]:
        """sitemaps.org, "Text file": one URL a line, UTF-8, nothing else."""
        self.kind = TEXT
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        rest = ""
        data = head
        seen_line = False
        while True:
            text = rest + decoder.decode(data, final=not data)
            lines = text.split("\n")
            rest = lines.pop()
            if not data and not (stream.cut or stream.bad_gzip):
                lines.append(rest)  # the last line, with no newline after it
            for line in lines:
                line = line.strip().lstrip("\ufeff")
                if not line:
                    continue
                seen_line = True
                if not line.startswith(("http://", "https://")) or any(c.isspace() for c in line):
                    self.bad_entries += 1
                    continue
                if self._full():
                    return
                self.entries += 1
                yield Entry(line)
            if not data:
                break
            data = stream.read(CHUNK)
        if seen_line and not self.entries:
            self.kind = None
            self.bad_entries = 0
            self.problem("not_sitemap", "text without a single URL line")


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
