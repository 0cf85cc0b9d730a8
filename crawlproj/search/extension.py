"""IndexerExtension: the crawl's indexer inside a worker (Scrapy extension).

On when INDEX_ENABLED and INDEX_WRITER. Every INDEX_TICK seconds the worker
takes or renews the crawl's indexer lock (crawlproj/search/indexer.py); the
holder opens the index under CRAWL_DATA_DIR/index/<crawl> for writing and
writes what the workers handed over since its last tick, in a thread, so the
reactor keeps crawling. A worker that dies stops renewing; another one takes
over when the lock's TTL (INDEX_LOCK_TTL) runs out. `scrapy index` runs the
same indexer as its own process.
"""

from __future__ import annotations

import logging
import time

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task, threads

from crawlproj.search.runner import IndexerRunner

logger = logging.getLogger(__name__)


class IndexerExtension:
    def __init__(self, crawler, runner: IndexerRunner):
        self.crawler = crawler
        self.runner = runner
        self.tick = crawler.settings.getfloat("INDEX_TICK")
        self.stats = crawler.stats
        self._loop = None
        self._busy = False

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not (s.getbool("INDEX_ENABLED") and s.getbool("INDEX_WRITER")):
            raise NotConfigured
        ext = cls(crawler, IndexerRunner.from_settings(s))
        crawler.signals.connect(ext.opened, signals.spider_opened)
        crawler.signals.connect(ext.closed, signals.spider_closed)
        return ext

    def opened(self, spider=None):
        self._loop = task.LoopingCall(self._tick)
        self._loop.start(self.tick, now=False)

    def closed(self, spider=None):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        # the pipelines have handed everything over: write it before leaving
        return threads.deferToThread(self._finish)

    def _finish(self):
        while self._busy:  # a tick's thread is writing: let it end
            time.sleep(0.05)
        self.runner.drain_and_release()

    def _tick(self):
        if self._busy:
            return None
        self._busy = True
        d = threads.deferToThread(self.runner.tick)
        d.addCallback(self._count)
        d.addErrback(lambda f: logger.error("Indexer failed: %s", f.getErrorMessage())
                     or self.stats.inc_value("index/errors"))
        d.addBoth(self._idle)
        return None

    def _count(self, batch):
        if batch is not None and batch.taken:
            self.stats.inc_value("index/written", batch.written)
            self.stats.inc_value("index/refreshed", batch.refreshed)

    def _idle(self, _):
        self._busy = False
