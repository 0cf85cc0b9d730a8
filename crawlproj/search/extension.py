"""IndexerExtension: a worker's share of the crawl's indexer (Scrapy extension).

On when INDEX_ENABLED and INDEX_WRITER. Every INDEX_TICK seconds, when no
indexer process of its own runs, the worker tries to take the crawl's indexer
lock (crawlproj/search/indexer.py); the one that takes it starts the indexer
as a process of its own (crawlproj/search/process.py), which writes what the
workers hand over into CRAWL_DATA_DIR/index/<crawl>; both renew the lock. A
worker that dies takes its indexer with it (the child sees its parent gone
within a tick, writes what is waiting and releases the lock); another worker
takes over when the lock is free, or once its TTL (INDEX_LOCK_TTL) runs out.
When the spider closes the worker stops its indexer, which writes and commits
what is waiting; a worker without one writes in its own process what is left
if the lock is free or frees within three ticks (the crawl's last worker,
after the holder left). A real-time search session turns INDEX_PROCESS off:
the indexer then runs in the worker's threads instead, and with
INDEX_CRAWL_ID the lock, the hand-over and the index are those of the crawl
it searches. `scrapy index` runs the same indexer by hand.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from scrapy.exceptions import NotConfigured
from twisted.internet import reactor

from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.redis.lockedwork import LockedWork
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
        # False in a real-time search session: see INDEX_PROCESS
        self.own_process = crawler.settings.getbool("INDEX_PROCESS")
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
        if not self.own_process:
            self.runner.tick()  # its batches reach _count through on_batch
            return
        if self.child is not None:
            if self.child.running():
                # renewed from here too: the child, at a lower priority, may
                # not come to its own renewal within the TTL on a busy machine
                if not self.runner.lock.hold():
                    logger.warning("Indexer lock lost to %s; stopping indexer process %d",
                                   self.runner.lock.holder(), self.child.pid)
                    self.child.proc.terminate()
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
            self._failed(self.child, code)
        self.child = None

    def _failed(self, child: IndexerChild, code: int) -> None:
        logger.error("Indexer process %d exited with code %s; another takes over after %g s",
                     child.pid, code, self.runner.lock.ttl_ms / 1000)
        self.stats.inc_value("index/errors")
        self._retry_at = time.monotonic() + self.runner.lock.ttl_ms / 1000

    def _count(self, batch: dict) -> None:
        b = Batch(**batch)
        self.stats.inc_value("index/written", b.written)
        self.stats.inc_value("index/refreshed", b.refreshed)
        if b.committed:
            # the dashboard's: when pages last became searchable
            self.stats.set_value("index/last_batch", datetime.now(timezone.utc))

    def leave(self):
        child, self.child = self.child, None
        if child is not None:
            running = child.running()
            code = child.stop()
            if code:
                self._failed(child, code)
            elif running:
                return  # it wrote what was waiting, and released the lock
        # No indexer process of this worker's: what is left, if nobody else
        # writes it. Another worker's indexer in its last commit holds the
        # lock a moment longer; a page handed over after it read the list
        # then waits there for the next indexer (`scrapy index --once`).
        deadline = time.monotonic() + 3 * self.tick
        while self.runner.handover.waiting():
            holder = self.runner.lock.holder()
            if holder in (None, self.runner.lock.token) or time.monotonic() > deadline:
                self.runner.drain_and_release()
                return
            time.sleep(min(0.5, self.tick))
        self.runner.lock.release()  # if it is ours: an indexer process that failed
