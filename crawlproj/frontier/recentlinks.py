"""Drop a link this worker sent to the frontier lately, before Scrapy handles it.

Most links a page yields were seen before, mostly by this same worker
(Mercator §3.2). The frontier's scheduler drops them anyway (its recent-URL
cache), but only after Scrapy has run each through its spider middlewares and
a task of its scraper, work spent on links that go nowhere
(docs/benchmarks.md, "What each setting is measured to give"). Here a followed link whose exact URL the
scheduler admitted (or dropped as sent) lately goes no further. It is what the
frontier would do with it, earlier: the scheduler keeps no such URLs when its
prioritizer counts duplicate links (backlinks, OPIC, PageRank: they must
arrive), and a request with dont_filter always passes. It sits after
LinkContextMiddleware, which counts every link of the page.
"""

from __future__ import annotations

from scrapy import Request

from crawlproj.components import registered
from crawlproj.frontier.admission import Admission


class RecentLinksMiddleware:
    def __init__(self, crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def _filter(self):
        """A predicate that is True for a request to drop, or None."""
        admission = registered(self.crawler, Admission)  # None: another scheduler
        if admission is None or admission.sent is None:
            return None
        sent = admission.sent_lately
        stats = self.crawler.stats

        def drop(x) -> bool:
            if isinstance(x, Request) and not x.dont_filter and sent(x.url):
                stats.inc_value("frontier/recent_links_dropped")
                return True
            return False
        return drop

    def process_spider_output(self, response, result, spider=None):
        drop = self._filter()
        for x in result:
            if drop is None or not drop(x):
                yield x

    async def process_spider_output_async(self, response, result, spider=None):
        drop = self._filter()
        async for x in result:
            if drop is None or not drop(x):
                yield x
