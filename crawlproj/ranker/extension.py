"""RankerExtension: the ranker inside a worker (Scrapy extension).

On by default when FRONTIER_PRIORITIZER is "pagerank" (RANKER_ENABLED forces it
on or off). Every RANKER_TICK seconds the worker takes or renews the crawl's
ranker lock; the one that holds it recomputes PageRank and rewrites the queued
priorities when RANKER_INTERVAL seconds have passed, or the crawl leased
RANKER_EVERY_PAGES URLs, or RANKER_GROWTH times the URLs it had leased at the
last run, since that run (crawl-wide, from the frontier's lease counter). The
growth rule keeps the estimates as fresh in a crawl's first minute as in its
tenth: Cho et al. recompute IR'(P) as the crawl grows (§4, Fig. 2), and the
virtual crawler after 1, 2, 4, ... pages; a fixed interval would leave the
first part of a short crawl, where most important pages are found, on the
enqueue-time estimates alone. A run costs time in proportion to the graph, so
geometric growth keeps the runs' total within 1 + 1/RANKER_GROWTH times the
last one's; the interval does not, and a run it brings must first rest
RANKER_REST times the last run's length (RankerCadence): over a long crawl
the runs would otherwise take ever more of the worker and of Redis (the
rescore). Each run is a process of its own (crawlproj/ranker/process.py),
which returns the graph's memory to the machine when it exits; the worker's
thread renews the lock while it runs, so the reactor keeps crawling. A
worker that dies stops renewing and another one takes over when the lock's
TTL (RANKER_LOCK_TTL) runs out.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from scrapy.exceptions import NotConfigured

from crawlproj.frontier.frontier import Frontier
from crawlproj.ranker.loop import RankerLock, RankRun
from crawlproj.ranker.process import RankerChild
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.redis.lockedwork import LockedWork

logger = logging.getLogger(__name__)


# A run brought by RANKER_INTERVAL waits at least this many times the last
# run's length after it: the ranker then takes at most a tenth of the time.
RANKER_REST = 9.0


class RankerCadence:
    """When the ranker runs: RANKER_INTERVAL seconds after its last run (and
    RANKER_REST times that run's length), or once the crawl has leased
    RANKER_EVERY_PAGES URLs, or RANKER_GROWTH times the URLs it had leased at
    that run, since then."""

    def __init__(self, interval: float, every_pages: int = 0, growth: float = 0.0):
        self.interval, self.every_pages, self.growth = interval, every_pages, growth
        self.last_run = time.monotonic()
        self.last_leased = 0
        self.last_seconds = 0.0

    @classmethod
    def from_settings(cls, settings):
        return cls(settings.getfloat("RANKER_INTERVAL"), settings.getint("RANKER_EVERY_PAGES"),
                   settings.getfloat("RANKER_GROWTH"))

    @property
    def counts_pages(self) -> bool:
        return bool(self.every_pages or self.growth)

    def due(self, leased: int, now: float | None = None) -> bool:
        """Is a run due, the crawl having leased ``leased`` URLs so far?"""
        now = time.monotonic() if now is None else now
        grown = leased - self.last_leased
        # compared as a sum: ``now - last_run`` can round below the interval
        wait = max(self.interval, RANKER_REST * self.last_seconds)
        return now >= self.last_run + wait or bool(
            (self.every_pages and grown >= self.every_pages)
            or (self.growth and grown > 0 and grown >= self.growth * self.last_leased))

    def ran(self, leased: int, now: float | None = None, seconds: float = 0.0) -> None:
        """A run that took `seconds` ended at `now`."""
        self.last_run = time.monotonic() if now is None else now
        self.last_leased = leased
        self.last_seconds = seconds


class RankerExtension(LockedWork):
    name = "ranker"
    # a run under way when the spider closes ends first, and is counted in
    # the stats: the crawl's next start uses its scores
    wait_at_close = True

    def __init__(self, crawler, frontier: Frontier, lock: RankerLock, crawl_id: str):
        s = crawler.settings
        super().__init__(crawler, s.getfloat("RANKER_TICK"))
        self.frontier, self.lock, self.crawl_id = frontier, lock, crawl_id
        self.cadence = RankerCadence.from_settings(s)

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        enabled = s.get("RANKER_ENABLED")
        enabled = (s.get("FRONTIER_PRIORITIZER") == "pagerank") if enabled is None \
            else s.getbool("RANKER_ENABLED")
        if not enabled:
            raise NotConfigured
        redis = get_redis(s)
        keyspace = Keyspace.from_settings(s, redis)
        lock = RankerLock(redis, keyspace, s.getfloat("RANKER_LOCK_TTL"))
        return cls(crawler, Frontier(redis, keyspace), lock, keyspace.crawl_id).connect()

    def work(self):
        """In a thread: hold the lock, and run when due."""
        if not self.lock.hold():
            return
        leased = self.frontier.status().counters.get("leased", 0) \
            if self.cadence.counts_pages else 0
        if not self.cadence.due(leased):
            return
        started = time.monotonic()
        try:
            run = RankerChild(self.crawler.settings, self.crawl_id).wait(
                min(self.tick, self.lock.ttl_ms / 3000), self.lock.hold)
        finally:  # a run that failed is tried again when the next one is due, not every tick
            self.cadence.ran(leased, seconds=time.monotonic() - started)
        self.stats.inc_value("ranker/runs")
        self.stats.inc_value("ranker/rescored", run["changed"])
        self.stats.set_value("ranker/nodes", run["nodes"])
        self.stats.set_value("ranker/last_run", datetime.now(timezone.utc))  # the dashboard's
        logger.info("Ranker: %s", RankRun(**run))

    def leave(self):
        self.lock.release()
