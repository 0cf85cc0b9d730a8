"""RankerExtension: the ranker inside a worker (Scrapy extension).

On by default when FRONTIER_PRIORITIZER is "pagerank" (RANKER_ENABLED forces it
on or off). Every RANKER_TICK seconds the worker takes or renews the crawl's
ranker lock; the one that holds it recomputes PageRank and rewrites the queued
priorities when RANKER_INTERVAL seconds have passed or the crawl fetched
RANKER_EVERY_PAGES pages since the last run (crawl-wide, from the frontier's
lease counter). The work runs in a thread, so the reactor keeps crawling; a
worker that dies stops renewing and another one takes over when the lock's
TTL (RANKER_LOCK_TTL) runs out.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from scrapy.exceptions import NotConfigured

from crawlproj.frontier.frontier import Frontier
from crawlproj.keyspace import Keyspace
from crawlproj.lockedwork import LockedWork
from crawlproj.ranker.loop import Ranker, RankerLock
from crawlproj.redisconn import get_redis
from crawlproj.stores.linkstore import LinkStore

logger = logging.getLogger(__name__)


class RankerExtension(LockedWork):
    name = "ranker"

    def __init__(self, crawler, ranker: Ranker, lock: RankerLock):
        s = crawler.settings
        super().__init__(crawler, s.getfloat("RANKER_TICK"))
        self.ranker, self.lock = ranker, lock
        self.interval = s.getfloat("RANKER_INTERVAL")
        self.every_pages = s.getint("RANKER_EVERY_PAGES")
        self._last_run = time.monotonic()
        self._last_leased = 0

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        enabled = s.get("RANKER_ENABLED")
        enabled = (s.get("FRONTIER_PRIORITIZER") == "pagerank") if enabled is None \
            else s.getbool("RANKER_ENABLED")
        if not enabled:
            raise NotConfigured
        ranker, lock = build(s)
        return cls(crawler, ranker, lock).connect()

    def work(self):
        self._work()

    def leave(self):
        self.lock.release()

    def _work(self):
        """In a thread: hold the lock, and run when due."""
        if not self.lock.hold():
            return
        leased = self.ranker.frontier.status()["counters"].get("leased", 0) \
            if self.every_pages else 0
        due = time.monotonic() - self._last_run >= self.interval or (
            self.every_pages and leased - self._last_leased >= self.every_pages)
        if not due:
            return
        run = self.ranker.run_once()
        self.lock.hold()  # a long run: renew before the TTL can lapse
        self._last_run, self._last_leased = time.monotonic(), leased
        self.stats.inc_value("ranker/runs")
        self.stats.inc_value("ranker/rescored", run.changed)
        self.stats.set_value("ranker/nodes", run.nodes)
        self.stats.set_value("ranker/last_run", datetime.now(timezone.utc))  # the dashboard's
        logger.info("Ranker: %s", run)


def build(settings):
    """(Ranker, RankerLock) of the crawl the settings name."""
    redis = get_redis(settings)
    keyspace = Keyspace.from_settings(settings, redis)
    # The frontier for its bulk rewrite of queued scores (Frontier.rescore), the
    # ranker's one use of it; the DUE's configuration is the workers' to fix.
    frontier = Frontier(redis, keyspace)
    links = LinkStore(redis, keyspace, LinkStore.directory_of(settings, keyspace.crawl_id))
    ranker = Ranker(frontier, links, damping=settings.getfloat("PAGERANK_DAMPING"),
                    cross_host_only=settings.getbool("PRIORITIZER_CROSS_HOST_ONLY"))
    return ranker, RankerLock(redis, keyspace, settings.getfloat("RANKER_LOCK_TTL"))
