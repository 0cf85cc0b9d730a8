"""IndexerExtension: the crawl's indexer inside a worker (Scrapy extension).

On when INDEX_ENABLED and INDEX_WRITER. Every INDEX_TICK seconds the worker
takes or renews the crawl's indexer lock (crawlproj/search/indexer.py); the
holder opens the index under CRAWL_DATA_DIR/index/<crawl> for writing and
writes what the workers handed over since its last tick, in a thread, so the
reactor keeps crawling. A worker that dies stops renewing; another one takes
over when the lock's TTL (INDEX_LOCK_TTL) runs out. With INDEX_CRAWL_ID (a
real-time search session) the lock, the hand-over and the index are that
crawl's. `scrapy index` runs the
same indexer as its own process.
"""

from __future__ import annotations

from datetime import datetime, timezone

from scrapy.exceptions import NotConfigured

from crawlproj.keyspace import Keyspace
from crawlproj.lockedwork import LockedWork
from crawlproj.redisconn import get_redis
from crawlproj.search.runner import IndexerRunner


class IndexerExtension(LockedWork):
    name = "index"
    # the pipelines have handed everything over by now: write it before leaving
    wait_at_close = True

    def __init__(self, crawler, runner: IndexerRunner):
        super().__init__(crawler, crawler.settings.getfloat("INDEX_TICK"))
        self.runner = runner

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not (s.getbool("INDEX_ENABLED") and s.getbool("INDEX_WRITER")):
            raise NotConfigured
        keyspace = Keyspace.of_index(s, get_redis(s))
        return cls(crawler, IndexerRunner.from_settings(s, keyspace)).connect()

    def work(self):
        batch = self.runner.tick()
        if batch is not None and batch.taken:
            self.stats.inc_value("index/written", batch.written)
            self.stats.inc_value("index/refreshed", batch.refreshed)
        if batch is not None and batch.committed:
            # the dashboard's: when pages last became searchable
            self.stats.set_value("index/last_batch", datetime.now(timezone.utc))

    def leave(self):
        self.runner.drain_and_release()
