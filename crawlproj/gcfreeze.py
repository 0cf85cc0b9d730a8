"""GCFreeze: keep the objects a worker builds at start-up out of every later
garbage collection.

A worker's long-lived heap is mostly what it made before the first request
(Scrapy, Twisted, lxml, the spider, its settings and middlewares), and
CPython's full collection walks all of them each time it runs, a large share
of a crawling worker's CPU (docs/benchmarks.md, "What each setting is
measured to give"). Once the spider is open they are moved to the permanent generation (gc.freeze), so a
collection walks only what the crawl itself keeps alive.

The young generation is then collected once YOUNG_THRESHOLD more objects
have been made than freed, rather than CPython's 700. A page's objects (its
request, response, item, records and the Deferreds between them) live for a
few reactor turns, and with a few dozen pages in flight the count passed 700
many times in that span: each collection walked them and moved them to the
older generations, which were then walked in turn, for objects that
reference counting frees a moment later. (CPython 3.11-3.13's generational
collector.)

Settings: GC_FREEZE.
"""

from __future__ import annotations

import gc
import logging

from scrapy import signals
from scrapy.exceptions import NotConfigured

logger = logging.getLogger(__name__)

# Objects made beyond those freed between young-generation collections:
# about a page's worth for each of the few dozen pages in flight, so that a
# page's objects die young (docs/benchmarks.md has the A/B); the older
# generations keep CPython's thresholds.
YOUNG_THRESHOLD = 20_000


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
        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        self.stats.set_value("gc/frozen_objects", gc.get_freeze_count())
        logger.debug("GC: %d start-up objects frozen", gc.get_freeze_count())
