"""Record every download attempt for the stores (content store, page
metadata, crawl log).

A downloader middleware placed next to the downloader (priority 950, after
HttpCompressionMiddleware at 590, RedirectMiddleware at 600 and
RetryMiddleware at 550 in process_response order), so it sees each raw
response exactly as it came off the wire: still compressed, including the
3xx that RedirectMiddleware turns into a new request, each 5xx that
RetryMiddleware retries, robots.txt fetches, and 404s that never reach the
spider. Mercator §3 stores what was downloaded; Heritrix logs and archives
every fetch the same way.

Responses become :class:`~crawlproj.stores.exchange.Exchange` objects sent
with the ``exchange_recorded`` signal; its handlers hold their writes for the
response's URL (crawlproj/stores/pending.py) and the response goes on at
once: the URL's lease ends once they are done (the WARC record of a 404 is
on disk before its lease ends). Attempts that got no response (DNS failure,
refused connection, timeout, a body over DOWNLOAD_MAXSIZE, robots.txt
exclusion and a host known not to resolve, which Scrapy raises from
process_request) become
:class:`FailedAttempt` objects sent with ``attempt_failed``. A response
flagged ``dataloss`` (a body cut short, kept only when
DOWNLOAD_FAIL_ON_DATALOSS is off) is reported as a failed attempt and never
stored: a store never holds half a body.
"""

from __future__ import annotations

import heapq
import time

from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from twisted.internet import defer, error
from twisted.web.client import ResponseFailed, ResponseNeverReceived

from crawlproj import internals
from crawlproj.dns import HostUnresolvable
from crawlproj.robots.middleware import RobotsFetched
from crawlproj.stores import exchange as ex
from crawlproj.stores.signals import attempt_failed, exchange_recorded

T0 = "_crawlproj_t0"  # private meta key ('_' keys never reach the frontier)


def status_of(exc: BaseException) -> tuple[int, str]:
    """(Heritrix fetch status code, reason annotation) of a download exception."""
    name = type(exc).__name__
    if isinstance(exc, HostUnresolvable):  # its host's lookups failed: never sent
        return ex.S_DOMAIN_PREREQUISITE_FAILURE, "dns"
    if isinstance(exc, IgnoreRequest):
        if "robots.txt" in str(exc):
            return ex.S_ROBOTS_PRECLUDED, "robots"
        return ex.S_BLOCKED_BY_CUSTOM_PROCESSOR, name
    if isinstance(exc, (CannotResolveHostError, error.DNSLookupError)):
        return ex.S_DOMAIN_UNRESOLVABLE, name
    if isinstance(exc, (DownloadTimeoutError, error.TimeoutError, defer.TimeoutError,
                        error.TCPTimedOutError)):
        return ex.S_TIMEOUT, name
    if isinstance(exc, (DownloadConnectionRefusedError, error.ConnectionRefusedError,
                        error.ConnectError, error.NoRouteError)):
        return ex.S_CONNECT_FAILED, name
    if isinstance(exc, (DownloadCancelledError, defer.CancelledError)):
        # Scrapy cancels a download whose body passes DOWNLOAD_MAXSIZE
        if "max size" in str(exc).lower():
            return ex.S_RUNTIME_EXCEPTION, "size-exceeded"
        return ex.S_RUNTIME_EXCEPTION, name
    if isinstance(exc, (ResponseDataLossError, DownloadFailedError, error.ConnectionLost,
                        error.ConnectionDone, ResponseFailed, ResponseNeverReceived)):
        return ex.S_CONNECT_LOST, name
    return ex.S_RUNTIME_EXCEPTION, name


class RecordMiddleware:
    def __init__(self, crawler):
        self.crawler = crawler
        self.signals = crawler.signals
        self.stats = crawler.stats
        # the response heads as received, for the WARC records (Exchange.capture)
        internals.record_response_heads()
        self._free: list[int] = []   # released download slots (a heap)
        self._slots = 0              # slots handed out so far

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def _take_slot(self) -> int:
        """The lowest free download slot: a request holds it from here to its
        response or error (the crawl log's thread column, as Heritrix numbers
        the ToeThread that holds a URI)."""
        if self._free:
            return heapq.heappop(self._free)
        self._slots += 1
        return self._slots - 1

    def process_request(self, request):
        request.meta[T0] = time.time()
        request.meta[ex.SLOT] = self._take_slot()
        return None

    def process_response(self, request, response):
        now = time.time()
        started = request.meta.get(T0, now)
        if "dataloss" in (response.flags or []):
            self._failed(request, ex.S_CONNECT_LOST, "dataloss", started, now)
            return response
        exchange = ex.Exchange.capture(request, response, started, now)
        # popped, so a retry or redirect made from this request takes its own
        slot = request.meta.pop(ex.SLOT, None)
        if slot is not None:
            heapq.heappush(self._free, slot)
        self.stats.inc_value("record/responses")
        self.signals.send_catch_log(exchange_recorded, exchange=exchange)
        return response

    def process_exception(self, request, exception):
        if isinstance(exception, RobotsFetched):
            self._release(request)
            return None  # never sent: its turn fetched robots.txt, it is queued again
        now = time.time()
        code, reason = status_of(exception)
        self._failed(request, code, reason, request.meta.get(T0, now), now)
        return None

    def _release(self, request) -> int:
        """The request's slot, now free; a request refused before it reached
        this middleware had none and is logged with the lowest free one."""
        slot = request.meta.pop(ex.SLOT, None)
        if slot is None:
            slot = self._take_slot()
        heapq.heappush(self._free, slot)
        return slot

    def _failed(self, request, code, reason, started, now):
        self.stats.inc_value(f"record/failed/{reason}")
        attempt = ex.FailedAttempt(
            request=request, url=request.url, status=code, reason=reason, started=started,
            duration=max(0.0, now - started), hops=ex.discovery_path(request), via=ex.via(request),
            robots=ex.is_robots_request(request), retries=int(request.meta.get("retry_times") or 0),
            slot=self._release(request))
        self.signals.send_catch_log(signal=attempt_failed, attempt=attempt)
