"""A downloader middleware for tests: every robots.txt request waits DELAY
seconds (without blocking the reactor) before it goes on to the crawl
log's stamp and the lease check. A worker stopped meanwhile resumes with
robots.txt requests that have not yet been checked against their leases."""

from __future__ import annotations

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor, task

DELAY = 5.0


class SlowRobotsMiddleware:
    async def process_request(self, request, spider=None):
        if request.url.endswith("/robots.txt"):
            await maybe_deferred_to_future(task.deferLater(reactor, DELAY, lambda: None))
        return None
