"""CrawlLogPipeline: a Heritrix-style crawl.log line per download attempt.

Settings: CRAWLLOG_ENABLED, CRAWLLOG_DIR. Needs the record middleware (the
log covers attempts that never become items: errors, redirects, robots.txt
exclusions). See stores/crawllog.py for the line format.
"""

from __future__ import annotations

import time

from scrapy.exceptions import CloseSpider, NotConfigured

from crawlproj.pipelines.guard import FINISH_REASON, StoreGuard, warn_without_recorder
from crawlproj.stores.common import crawllog_dir, describe_os_error, worker_id
from crawlproj.stores.crawllog import CrawlLog, log_path
from crawlproj.stores.signals import attempt_failed, exchange_recorded

STORE = "crawl log"


class CrawlLogPipeline:
    def __init__(self, crawler):
        s = crawler.settings
        if not s.getbool("CRAWLLOG_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.directory = crawllog_dir(s)
        self.crawl_id = s.get("CRAWL_ID")
        self.log: CrawlLog | None = None
        # from the signals alone: no process_item, so items skip it in Scrapy's chain
        crawler.signals.connect(self._attempt, exchange_recorded)
        crawler.signals.connect(self._attempt, attempt_failed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def open_spider(self, spider=None):
        warn_without_recorder(self.crawler, STORE)
        from pathlib import Path
        worker = worker_id(self.crawler)
        path = log_path(Path(self.directory), self.crawl_id, worker)
        try:
            self.log = CrawlLog(path)
        except OSError as exc:
            import logging
            logging.getLogger(__name__).error(
                "%s: cannot write %s: %s. The crawl does not start (finish reason %s).",
                STORE, path, describe_os_error(exc), FINISH_REASON)
            raise CloseSpider(FINISH_REASON) from None

    def _attempt(self, exchange=None, attempt=None, **kwargs):
        att = exchange or attempt
        if self.log is None or att is None:
            return None
        try:
            self.log.write(att, time.time())
        except OSError as exc:
            self.log = None
            StoreGuard.of(self.crawler).fail(STORE, self.directory, exc)
        return None

    def close_spider(self, spider=None):
        if self.log is not None:
            try:
                self.log.close()
            except OSError:
                pass
            self.log = None
