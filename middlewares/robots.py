"""robots.txt Crawl-delay handed to the frontier.

Scrapy's RobotsTxtMiddleware parses robots.txt (through Protego) but never
acts on Crawl-delay (../shared/scrapy-notes.md §5). This middleware, next
after it, learns each host's Crawl-delay from Scrapy's robots_parsed signal
and records it on the host's requests as ``request.meta["crawl_delay"]``;
the frontier takes it into the host's next-contact time when the download
ends (Mercator §3.1's strong politeness; FRONTIER_OBEY_CRAWL_DELAY).

The robots.txt race of scrapy-notes §4 (requests for a host whose robots.txt
is still being fetched pass unchecked) cannot happen here: the frontier leases
a host to one worker at a time and hands out one URL of it at a time.
"""

from __future__ import annotations

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.httpobj import urlparse_cached


class CrawlDelayMiddleware:
    def __init__(self, crawler):
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        s = crawler.settings
        self.useragent = s.get("ROBOTSTXT_USER_AGENT") or s.get("USER_AGENT")
        self.delays: dict[str, float] = {}  # netloc -> Crawl-delay, hosts that set one
        crawler.signals.connect(self.robots_parsed, signals.robots_parsed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def robots_parsed(self, robotparser, request):
        delay = robotparser.crawl_delay(self.useragent)
        if delay:
            self.delays[urlparse_cached(request).netloc] = float(delay)

    def process_request(self, request, spider=None):
        delay = self.delays.get(urlparse_cached(request).netloc)
        if delay:
            request.meta["crawl_delay"] = delay
