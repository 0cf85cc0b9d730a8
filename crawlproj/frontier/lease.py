"""LeaseCheckMiddleware: no download on a lease this worker has lost.

The frontier leases a host to one worker at a time for FRONTIER_LEASE_TTL,
renewed while the download runs (crawlproj/frontier/sync.py). A worker
stopped (SIGSTOP, a laptop's lid, a long GC pause) or cut off from Redis for
longer may find, when it goes on, requests in its engine whose leases the
frontier has meanwhile given to another worker: fetching them would fetch a
page twice and contact a host another worker now holds. Nearest to the
downloader, after every other middleware (retries and redirects come back
through the frontier with leases of their own), this asks the frontier's
Downloads (crawlproj.components) whether the request's lease is still this worker's, and drops it if not.
"""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest

from crawlproj.components import registered
from crawlproj.frontier.downloads import Downloads


class LeaseCheckMiddleware:
    def __init__(self, crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_request(self, request, spider=None):
        downloads = registered(self.crawler, Downloads)  # None: another scheduler
        if downloads is not None and not downloads.may_download(request):
            raise IgnoreRequest("frontier lease expired before the download started")
        return None
