"""What a worker does when Redis fails it: refuses its writes for good, or
does not answer for a while.

Out of memory (maxmemory with noeviction), snapshots failing (MISCONF), an
ACL that forbids, or the crawl's state gone from the server (restarted
without persistence, flushed): retrying cannot mend these, and a worker that
kept trying would crawl nothing, forever. So the first refusal, from the
frontier or a store, logs one error line naming the reason and closes the
spider, and no writer of the worker writes again:

- the crawl's state gone (CRAWLLOST): finish reason ``redis_lost``. Nothing
  this worker holds can go back to a frontier that is not there, and nothing
  more is written into the server (page metadata, links, the worker's record
  would only litter an empty server); the crawl must be restored from the
  server's data or seeded again;
- any other refusal: finish reason ``redis_refused``. Nothing is lost that
  Redis still has: the URLs this worker leased stay leased there, and go
  back to their queues when their leases expire (FRONTIER_LEASE_TTL), once
  the server takes writes again.

An outage (the server down, paused, restarting) is said by the worker's one
OutageLog (crawlproj/redis/client.py): a line when it starts, one every few
seconds while it lasts, one when it ends; its writers and per-page tests
report to it. The guard also tells every group commit when the crawl starts
closing, so that pages waiting for a write to an unreachable server do not
hold the engine open (Ctrl-C, SIGTERM and CLOSESPIDER_TIMEOUT end a worker
during an outage).
"""

from __future__ import annotations

import logging

from scrapy.utils.defer import deferred_from_coro

from crawlproj import internals
from crawlproj.redis.client import OutageLog, refusal

logger = logging.getLogger(__name__)

FINISH_REASON = "redis_refused"
LOST_REASON = "redis_lost"
UNREACHABLE_REASON = "redis_unreachable"


class RedisGuard:
    def __init__(self, crawler):
        self.crawler = crawler
        self.refused: str | None = None
        self.lost = False  # the crawl's state is gone from the server: write nothing more
        self.outage = OutageLog(crawler.stats, limit=crawler.settings.getfloat("REDIS_OUTAGE_LIMIT"),
                                on_limit=self._outage_too_long)
        self._commits: list = []
        self._hooked = False

    @classmethod
    def of(cls, crawler) -> RedisGuard:
        """The crawler's one guard: the frontier and the stores share it."""
        from crawlproj.components import component
        return component(crawler, cls)

    def watch(self, commit) -> None:
        """commit (a GroupCommit) reports refusals here, and is told when the
        crawl starts closing (outside a crawl there is no close to hear)."""
        commit.faults.on_refused = lambda reason, name=commit.name: self.refuse(name, reason)
        commit.faults.outage = self.outage
        self._commits.append(commit)
        if not self._hooked:
            self._hooked = internals.on_close_started(self.crawler, self._closing)

    def _closing(self) -> None:
        for commit in self._commits:
            commit.stopping()

    def failed(self, source: str, exc: Exception) -> None:
        """A per-page test (content-seen, near duplicates) went without its
        answer: a refusal stops the crawl, an outage is said once."""
        reason = refusal(exc)
        if reason is not None:
            self.refuse(source, reason)
        else:
            self.outage.failed(source, str(exc))

    def answered(self, source: str) -> None:
        self.outage.ok(source)

    def _outage_too_long(self, seconds: float) -> None:
        logger.error("Redis has not answered for %.0f s (REDIS_OUTAGE_LIMIT). Stopping the crawl "
                     "(finish reason %s); the URLs this worker holds stay leased in Redis and go "
                     "back to their queues when their leases expire, once it answers.",
                     seconds, UNREACHABLE_REASON)
        self._close(UNREACHABLE_REASON)

    def _close(self, reason: str) -> None:
        engine = getattr(self.crawler, "engine", None)
        if engine is None or engine.spider is None:
            return
        d = deferred_from_coro(engine.close_spider_async(reason=reason))
        d.addErrback(lambda f: logger.error("could not close the spider: %s", f.getErrorMessage()))

    def refuse(self, name: str, reason: str) -> None:
        self.crawler.stats.set_value("redis/refused", reason)
        if self.refused is not None:
            logger.warning("%s: %s (the crawl is already stopping)", name, reason)
            return
        self.refused = reason
        self.lost = getattr(reason, "code", None) == "CRAWLLOST"
        for commit in self._commits:  # none writes past a refusal, whichever met it
            commit.refuse(reason)
        if self.lost:
            finish = LOST_REASON
            logger.error("%s: %s. Stopping the crawl (finish reason %s): its frontier, DUE and "
                         "leases are gone with the server's data, and this worker writes nothing "
                         "more there. Restore the server's data (AOF or RDB) and start the "
                         "workers again, or seed the crawl anew.", name, reason, finish)
        else:
            finish = FINISH_REASON
            logger.error("%s: %s. Stopping the crawl (finish reason %s); the URLs this worker "
                         "holds stay leased in Redis and go back to their queues when their "
                         "leases expire, once the server takes writes again.",
                         name, reason, finish)
        self._close(finish)
