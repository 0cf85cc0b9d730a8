"""The index from the WARC files alone (`scrapy index --rebuild`).

Every `response` record of the content store (crawlproj/stores/warc.py) with
a 2xx HTML payload is extracted again, as the web spider does
(crawlproj.extract), and written, with what its robots meta tags and
X-Robots-Tag headers say (a noindex page is not indexed) and its canonical
URL (crawlproj/robots/meta.py); `revisit` records, the content-seen test's
duplicates, are not indexed. Files are read in name order, which is the order
of their first record's time per worker; where a URL was fetched more than
once, the latest fetch wins (Indexer.write compares fetch times).
"""

from __future__ import annotations

import gzip
import logging
import zlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from crawlproj.extract import extract_page, is_html_type
from crawlproj.robots.meta import ROBOTS, with_head
from crawlproj.search.document import Document
from crawlproj.search.indexer import Indexer
from crawlproj.stores.cdxj import parse_record, scan
from crawlproj.stores.warc import OPEN_SUFFIX, WARC_SUFFIX

logger = logging.getLogger(__name__)


def warc_files(directory: Path) -> list[Path]:
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir()
                  if p.name.endswith(WARC_SUFFIX) or p.name.endswith(WARC_SUFFIX + OPEN_SUFFIX))


def _http(block: bytes) -> tuple[int, dict[str, list[str]], bytes]:
    """(status, {lower-case name: its values in order}, body) of an HTTP response."""
    end = block.find(b"\r\n\r\n")
    if end < 0:
        return 0, {}, b""
    lines = block[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers, block[end + 4:]


def _last(headers: dict[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return values[-1] if values else None


def _decoded(body: bytes, encoding: str) -> bytes:
    encoding = encoding.lower()
    try:
        if encoding in ("gzip", "x-gzip"):
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error, EOFError):
        return b""
    return body


def _epoch(date: str) -> float:
    try:
        return datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def documents(path: Path, agents: frozenset[str] | None = None) -> Iterator[Document]:
    """The indexable documents of one WARC file, in record order; agents:
    the names robots directives reach this crawler by (None: not obeyed)."""
    names = agents | {ROBOTS} if agents is not None else None
    with open(path, "rb") as f:
        for member in scan(f):
            headers, block = parse_record(member.record)
            if headers.get("warc-type") != "response":
                continue
            status, http, body = _http(block)
            ctype = _last(http, "content-type")
            if not 200 <= status < 300:
                continue
            body = _decoded(body, _last(http, "content-encoding") or "")
            if not body or not is_html_type(ctype, body):
                continue
            url = headers.get("warc-target-uri", "")
            e = extract_page(body, url, content_type=ctype, robots_names=names)
            robots, canonical, _ = with_head(lambda name: http.get(name.lower(), []), url, agents,
                                             e.robots, e.canonical)
            yield Document.of_page(url, e.title, e.text, _epoch(headers.get("warc-date", "")),
                                   [(u, a) for u, a in e.links
                                    if not robots.nofollow and u not in e.nofollow],
                                   canonical, robots.names())


def rebuild(indexer: Indexer, directory: Path, batch: int = 1000, progress=None,
            agents: frozenset[str] | None = None) -> tuple[int, int]:
    """Clear the index and write every document of the WARC files in
    directory; returns (files, documents read). agents: see documents()."""
    indexer.index.clear()
    files = warc_files(directory)
    read, pending = 0, []
    for path in files:
        for doc in documents(path, agents):
            pending.append(doc)
            read += 1
            if len(pending) >= batch:
                indexer.write(pending)
                pending = []
                if progress:
                    progress(read)
    indexer.write(pending)
    # pages indexed before the links to them were read: their anchor text now
    while indexer.index.anchors.stale(1):
        indexer.write([])
    indexer.maybe_rank(force=True)
    return len(files), read
