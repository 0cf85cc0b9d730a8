"""GCFreeze: keep the objects a worker builds at start-up out of every later
garbage collection.

A worker's long-lived heap is mostly what it made before the first request
(Scrapy, Twisted, lxml, the spider, its settings and middlewares), and
CPython's full collection walks all of them each time it runs: the collector
took 15-30 % of a crawling worker's CPU in bench/crawl_bench.py runs
(docs/benchmarks.md). Once the
spider is open they are moved to the permanent generation (gc.freeze), so a
collection walks only what the crawl itself keeps alive.

Settings: GC_FREEZE.
"""

from __future__ import annotations

import gc
import logging

from scrapy import signals
from scrapy.exceptions import NotConfigured

logger = logging.getLogger(__name__)


class GCFreeze:
    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("GC_FREEZE"):
            raise NotConfigured
        ext = cls(crawler.stats)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        return ext

    def spider_opened(self, spider):
        gc.collect()  # what start-up left as garbage is not kept forever
        gc.freeze()
        self.stats.set_value("gc/frozen_objects", gc.get_freeze_count())
        logger.debug("GC: %d start-up objects frozen", gc.get_freeze_count())
