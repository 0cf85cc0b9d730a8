"""Checks on a request log (see server.read_log) for crawler end-to-end tests.

A record is a dict with at least t0 (arrival), t1 (finish), host, path.
Times are the server's, so a request's duration t1 - t0 is what the host
spent on it (its latency plus sending); a crawler measures a slightly longer
download time, so checks based on server times are never stricter than the
crawler's own rule.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from itertools import pairwise
from typing import Any, NamedTuple

from .server import read_log  # re-exported: checks usually start from a log

__all__ = ["url_of", "by_host", "overlaps", "politeness_violations", "Violation",
           "fetch_counts", "arrival_order", "arrival_positions", "read_log"]

Record = Mapping[str, Any]
ROBOTS = ("/robots.txt",)


def url_of(rec: Record) -> str:
    return f"http://{rec['host']}{rec['path']}"


def by_host(records: Iterable[Record], ignore_paths: Iterable[str] = ()) -> dict[str, list[Record]]:
    """Records per host, each list sorted by arrival."""
    skip = set(ignore_paths)
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r["path"] not in skip:
            out[r["host"]].append(r)
    for recs in out.values():
        recs.sort(key=lambda r: (r["t0"], r["t1"]))
    return dict(out)


def overlaps(records: Iterable[Record], ignore_paths: Iterable[str] = ()) -> list[tuple[str, Record, Record]]:
    """(host, r1, r2) for every request r2 that arrived while an earlier
    request r1 to the same host was still in flight (r2.t0 < r1.t1).
    robots.txt counts by default; pass ignore_paths=("/robots.txt",) if the
    crawler fetches it outside its politeness machinery (Scrapy does)."""
    out = []
    for host, recs in by_host(records, ignore_paths).items():
        longest = None  # the earlier request that finishes last
        for r in recs:
            if longest is not None and r["t0"] < longest["t1"]:
                out.append((host, longest, r))
            if longest is None or r["t1"] > longest["t1"]:
                longest = r
    return out


def max_in_flight(records: Iterable[Record]) -> int:
    """The most requests the web was serving at once, over all hosts (a request
    arriving at the instant another ended counts after that one)."""
    events = sorted([(r["t0"], 1) for r in records] + [(r["t1"], -1) for r in records])
    flight = peak = 0
    for _t, delta in events:
        flight += delta
        peak = max(peak, flight)
    return peak


class Violation(NamedTuple):
    host: str
    prev: Record
    next: Record
    gap: float       # next.t0 - prev.t1
    required: float  # the delay the rule asked for


def politeness_violations(records: Iterable[Record], factor: float = 10.0, min_delay: float = 0.0,
                          max_delay: float = 60.0,
                          crawl_delay_of: Callable[[str], float | None] | Mapping[str, float] | None = None,
                          tolerance: float = 0.05,
                          ignore_paths: Iterable[str] = ROBOTS) -> list[Violation]:
    """Consecutive requests to a host closer than Mercator's rule allows:
    the next one must arrive no earlier than
        prev.t1 + min(max(min_delay, factor * (prev.t1 - prev.t0), crawl_delay), max_delay)
    minus `tolerance` seconds.  crawl_delay_of is e.g. ``web.crawl_delay``
    or a dict host -> seconds.  robots.txt is ignored by default: Scrapy
    fetches it outside the scheduler."""
    if crawl_delay_of is None:
        def cd_of(host: str) -> float | None:
            return None
    elif callable(crawl_delay_of):
        cd_of = crawl_delay_of
    else:
        cd_of = crawl_delay_of.get
    out = []
    for host, recs in by_host(records, ignore_paths).items():
        cd = cd_of(host) or 0.0
        for prev, nxt in pairwise(recs):
            need = min(max(min_delay, factor * (prev["t1"] - prev["t0"]), cd), max_delay)
            gap = nxt["t0"] - prev["t1"]
            if gap < need - tolerance:
                out.append(Violation(host, prev, nxt, gap, need))
    return out


def fetch_counts(records: Iterable[Record], ignore_paths: Iterable[str] = ROBOTS) -> Counter:
    """How many times each URL was requested (robots.txt left out)."""
    skip = set(ignore_paths)
    return Counter(url_of(r) for r in records if r["path"] not in skip)


def arrival_order(records: Iterable[Record], ignore_paths: Iterable[str] = ROBOTS) -> list[str]:
    """URLs in order of their first arrival at the server."""
    skip = set(ignore_paths)
    seen: dict[str, None] = {}
    for r in sorted(records, key=lambda r: r["t0"]):
        if r["path"] not in skip:
            seen.setdefault(url_of(r), None)
    return list(seen)


def arrival_positions(records: Iterable[Record], ignore_paths: Iterable[str] = ROBOTS) -> dict[str, int]:
    """URL -> 0-based position of its first arrival (for ordering tests, e.g.
    'important pages come early': compare positions of two sets of URLs)."""
    return {u: i for i, u in enumerate(arrival_order(records, ignore_paths))}


def fetches_to_reach(order: list[str], wanted: set[str], share: float) -> int | None:
    """How many fetches of ``order`` it took to fetch ``share`` of the URLs in
    ``wanted`` (Cho's PST read the other way: the crawl length at which the
    hot pages reach a share), or None if the crawl never did."""
    got = 0
    for i, url in enumerate(order, 1):
        got += url in wanted
        if got >= share * len(wanted):
            return i
    return None
