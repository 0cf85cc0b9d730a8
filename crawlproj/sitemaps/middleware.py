"""Sitemaps (sitemaps.org) as Scrapy middlewares; the work is crawlproj/sitemaps'.

SitemapMiddleware, a spider middleware (960: next to the spider, so that what
it adds passes every other one, as a page's links do): a robots.txt the
robots middleware fetched (a response of a request carrying
crawlproj.robots.ROBOTS_FOR, seen through Scrapy's response_received) has its
sitemaps requested through the frontier; a sitemap's response, after whatever the spider made of it
(its item, for the stores), gives its URLs, or an index its sitemaps
(crawlproj.sitemaps.worker.Sitemaps). A sitemap whose fetch failed is counted
and said once.

SitemapDownloadMiddleware, a downloader middleware (595: its responses come
to it before HttpCompressionMiddleware, 590): a sitemap is read up to
SITEMAP_MAX_BYTES, the protocol's 50 MB, whatever DOWNLOAD_MAXSIZE says for
pages. Its download stops there, keeping what came (bytes_received), also
when its length is announced larger (Scrapy's own limit, which would cancel
it at once, is lifted for the transfer); a Content-Encoding is then
decompressed by Scrapy within the same limit (past it, Scrapy drops the
response with one warning).

Both idle unless SITEMAP_ENABLED.
"""

from __future__ import annotations

from scrapy import signals
from scrapy.exceptions import NotConfigured, StopDownload
from scrapy.spidermiddlewares.httperror import HttpError

from crawlproj.robots import ROBOTS_FOR
from crawlproj.sitemaps.discovery import SITEMAP
from crawlproj.sitemaps.worker import Sitemaps
from crawlproj.stores.signals import attempt_failed

BYTES = "_crawlproj_sitemap_bytes"  # private meta ('_' keys never reach the frontier)


class SitemapMiddleware:
    def __init__(self, sitemaps: Sitemaps):
        self.sitemaps = sitemaps

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        mw = cls(Sitemaps.from_crawler(crawler))
        crawler.signals.connect(mw._response, signals.response_received)
        crawler.signals.connect(mw._attempt_failed, attempt_failed)
        return mw

    def _response(self, response, request, spider=None):
        if request.meta.get(ROBOTS_FOR) is not None:
            self.sitemaps.robots_response(request, response)

    def _attempt_failed(self, attempt, **kwargs):
        if SITEMAP in attempt.request.meta:
            self.sitemaps.failed(attempt.request, attempt.reason)

    async def process_spider_output(self, response, result, spider=None):
        async for x in result:
            yield x
        if SITEMAP in response.meta:
            async for request in self.sitemaps.read(response, spider):
                yield request

    def process_spider_exception(self, response, exception, spider=None):
        if isinstance(exception, HttpError) and SITEMAP in response.meta:
            self.sitemaps.failed(response.request, f"http_{response.status}")
        return None


class SitemapDownloadMiddleware:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("SITEMAP_ENABLED"):
            raise NotConfigured
        mw = cls(s.getint("SITEMAP_MAX_BYTES"))
        crawler.signals.connect(mw._bytes_received, signals.bytes_received)
        return mw

    def process_request(self, request, spider=None):
        if SITEMAP in request.meta:
            request.meta.pop(BYTES, None)  # a retry counts its own
            # the transfer is stopped by _bytes_received, not cancelled
            request.meta["download_maxsize"] = request.meta["download_warnsize"] = 0
        return None

    def process_response(self, request, response, spider=None):
        if SITEMAP in request.meta:
            # the limit Scrapy's decompression of a Content-Encoding keeps
            request.meta["download_maxsize"] = request.meta["download_warnsize"] = self.max_bytes
        return response

    def _bytes_received(self, data, request, spider=None):
        if SITEMAP not in request.meta:
            return
        got = request.meta[BYTES] = request.meta.get(BYTES, 0) + len(data)
        if got >= self.max_bytes:
            raise StopDownload(fail=False)
