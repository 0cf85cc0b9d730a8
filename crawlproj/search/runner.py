"""IndexerRunner: the indexer's life in a process that may hold its lock.

Shared by the worker's extension and `scrapy index`: on each tick, take or
renew the crawl's indexer lock; while holding it, keep the index open for
writing and drain the hand-over list; on losing it (or leaving), close the
index, which lets go of tantivy's writer lock too.
"""

from __future__ import annotations

import logging
import time

from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.search.handover import HandOver
from crawlproj.search.index import PageIndex, index_dir
from crawlproj.search.indexer import Batch, Indexer, IndexerLock

logger = logging.getLogger(__name__)


class IndexerRunner:
    def __init__(self, lock: IndexerLock, handover: HandOver, directory, *, batch: int,
                 pagerank_interval: float, damping: float, idle_commit: float = 0.0,
                 tick_budget: float = 1.0, on_batch=None):
        self.lock = lock
        self.handover = handover
        self.directory = directory
        self.batch = batch
        self.pagerank_interval = pagerank_interval
        self.damping = damping
        self.idle_commit = idle_commit
        self.tick_budget = tick_budget
        self.on_batch = on_batch  # called with every tick's Batch that took documents
        self.indexer: Indexer | None = None

    @classmethod
    def from_settings(cls, s, keyspace: Keyspace | None = None) -> IndexerRunner:
        redis = get_redis(s)
        keyspace = keyspace or Keyspace.from_settings(s, redis)
        return cls(IndexerLock(redis, keyspace, s.getfloat("INDEX_LOCK_TTL")), HandOver(redis, keyspace),
                   index_dir(s, keyspace.crawl_id), batch=s.getint("INDEX_BATCH"),
                   pagerank_interval=s.getfloat("INDEX_PAGERANK_INTERVAL"),
                   damping=s.getfloat("PAGERANK_DAMPING"),
                   idle_commit=s.getfloat("INDEX_IDLE_COMMIT"))

    @property
    def holding(self) -> bool:
        return self.indexer is not None

    def tick(self) -> Batch | None:
        """Hold the lock and write what is waiting (for at most tick_budget
        seconds, renewing between batches); None when another process holds it."""
        if not self.lock.hold():
            if self.indexer is not None:
                logger.warning("Indexer lock lost to %s; closing the index", self.lock.holder())
                self._close()
            return None
        if self.indexer is None:
            index = PageIndex(self.directory, write=True)
            self.indexer = Indexer(index, self.handover, self.batch, self.pagerank_interval,
                                   self.damping, idle_commit=self.idle_commit)
            logger.info("Indexer lock taken (%s): writing %s", self.lock.token, self.directory)
        total = Batch()
        start = time.monotonic()
        while True:
            b = self.indexer.step()
            total.taken += b.taken
            total.written += b.written
            total.refreshed += b.refreshed
            total.committed += b.committed
            if b.taken < self.batch or time.monotonic() - start > self.tick_budget \
                    or not self.lock.hold():
                if total.taken and self.on_batch is not None:
                    self.on_batch(total)
                return total

    def drain_and_release(self) -> None:
        """Leaving: write and commit what is waiting if this process is the
        indexer or the lock is free (a process told to stop before its first
        tick, the crawl's last worker after the holder left), rank, let go.
        What is handed over meanwhile is left to the next holder.
        When that fails (Redis out of reach), the lock is left to expire after
        its TTL rather than released: a release would wait out one more
        timeout."""
        try:
            # what is waiting now, not what the workers still crawling keep
            # handing over: they take the lock over once it is released
            waiting, taken = self.handover.waiting(), 0
            while taken < waiting:
                b = self.tick()
                if b is None or b.taken < self.batch:
                    break
                taken += b.taken
            if self.indexer is not None:
                if self.indexer.uncommitted:
                    committed = self.indexer.commit()
                    if committed and self.on_batch is not None:
                        self.on_batch(Batch(committed=committed))
                self.indexer.maybe_rank(force=True)
        finally:
            self._close()
        self.lock.release()

    def _close(self) -> None:
        if self.indexer is not None:
            self.indexer.index.close()
            self.indexer = None
