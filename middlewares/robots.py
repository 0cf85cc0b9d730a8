"""robots.txt with Crawl-delay handed to the frontier.

Scrapy's RobotsTxtMiddleware parses Crawl-delay (through Protego) but never
acts on it (../shared/scrapy-notes.md §5). This subclass records the host's
Crawl-delay on each allowed request as ``request.meta["crawl_delay"]``; the
frontier's scheduler takes it into the host's next-contact time when the
download ends (Mercator §3.1's strong politeness; FRONTIER_OBEY_CRAWL_DELAY).

The robots.txt race of scrapy-notes §4 (requests for a host whose robots.txt
is still being fetched pass unchecked) cannot happen here: the frontier leases
a host to one worker at a time and hands out one URL of it at a time, and the
scheduler hands a host's first URL to the engine only once its robots.txt is
parsed (rules_pending below).
"""

from __future__ import annotations

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

_UNKNOWN = object()


class CrawlDelayRobotsTxtMiddleware(RobotsTxtMiddleware):
    def rules_pending(self, request) -> tuple[Deferred | None, bool]:
        """Whether request's host still lacks its robots.txt rules: (None, False)
        if they are known (or not needed), else (a Deferred that fires once
        they are, whether this call started the robots.txt download).

        The frontier's scheduler asks this before handing a host's first URL
        to the engine, so that the page does not wait for its robots.txt
        inside a download slot (Scrapy's own path: the page enters the
        downloader, then its middleware fetches robots.txt in a second slot
        and keeps the first one waiting; Mercator fetches a host's rules into
        its robots cache ahead of the host's URLs)."""
        if request.meta.get("dont_obey_robotstxt") or request.url.startswith(("data:", "file:")):
            return None, False
        parser = self._parsers.get(urlparse_cached(request).netloc, _UNKNOWN)
        if parser is _UNKNOWN:
            return deferred_from_coro(self.robot_parser(request)), True
        if isinstance(parser, Deferred):
            known: Deferred = Deferred()

            def passthrough(result):
                known.callback(None)
                return result  # the middleware's own waiters get the parser

            parser.addBoth(passthrough)
            return known, False
        return None, False

    def process_request_2(self, rp, request) -> None:
        super().process_request_2(rp, request)  # raises IgnoreRequest if disallowed
        if rp is None:
            return
        useragent = self._robotstxt_useragent or request.headers.get(
            b"User-Agent", self._default_useragent)
        delay = rp.crawl_delay(useragent)
        if delay:
            request.meta["crawl_delay"] = float(delay)
