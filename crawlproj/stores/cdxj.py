"""CDXJ index lines for WARC records, and a scanner of gzip-per-record WARCs.

A CDXJ line is ``<SURT key> <14-digit timestamp> <JSON>``, the index format
pywb and the IIPC tools read; lines sorted by key make a URL lookup a binary
search. The scanner walks a ``.warc.gz`` member by member (each member is one
record, WARC 1.1 Annex D), which is also how a file left half-written by a
crash is checked: a member that does not inflate, or whose record is shorter
than its Content-Length, is where the good part of the file ends.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import parse_qsl, urlencode, urlsplit

_CHUNK = 1 << 20


def surt(url: str) -> str:
    """Sort-friendly URI Reordering Transform, as the Wayback Machine keys its
    index: host labels reversed and comma-joined (``www.`` dropped, default
    port dropped), ``)``, then the lower-cased path and sorted query."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if host.startswith("www.") and host.count(".") > 1:
        host = host[4:]
    key = ",".join(reversed(host.split("."))) if host else ""
    port = parts.port if parts.port not in (None, 80, 443) else None
    if port:
        key += f":{port}"
    path = (parts.path or "/").lower()
    query = ""
    if parts.query:
        query = "?" + urlencode(sorted(parse_qsl(parts.query.lower(), keep_blank_values=True)))
    return f"{key}){path}{query}"


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


def _http_status_and_mime(block: bytes) -> tuple[str, str]:
    end = block.find(b"\r\n\r\n")
    head = block[: end if end >= 0 else len(block)].decode("latin-1").split("\r\n")
    status = head[0].split(" ")[1] if len(head[0].split(" ")) > 1 else "-"
    mime = "-"
    for line in head[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type":
            mime = value.split(";", 1)[0].strip().lower() or "-"
    return status, mime


def make_line(url: str, date: str, status, mime: str, digest: str, length: int, offset: int,
              filename: str) -> str:
    stamp = "".join(c for c in date if c.isdigit())[:14]
    fields = {"url": url, "mime": mime or "-", "status": str(status), "digest": digest or "-",
              "length": str(length), "offset": str(offset), "filename": filename}
    return f"{surt(url)} {stamp} {json.dumps(fields, separators=(', ', ': '))}"


def line_for(member: Member, filename: str) -> str | None:
    """The CDXJ line of a response or revisit record, None for other types."""
    headers, block = parse_record(member.record)
    rtype = headers.get("warc-type")
    if rtype not in ("response", "revisit"):
        return None
    status, mime = _http_status_and_mime(block)
    return make_line(headers.get("warc-target-uri", ""), headers.get("warc-date", ""), status,
                     "warc/revisit" if rtype == "revisit" else mime,
                     headers.get("warc-payload-digest", "-"), member.length, member.offset,
                     filename)


def index_file(f: BinaryIO, filename: str) -> list[str]:
    """Sorted CDXJ lines of every response/revisit record of one WARC file."""
    lines = [ln for m in scan(f) if (ln := line_for(m, filename)) is not None]
    lines.sort()
    return lines
