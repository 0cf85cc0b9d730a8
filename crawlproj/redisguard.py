"""What a worker does when Redis refuses the crawl's writes for good.

Out of memory (maxmemory with noeviction), snapshots failing (MISCONF), an
ACL that forbids, or the crawl's state gone from the server (restarted
without persistence, flushed): retrying cannot mend these, and a worker that
kept trying would crawl nothing, forever. So the first refusal, from the
frontier or a store, logs one error line naming the reason and closes the
spider with finish reason ``redis_refused``. Nothing is lost that Redis still
has: the URLs this worker leased stay leased there, and go back to their
queues when their leases expire (FRONTIER_LEASE_TTL), once the server takes
writes again; a crawl whose state is gone must be seeded again.

The guard also tells every group commit when the crawl starts closing, so
that pages waiting for a write to an unreachable server do not hold the
engine open (Ctrl-C, SIGTERM and CLOSESPIDER_TIMEOUT end a worker during an
outage).
"""

from __future__ import annotations

import logging

from scrapy.utils.defer import deferred_from_coro

from crawlproj import internals

logger = logging.getLogger(__name__)

FINISH_REASON = "redis_refused"


class RedisGuard:
    def __init__(self, crawler):
        self.crawler = crawler
        self.refused: str | None = None
        self._commits: list = []
        self._hooked = False

    @classmethod
    def of(cls, crawler) -> RedisGuard:
        """The crawler's one guard: the frontier and the stores share it."""
        if not hasattr(crawler, "_crawlproj_redis_guard"):
            crawler._crawlproj_redis_guard = cls(crawler)
        return crawler._crawlproj_redis_guard

    def watch(self, commit) -> None:
        """commit (a GroupCommit) reports refusals here, and is told when the
        crawl starts closing (outside a crawl there is no close to hear)."""
        commit.on_refused = lambda reason, name=commit.name: self.refuse(name, reason)
        self._commits.append(commit)
        if not self._hooked:
            self._hooked = internals.on_close_started(self.crawler, self._closing)

    def _closing(self) -> None:
        for commit in self._commits:
            commit.stopping()

    def refuse(self, name: str, reason: str) -> None:
        self.crawler.stats.set_value("redis/refused", reason)
        if self.refused is not None:
            logger.warning("%s: %s (the crawl is already stopping)", name, reason)
            return
        self.refused = reason
        logger.error("%s: %s. Stopping the crawl (finish reason %s); the URLs this worker "
                     "holds stay leased in Redis and go back to their queues when their "
                     "leases expire.", name, reason, FINISH_REASON)
        engine = getattr(self.crawler, "engine", None)
        if engine is None or engine.spider is None:
            return
        d = deferred_from_coro(engine.close_spider_async(reason=FINISH_REASON))
        d.addErrback(lambda f: logger.error("could not close the spider: %s", f.getErrorMessage()))
