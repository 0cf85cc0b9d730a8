"""The crawl log: one line per download attempt, as Heritrix writes crawl.log.

2026-01-05T10:00:00.123Z   200      10422 http://a.ex/1 L http://a.ex/ text/html #003 20260105100000101+21 sha1:AB - -
2026-01-05T10:00:00.200Z -9998          - http://a.ex/p/ L http://a.ex/ no-type #001 - - - err=robots

Fields, in Heritrix's order (Heritrix 3 wiki, "Logs"): log time (ISO 8601 UTC,
ms); fetch status (HTTP status, or a negative Heritrix code, FetchStatusCodes:
-1 DNS failure, -2 connection failed, -3 connection lost, -4 timeout, -5
other error, -6 DNS prerequisite failed (the URL's host is known not to
resolve: never sent), -9998 excluded by robots.txt, -5002
refused by a middleware); body size in bytes, '-' when no response came;
URL; discovery path (L link hop, M found in a sitemap, R redirect, P
prerequisite i.e. robots.txt and DNS, '-' seed); via (referrer or redirecting URL; for robots.txt, the URL
that needed it); MIME type; the thread, as '#' and three digits: here the
worker's download slot (a request holds the lowest free one from the
downloader until its response or error, as a Heritrix ToeThread holds a URI;
the worker itself is named by the file); fetch start as yyyymmddhhmmssSSS '+'
duration in ms, '-' for an attempt that never went to the network (robots.txt
exclusion, a middleware's refusal); payload SHA-1 (base32); source tag ('-');
annotations (comma-separated: '<n>t' retries, 'err=<exception>').

Where Heritrix differs: it logs a URI once, when it is done with it (after
its retries, the last status), where this log has one line per attempt (a
500 and the 200 of its retry are two lines, the second annotated '2t'); it
leaves an empty annotations field empty, where this log writes '-' so that
every line has twelve fields; and it logs its DNS lookups as ``dns:`` URIs,
which a Scrapy worker does not make apart from its requests (a DNS failure is
the page's -1). :func:`parse_line` reads both.

Each worker appends to its own file, logs/crawl-<crawl>@<worker>.log under
CRAWL_DATA_DIR, so workers never interleave lines.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from crawlproj.stores.common import private_dir, safe_name, utc_second
from crawlproj.stores.exchange import (
    S_BLOCKED_BY_CUSTOM_PROCESSOR,
    S_DOMAIN_PREREQUISITE_FAILURE,
    S_ROBOTS_PRECLUDED,
    S_UNFETCHABLE_URI,
    Exchange,
    FailedAttempt,
)


def _iso_ms(epoch: float) -> str:
    second, us = utc_second(epoch)
    return f"{second}.{us // 1000:03d}Z"


def _stamp17(epoch: float) -> str:
    second, us = utc_second(epoch)
    return f"{second.translate(_DIGITS_ONLY)}{us // 1000:03d}"


_DIGITS_ONLY = str.maketrans("", "", "-T:")
_SPACE = re.compile(r"\s")


def _field(value: str | None) -> str:
    """One whitespace-free field; '-' when empty."""
    if not value:
        return "-"
    return "%20".join(value.split()) if _SPACE.search(value) else value


# Attempts that never went to the network: Heritrix has no fetch time for them.
# -6: a host known not to resolve (crawlproj/dns.py), its URL never sent.
_UNFETCHED = (S_ROBOTS_PRECLUDED, S_BLOCKED_BY_CUSTOM_PROCESSOR, S_UNFETCHABLE_URI,
              S_DOMAIN_PREREQUISITE_FAILURE)


def format_line(att: Exchange | FailedAttempt, logged: float) -> str:
    notes = []
    if att.retries:
        notes.append(f"{att.retries + 1}t")
    if isinstance(att, Exchange):
        status, size, mime, digest = att.status, str(len(att.body)), att.content_type, att.payload_digest
    else:
        status, size, mime, digest = att.status, "-", "no-type", None
        notes.append(f"err={att.reason}")
    fetched = "-" if status in _UNFETCHED else \
        f"{_stamp17(att.started)}+{int(round(att.duration * 1000))}"
    return " ".join((
        _iso_ms(logged), f"{status:>5}", f"{size:>10}", _field(att.url), _field(att.hops),
        _field(att.via), _field(mime), f"#{att.slot:03d}", fetched, _field(digest), "-",
        _field(",".join(notes)),
    ))


def log_path(directory: Path, crawl_id: str, worker: str) -> Path:
    return directory / f"crawl-{safe_name(crawl_id)}@{safe_name(worker)}.log"


class CrawlLog:
    """An append-only crawl.log of one worker. Lines go to the OS as they are
    written (line buffering), so a killed worker loses no line it logged."""

    def __init__(self, path: Path):
        private_dir(path.parent)
        self.path = path
        self.f = open(path, "a", buffering=1, encoding="utf-8")
        self.lines = 0

    def write(self, att: Exchange | FailedAttempt, logged: float) -> None:
        self.f.write(format_line(att, logged) + "\n")
        self.lines += 1

    def close(self) -> None:
        self.f.close()


@dataclass
class Line:
    """A parsed crawl log line (the fields report.py needs)."""

    status: int
    size: int | None      # None: '-', no response
    url: str
    hops: str
    via: str
    mime: str
    thread: str
    fetched: str          # fetch start+duration, '-' if never fetched
    digest: str
    source: str = ""      # the file it came from (one per worker)

    @property
    def prerequisite(self) -> str | None:
        """'dns' or 'robots' for a prerequisite fetch (discovery path P), else None."""
        if self.url.startswith("dns:"):
            return "dns"
        if self.hops == "P" and self.url.split("?", 1)[0].endswith("/robots.txt"):
            return "robots"
        return None


def parse_line(text: str, source: str = "") -> Line | None:
    """A line of this log or of Heritrix's (eleven fields when Heritrix left
    the annotations empty); None for anything else."""
    parts = text.split()
    if len(parts) < 11:
        return None
    try:
        size = None if parts[2] == "-" else int(parts[2])
        return Line(int(parts[1]), size, parts[3], parts[4], parts[5], parts[6], parts[7],
                    parts[8], parts[9], source)
    except ValueError:
        return None


def log_files(directory: Path, crawl_id: str | None) -> list[Path]:
    pattern = f"crawl-{safe_name(crawl_id)}@*.log" if crawl_id else "crawl-*@*.log"
    return sorted(Path(p) for p in glob.glob(os.path.join(directory, pattern)))


def read_lines(paths: Iterable[str | os.PathLike]) -> Iterator[Line]:
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for text in f:
                line = parse_line(text, str(path))
                if line is not None:
                    yield line
