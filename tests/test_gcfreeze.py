"""GCFreeze moves start-up objects to the permanent generation when the spider opens."""

from __future__ import annotations

import gc

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawlproj.gcfreeze import GCFreeze


def test_start_up_objects_are_frozen_when_the_spider_opens():
    crawler = get_crawler(Spider, {"GC_FREEZE": True})
    crawler.stats.open_spider()
    ext = GCFreeze.from_crawler(crawler)
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        ext.spider_opened(Spider("s"))
        frozen = crawler.stats.get_value("gc/frozen_objects")
        assert frozen > 10_000 and gc.get_freeze_count() > 10_000  # Scrapy alone makes more
    finally:
        gc.unfreeze()


def test_switched_off():
    with pytest.raises(NotConfigured):
        GCFreeze.from_crawler(get_crawler(Spider, {"GC_FREEZE": False}))
