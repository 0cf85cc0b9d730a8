"""CDXJ index lines for WARC records, and a scanner of gzip-per-record WARCs.

A CDXJ line is ``<SURT key> <14-digit timestamp> <JSON>``, the index format
pywb and the IIPC tools read; lines sorted by key make a URL lookup a binary
search. The lines are the ones pywb's own indexer (``wb-manager add``) writes
for the same records, key, fields and order, so that the project's index and
pywb's can serve one collection together (tests/test_archives_e2e.py).

The scanner walks a ``.warc.gz`` member by member (each member is one
record, WARC 1.1 Annex D), which is also how a file left half-written by a
crash is checked: a member that does not inflate, or whose record is shorter
than its Content-Length, is where the good part of the file ends.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import surt as surt_package

_CHUNK = 1 << 20


def urlkey(url: str) -> str:
    """The index key of a URL: its SURT (Sort-friendly URI Reordering
    Transform) after the Internet Archive's canonicalisation, computed by the
    ``surt`` package, as pywb and the Wayback Machine key their indexes, so
    that a replay tool looking a URL up in this index finds it (a ``urn:``
    that is no URL is its own key, as in pywb)."""
    try:
        return surt_package.surt(url)
    except Exception:
        if url.startswith("urn:"):
            return url
        raise


@dataclass
class Member:
    offset: int       # where the gzip member starts in the file
    length: int       # its compressed length
    record: bytes     # the inflated WARC record


def _complete(record: bytes) -> bool:
    """A whole WARC record: version line, headers, Content-Length bytes, CRLFCRLF."""
    if not record.startswith(b"WARC/"):
        return False
    end = record.find(b"\r\n\r\n")
    if end < 0:
        return False
    length = None
    for line in record[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return False
    return length is not None and len(record) == end + 4 + length + 4 \
        and record.endswith(b"\r\n\r\n")


def scan(f: BinaryIO) -> Iterator[Member]:
    """Complete records of a gzip-per-record WARC, in order; stops at the first
    member that is broken or incomplete (the caller compares the end of the
    last member with the file size to know whether the tail was bad)."""
    offset = 0
    buf = b""
    while True:
        if not buf:
            buf = f.read(_CHUNK)
            if not buf:
                return
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        out = []
        used = 0
        try:
            while True:
                out.append(d.decompress(buf))
                if d.eof:
                    used += len(buf) - len(d.unused_data)
                    buf = d.unused_data
                    break
                used += len(buf)
                buf = f.read(_CHUNK)
                if not buf:
                    return  # truncated member
        except zlib.error:
            return
        record = b"".join(out)
        if not _complete(record):
            return
        yield Member(offset, used, record)
        offset += used


def parse_record(record: bytes) -> tuple[dict[str, str], bytes]:
    """(WARC headers with lower-case names, block)."""
    end = record.find(b"\r\n\r\n")
    headers = {}
    for line in record[:end].decode("utf-8", "replace").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers, record[end + 4:-4]


_INDEXED = ("response", "revisit")
_NOT_DIGIT = re.compile(r"[^0-9]")


def _http_head(block: bytes) -> tuple[str, str | None]:
    """(status code or '-', Content-Type value or None) of an HTTP head."""
    end = block.find(b"\r\n\r\n")
    head = block[: end if end >= 0 else len(block)].decode("latin-1").split("\r\n")
    words = head[0].split(" ", 2)
    status = words[1] if len(words) > 1 and words[1] else "-"
    ctype = None
    for line in head[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type" and ctype is None:
            ctype = value.strip()
    return status, ctype


def fields(headers: dict[str, str], block: bytes) -> dict[str, str]:
    """The JSON fields of a response or revisit record's index line, as
    cdxj-indexer (webrecorder's, which pywb's tools use) writes them: the MIME
    type as the Content-Type has it up to the first ';' or space (``unk``
    without one, ``warc/revisit`` for a revisit), the HTTP status of the
    record's HTTP head (a revisit's too: a 304's revisit says 304, where
    pywb's older ``wb-manager add`` left it out), the payload digest as bare
    base32 (pywb finds a revisit's original by this string), and no field
    whose value is empty or '-'."""
    revisit = headers.get("warc-type") == "revisit"
    status, ctype = _http_head(block)
    out = {"url": headers.get("warc-target-uri", "")}
    if revisit:
        out["mime"] = "warc/revisit"
    else:
        out["mime"] = re.split("[; ]", ctype, maxsplit=1)[0] if ctype else "unk"
    out["status"] = status
    digest = headers.get("warc-payload-digest") or ""
    if digest.startswith("sha1:"):
        digest = digest[len("sha1:"):]
    if not digest and not revisit:
        end = block.find(b"\r\n\r\n")
        digest = base64.b32encode(hashlib.sha1(block[end + 4:] if end >= 0 else b"").digest()) \
            .decode("ascii")
    out["digest"] = digest
    return {k: v for k, v in out.items() if v and v != "-"}


def line_key(url: str, date: str) -> str:
    """The start of a record's line: its URL's key and its 14-digit timestamp."""
    stamp = _NOT_DIGIT.sub("", date)[:14]
    return f"{urlkey(url)} {stamp}"


def finish_line(key: str, values: dict[str, str], length: int, offset: int,
                filename: str) -> str:
    """The line of a record whose line_key is key, once its place in a file is known."""
    out = {**values, "length": str(length), "offset": str(offset), "filename": filename}
    return f"{key} {json.dumps(out)}"


def make_line(url: str, date: str, values: dict[str, str], length: int, offset: int,
              filename: str) -> str:
    return finish_line(line_key(url, date), values, length, offset, filename)


def line_for(member: Member, filename: str) -> str | None:
    """The CDXJ line of a response or revisit record, None for other types
    (pywb's index leaves out request and warcinfo records) and for the
    record of a page that said noarchive (crawlproj/stores/warc.py, ROBOTS_MARK)."""
    headers, block = parse_record(member.record)
    if headers.get("warc-type") not in _INDEXED or "noarchive" in headers.get("crawlproj-robots", ""):
        return None
    return make_line(headers.get("warc-target-uri", ""), headers.get("warc-date", ""),
                     fields(headers, block), member.length, member.offset, filename)


def index_file(f: BinaryIO, filename: str) -> list[str]:
    """Sorted CDXJ lines of every response/revisit record of one WARC file."""
    lines = [ln for m in scan(f) if (ln := line_for(m, filename)) is not None]
    lines.sort()
    return lines
