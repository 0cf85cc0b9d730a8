"""The crawl log: one line per download attempt, as Heritrix writes crawl.log.

2026-01-05T10:00:00.123Z 200 10422 http://a.ex/1.html L http://a.ex/ text/html h:12:ab 20260105100000101+21 sha1:AB - 1t

Fields, in Heritrix's order (Heritrix 3 wiki, "Logs"): log time (ISO 8601 UTC,
ms); fetch status (HTTP status, or a negative Heritrix code: -1 DNS failure,
-2 connection failed, -3 connection lost, -4 timeout, -5 other error, -9998
excluded by robots.txt, -5002 refused by a middleware); body size in bytes;
URL; discovery path (L link hop, R redirect, P prerequisite i.e. robots.txt,
'-' seed); via (referrer or redirecting URL); MIME type; the worker (Heritrix
names a thread here; a crawl has many worker processes); fetch start as
yyyymmddhhmmssSSS '+' duration in ms; payload SHA-1 (base32); source tag
('-'); annotations (comma-separated: '<n>t' retries, 'err=<exception>').
Fields are space separated and never empty ('-'), so a crawl log can be
grepped, cut and sorted like Heritrix's.

Each worker appends to its own file, logs/crawl-<crawl>@<worker>.log under
CRAWL_DATA_DIR, so workers never interleave lines.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from crawlproj.stores.common import safe_name
from crawlproj.stores.exchange import Exchange, FailedAttempt


def _iso_ms(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _stamp17(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y%m%d%H%M%S%f")[:17]


def _field(value: str | None) -> str:
    """One whitespace-free field; '-' when empty."""
    if not value:
        return "-"
    return "%20".join(value.split()) if any(c.isspace() for c in value) else value


def format_line(att: Exchange | FailedAttempt, worker: str, logged: float) -> str:
    notes = []
    if att.retries:
        notes.append(f"{att.retries + 1}t")
    if isinstance(att, Exchange):
        status, size, mime, digest = att.status, len(att.body), att.content_type, att.payload_digest
    else:
        status, size, mime, digest = att.status, 0, "no-type", None
        notes.append(f"err={att.reason}")
    return " ".join((
        _iso_ms(logged), f"{status:>5}", f"{size:>10}", _field(att.url), _field(att.hops),
        _field(att.via), _field(mime), _field(worker),
        f"{_stamp17(att.started)}+{int(round(att.duration * 1000))}", _field(digest), "-",
        _field(",".join(notes)),
    ))


def log_path(directory: Path, crawl_id: str, worker: str) -> Path:
    return directory / f"crawl-{safe_name(crawl_id)}@{safe_name(worker)}.log"


class CrawlLog:
    """An append-only crawl.log of one worker. Lines go to the OS as they are
    written (line buffering), so a killed worker loses no line it logged."""

    def __init__(self, path: Path, worker: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.worker = worker
        self.f = open(path, "a", buffering=1, encoding="utf-8")
        self.lines = 0

    def write(self, att: Exchange | FailedAttempt, logged: float) -> None:
        self.f.write(format_line(att, self.worker, logged) + "\n")
        self.lines += 1

    def close(self) -> None:
        self.f.close()


@dataclass
class Line:
    """A parsed crawl log line (the fields report.py needs)."""

    status: int
    size: int
    url: str
    hops: str
    mime: str
    worker: str
    digest: str


def parse_line(text: str) -> Line | None:
    parts = text.split()
    if len(parts) < 10:
        return None
    try:
        return Line(int(parts[1]), int(parts[2]), parts[3], parts[4], parts[6], parts[7], parts[9])
    except ValueError:
        return None


def log_files(directory: Path, crawl_id: str | None) -> list[Path]:
    pattern = f"crawl-{safe_name(crawl_id)}@*.log" if crawl_id else "crawl-*@*.log"
    return sorted(Path(p) for p in glob.glob(os.path.join(directory, pattern)))


def read_lines(paths: Iterable[str | os.PathLike]) -> Iterator[Line]:
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for text in f:
                line = parse_line(text)
                if line is not None:
                    yield line
