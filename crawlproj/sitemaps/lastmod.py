"""A sitemap's <lastmod> as an observation for the incremental crawl.

A page's <lastmod> is the site's own word of when the page last changed
(sitemaps.org: "the date of last modification of the page", W3C Datetime).
For a page the crawl has fetched and scheduled to fetch again
(crawlproj/recrawl/schedule.py), a lastmod past its last fetch says it has
changed since: one more observation for its change-rate estimate, dated as
a Last-Modified dates a change (Cho & Garcia-Molina's Last-Modified
estimator, crawlproj/recrawl/estimate.py: the change seen, and the time from
it to the observation known to be without another). The page is then stale
in the crawl's copy: it is due at once (frontier lua/revise.lua), within the
recrawl budget like any due page, unless the plan gives its change-rate
bucket nothing (optimal's cut-off: a page that changes too fast for the
budget is stale again soon after any fetch; its due time stays). The fetch that follows starts the next
interval (crawlproj.recrawl.state.rebase): the change it would see is the
one already counted.

A lastmod that did not move says less than it seems: a sitemap rebuilt once
a day, or one never rebuilt, would claim pages unchanged that are not; it is
not taken as an observation. Times: the lastmod is read on the server's
clock and set on the crawl's as its age by the sitemap's own Date header
(Date - lastmod), as Last-Modified is (docs/recrawl.md, "Last-Modified on the
crawl's clock"); a lastmod past the Date (by more than the clock skew the
state allows) is no date at all.

No Scrapy; Redis through the frontier (one read and one script call per
host and batch), run off the reactor thread.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from crawlproj.recrawl.record import PACKED, pack_payload, unpack_payload
from crawlproj.recrawl.schedule import scheduled_bucket
from crawlproj.recrawl.state import CLOCK_SKEW, WALL_DATES, Observation, RecrawlState, reported
from crawlproj.urls import host_of

__all__ = ["LastmodFeed", "observe", "w3c_datetime"]

# W3C Datetime (https://www.w3.org/TR/NOTE-datetime), the profile of ISO 8601
# sitemaps.org names: YYYY, YYYY-MM, YYYY-MM-DD, or a date and a time of at
# least hours and minutes with a time zone (Z or +hh:mm); fractions of a second.
_W3C = re.compile(r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:T(\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?"
                  r"(Z|[+-]\d\d:\d\d))?)?)?")


def w3c_datetime(text: str | None) -> float | None:
    """Epoch seconds of a W3C Datetime, None when it is not one. A date
    alone is its midnight UTC; a time needs its time zone."""
    if not text:
        return None
    m = _W3C.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    try:
        tz = timezone.utc
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            tz = timezone(timedelta(seconds=sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)))
        at = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0),
                      int(minute or 0), int(second or 0), tzinfo=tz)
        return at.timestamp() + (float("0." + fraction) if fraction else 0.0)
    except (ValueError, OverflowError):
        return None


def observe(payload: bytes, changed_at: float, now: float) -> tuple[bytes, int, int] | None:
    """A scheduled page's payload after a sitemap said it changed at
    changed_at (crawl clock, as now): (new payload, its bucket before, after),
    or None when that is no news (not past its last observation) or the
    payload is not a packed recrawl record."""
    if payload[:1] != bytes((PACKED,)):
        return None
    try:
        tail, https, depth, record = unpack_payload(payload)
        state = RecrawlState.unpack(record[0])
    except (ValueError, IndexError):
        return None
    if state.last_fetch <= 0.0 or changed_at <= state.last_fetch or now <= state.last_fetch:
        return None
    new = reported(state, Observation(now, True, min(changed_at, now)))
    record = [new.pack(), *record[1:]]
    return pack_payload(tail, https, depth, record), scheduled_bucket(state), scheduled_bucket(new)


class LastmodFeed:
    """Hands a sitemap's lastmods to the frontier's scheduled pages.

    frontier: the worker's (crawlproj.frontier.Frontier); recrawl: its plan
    (crawlproj.recrawl.schedule.Recrawl: the crawl clock's scale, the
    buckets the plan gives nothing)."""

    def __init__(self, frontier, recrawl, batch: int = 1000):
        self.frontier = frontier
        self.recrawl = recrawl
        self.scale = recrawl.config.scale
        self.batch = batch

    def on_crawl_clock(self, payload: bytes, age: float, now: float) -> float:
        """A lastmod on the crawl's clock (now: crawl seconds) by its age at
        the sitemap's Date, in the server's seconds: crawl seconds unless
        the page's own Last-Modified showed its server dating by the wall
        clock while the crawl's runs RECRAWL_TIME_SCALE times as fast
        (Recrawl.on_crawl_clock, state flag WALL_DATES)."""
        try:
            state = RecrawlState.unpack(unpack_payload(payload)[3][0])
        except (ValueError, IndexError):
            return now - age
        return now - (self.scale if state.flags & WALL_DATES else 1.0) * age

    def feed(self, entries: list[tuple[str, float]], date: float, now: float) -> tuple[int, int]:
        """entries: (URL, lastmod in server seconds) of one sitemap; date: the
        sitemap's Date (server seconds); now: wall seconds it was read. The
        pages revised, and the lastmods refused as lying in the future.
        Blocking: call it in a thread."""
        by_host: dict[str, list[tuple[str, float]]] = {}
        future = 0
        for url, lastmod in entries:
            if lastmod > date + CLOCK_SKEW:
                future += 1
                continue
            by_host.setdefault(host_of(url), []).append((url, date - lastmod))
        revised = 0
        for host, items in by_host.items():
            for start in range(0, len(items), self.batch):
                revised += self._host(host, items[start:start + self.batch], now * self.scale)
        return revised, future

    def _host(self, host: str, items: list[tuple[str, float]], now: float) -> int:
        f = self.frontier
        fps = []
        for url, _ in items:
            try:
                fps.append(str(f.due.fingerprint(url)))
            except ValueError:
                fps.append(None)
        known = [(fp, at) for fp, (_, at) in zip(fps, items) if fp is not None]
        if not known:
            return 0
        scheduled = f.scheduled(host, [fp for fp, _ in known])
        pages = []
        for (fp, age), (payload, _) in zip(known, scheduled):
            if payload is None:
                continue  # never crawled, or being fetched: nothing to revise
            seen = observe(payload, self.on_crawl_clock(payload, max(0.0, age), now), now)
            if seen is not None:
                new, old_bucket, new_bucket = seen
                due = "0" if self.recrawl.starved(new_bucket) else "1"
                pages.append((fp, payload, new, old_bucket, new_bucket, due))
        return f.revise(host, pages)
