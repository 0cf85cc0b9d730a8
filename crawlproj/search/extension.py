"""IndexerExtension: a worker's share of the crawl's indexer (Scrapy extension).

On when INDEX_ENABLED and INDEX_WRITER. Every INDEX_TICK seconds, when no
indexer process of its own runs, the worker tries to take the crawl's indexer
lock (crawlproj/search/indexer.py); the one that takes it starts the indexer
as a process of its own (crawlproj/search/process.py), which renews the lock
and writes what the workers hand over into CRAWL_DATA_DIR/index/<crawl>. A
worker that dies takes its indexer with it (the child sees its parent gone
within a tick, writes what is waiting and releases the lock); another worker
takes over when the lock is free, or once its TTL (INDEX_LOCK_TTL) runs out.
When the spider closes the worker stops its indexer, which writes and commits
what is waiting; a worker without one writes in its own process what is left
if the lock is free (the crawl's last worker, after the holder left). With
INDEX_CRAWL_ID (a real-time search session) the lock, the hand-over and the
index are that crawl's. `scrapy index` runs the same indexer by hand.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from scrapy.exceptions import NotConfigured
from twisted.internet import reactor

from crawlproj.keyspace import Keyspace
from crawlproj.lockedwork import LockedWork
from crawlproj.redisconn import get_redis
from crawlproj.search.indexer import Batch
from crawlproj.search.process import IndexerChild, settings_order
from crawlproj.search.runner import IndexerRunner

logger = logging.getLogger(__name__)


class IndexerExtension(LockedWork):
    name = "index"
    # the pipelines have handed everything over by now: write it before leaving
    wait_at_close = True

    def __init__(self, crawler, runner: IndexerRunner, crawl_id: str):
        super().__init__(crawler, crawler.settings.getfloat("INDEX_TICK"))
        self.runner = runner
        self.crawl_id = crawl_id
        self.runner.on_batch = lambda b: reactor.callFromThread(self._count, b.__dict__)
        self.child: IndexerChild | None = None
        self._retry_at = 0.0  # after an indexer process failed: not before the lock's TTL

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not (s.getbool("INDEX_ENABLED") and s.getbool("INDEX_WRITER")):
            raise NotConfigured
        keyspace = Keyspace.of_index(s, get_redis(s))
        return cls(crawler, IndexerRunner.from_settings(s, keyspace), keyspace.crawl_id).connect()

    def work(self):
        if self.child is not None:
            if self.child.running():
                return
            self._ended(self.child.returncode)
        # no process while nothing is handed over (a crawl with the stores off)
        if time.monotonic() < self._retry_at or not self.runner.handover.waiting() \
                or not self.runner.lock.hold():
            return
        order = settings_order(self.crawler.settings, self.crawl_id, self.runner.lock.token)
        try:
            self.child = IndexerChild(order, lambda b: reactor.callFromThread(self._count, b))
        except OSError as exc:
            logger.error("Indexer: cannot start its process: %s", exc)
            self.stats.inc_value("index/errors")
            self._retry_at = time.monotonic() + self.runner.lock.ttl_ms / 1000
            self.runner.lock.release()
            return
        logger.info("Indexer lock taken (%s): indexer process %d writes %s",
                    self.runner.lock.token, self.child.pid, self.runner.directory)

    def _ended(self, code: int | None) -> None:
        """The child exited by itself: another process took the lock (0),
        or it failed (its line is in the log)."""
        if code:
            logger.error("Indexer process %d exited with code %s; another takes over after %g s",
                         self.child.pid, code, self.runner.lock.ttl_ms / 1000)
            self.stats.inc_value("index/errors")
            self._retry_at = time.monotonic() + self.runner.lock.ttl_ms / 1000
        self.child = None

    def _count(self, batch: dict) -> None:
        b = Batch(**batch)
        self.stats.inc_value("index/written", b.written)
        self.stats.inc_value("index/refreshed", b.refreshed)
        if b.committed:
            # the dashboard's: when pages last became searchable
            self.stats.set_value("index/last_batch", datetime.now(timezone.utc))

    def leave(self):
        if self.child is not None and self.child.running():
            code = self.child.stop()
            if code:
                self._ended(code)
            else:
                self.child = None
                return
        self.child = None
        if self.runner.handover.waiting():
            self.runner.drain_and_release()
        else:
            self.runner.lock.release()  # if it is ours: an indexer process that failed
