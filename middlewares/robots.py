"""robots.txt with Crawl-delay handed to the frontier.

Scrapy's RobotsTxtMiddleware parses Crawl-delay (through Protego) but never
acts on it (../shared/scrapy-notes.md §5). This subclass records the host's
Crawl-delay on each allowed request as ``request.meta["crawl_delay"]``; the
frontier's scheduler takes it into the host's next-contact time when the
download ends (Mercator §3.1's strong politeness; FRONTIER_OBEY_CRAWL_DELAY).

The robots.txt race of scrapy-notes §4 (requests for a host whose robots.txt
is still being fetched pass unchecked) cannot happen here: the frontier leases
a host to one worker at a time and hands out one URL of it at a time, so the
first request of a host always waits for its robots.txt alone.
"""

from __future__ import annotations

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware


class CrawlDelayRobotsTxtMiddleware(RobotsTxtMiddleware):
    def process_request_2(self, rp, request) -> None:
        super().process_request_2(rp, request)  # raises IgnoreRequest if disallowed
        if rp is None:
            return
        useragent = self._robotstxt_useragent or request.headers.get(
            b"User-Agent", self._default_useragent)
        delay = rp.crawl_delay(useragent)
        if delay:
            request.meta["crawl_delay"] = float(delay)
