"""What a store does when it cannot write: say so once, stop, lose nothing.

An unwritable or full output directory is not something a crawl can work
around, and every page fetched after it would be lost. So the first failure
logs one error line naming the store, the path and the reason, and closes
the spider with finish reason ``store_error`` (Scrapy's graceful close: the
frontier gets back every URL this worker leased but did not fetch). Each
page a store could not keep is put back in the frontier (dont_filter, so the
URL-seen test does not drop it) before its lease ends; the next worker
fetches it again.
"""

from __future__ import annotations

import logging

from scrapy.utils.defer import deferred_from_coro

from crawlproj.components import component
from crawlproj.stores.common import describe_os_error

logger = logging.getLogger(__name__)

FINISH_REASON = "store_error"


class StoreGuard:
    def __init__(self, crawler):
        self.crawler = crawler
        self.failed: dict[str, str] = {}   # store -> message
        self.requeued = 0
        self.lost: list[str] = []

    @classmethod
    def of(cls, crawler) -> StoreGuard:
        return component(crawler, cls)

    def fail(self, store: str, path, exc: BaseException, requests=()) -> None:
        stats = self.crawler.stats
        stats.inc_value(f"stores/{store}/write_errors")
        if store not in self.failed:
            message = f"{store}: cannot write {path}: {describe_os_error(exc)}"
            if not self.failed:  # one error line for the crawl, whatever fails next
                logger.error("%s. Stopping the crawl (finish reason %s); pages not stored go "
                             "back to the frontier.", message, FINISH_REASON)
            else:
                logger.warning("%s (the crawl is already stopping)", message)
            self.failed[store] = message
            self.stop()
        for request in requests:
            self.requeue(request)

    def stop(self) -> None:
        engine = getattr(self.crawler, "engine", None)
        if engine is None or engine.spider is None:
            return
        # a second close while one is under way only waits for it
        d = deferred_from_coro(engine.close_spider_async(reason=FINISH_REASON))
        d.addErrback(lambda f: logger.error("could not close the spider: %s", f.getErrorMessage()))

    def requeue(self, request) -> None:
        engine = getattr(self.crawler, "engine", None)
        if request is None or request.meta.get("dont_obey_robotstxt"):
            # robots.txt is a prerequisite, fetched again whenever it is needed
            return
        if engine is None or engine.spider is None:
            self.lost.append(request.url)
            logger.error("page not stored and not requeued (spider closed): %s", request.url)
            return
        engine.crawl(request.replace(dont_filter=True))
        self.requeued += 1
        self.crawler.stats.inc_value("stores/requeued")


RECORDER = "middlewares.record.RecordMiddleware"


def warn_without_recorder(crawler, store: str) -> None:
    """The WARC, metadata and crawl-log stores are fed by the record
    middleware's signals: without it they would silently stay empty."""
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    if not any(str(k).endswith(RECORDER) and v is not None for k, v in mws.items()):
        logger.warning("%s is enabled but %s is not in DOWNLOADER_MIDDLEWARES: "
                       "nothing will be recorded", store, RECORDER)
