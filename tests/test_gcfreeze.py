"""GCFreeze moves start-up objects to the permanent generation when the spider opens."""

from __future__ import annotations

import gc

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawlproj.gcfreeze import YOUNG_THRESHOLD, GCFreeze


def test_start_up_objects_are_frozen_when_the_spider_opens():
    crawler = get_crawler(Spider, {"GC_FREEZE": True})
    crawler.stats.open_spider()
    ext = GCFreeze.from_crawler(crawler)
    gc.unfreeze()
    thresholds = gc.get_threshold()
    try:
        assert gc.get_freeze_count() == 0
        ext.spider_opened(Spider("s"))
        frozen = crawler.stats.get_value("gc/frozen_objects")
        assert frozen > 10_000 and gc.get_freeze_count() > 10_000  # Scrapy alone makes more
        # the young generation collected less often, the older ones as before
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_switched_off():
    with pytest.raises(NotConfigured):
        GCFreeze.from_crawler(get_crawler(Spider, {"GC_FREEZE": False}))
