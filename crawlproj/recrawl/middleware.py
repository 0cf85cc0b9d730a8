"""Conditional GET and the fetch's outcome, for continuous crawling.

A page fetched from its host's recrawl queue carries its recrawl record
(crawlproj/recrawl/schedule.py): its ETag and Last-Modified go out as
If-None-Match and If-Modified-Since (RFC 9110 §13.1), so that an unchanged
page costs a 304 and no body. Every response to a page of the frontier is
noted (status, validators, digest of the body as it came off the wire, and
with RECRAWL_CHANGE a threshold the text's sketch) for
the scheduler, which updates the page's change-rate estimate when the engine
is done with it.

Downloader middleware 945: inside the record middleware (950), so that the
WARC and page metadata see the conditional request as sent, and outside
compression (590), redirects (600) and retries (550), so that the digest is
of the raw body and a 3xx or 5xx is seen as such.
"""

from __future__ import annotations

from crawlproj.recrawl.record import (
    HELD,
    OBSERVED,
    ChangeSettingError,
    change_threshold,
    conditional_headers,
    observe,
)


class RecrawlMiddleware:
    def __init__(self, stats, sketched: bool = False):
        self.stats = stats
        self.sketched = sketched    # RECRAWL_CHANGE a resemblance threshold

    @classmethod
    def from_crawler(cls, crawler):
        # loaded always, idle unless the scheduler marks requests (RECRAWL_ENABLED);
        # a bad RECRAWL_CHANGE is the scheduler's to refuse, in one line
        s = crawler.settings
        try:
            sketched = change_threshold(s.get("RECRAWL_CHANGE")) is not None
        except ChangeSettingError:
            sketched = False
        return cls(crawler.stats, s.getbool("RECRAWL_ENABLED") and sketched)

    def process_request(self, request, spider=None):
        record = request.meta.get(HELD)
        if record and request.method == "GET":
            for name, value in conditional_headers(record).items():
                request.headers[name] = value
            self.stats.inc_value("recrawl/conditional_requests")
        return None

    def process_response(self, request, response, spider=None):
        if HELD in request.meta:
            request.meta[OBSERVED] = observe(response, self.sketched)
        return response
