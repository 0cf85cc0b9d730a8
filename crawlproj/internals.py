"""Every Scrapy internal the project relies on, and only here.

Scrapy has no public API for these; tests/test_internals.py checks each one
against the installed Scrapy, with behaviour, so that a Scrapy release that
changes one fails there, loudly, and not in a crawl.

1. wake(): the engine stops pulling from the scheduler at the first None
   and otherwise looks again only on its 5 s heartbeat
   (../shared/scrapy-notes.md §2). When leases arrive, or a host's
   politeness wait ends, the frontier schedules the engine's next pull.
2. on_request_done(): a request is done for the frontier when the engine
   has downloaded it AND the scraper has finished with its output (links
   enqueued, items through the pipelines): that is when the engine removes
   it from its slot. A URL's lease ends only then, so a worker that dies
   mid-page has its URL crawled again, never its links lost.
3. raise_download_limit(): the engine stops pulling while the downloader
   holds CONCURRENT_REQUESTS requests, counting a request until its response
   has come back up through the downloader middlewares, three or four
   reactor turns after its transfer ended. The frontier caps transfers
   itself (FRONTIER_REFILL_AT_TRANSFER_END) and lifts the engine's count
   above its cap so that the next transfer can start when one ends.
4. on_close_started(): the engine's close first waits until every request
   in progress is done, and only then closes the scheduler and the item
   pipelines. A page whose store write waits for an unreachable Redis would
   hold that wait forever; the callback lets the writers know the close has
   begun.
5. bound_response_heads(): Scrapy's HTTP/1.1 download handler parses
   responses with its _LenientHTTPClientParser (a Twisted HTTPClientParser
   whose class it sets on each request's parser), which bounds each header
   line (16 KiB) but not their number: a server that sends header lines
   without end fills the worker's memory until DOWNLOAD_TIMEOUT
   (DOWNLOAD_MAXSIZE counts body bytes only). That class is replaced by one
   that gives up once the status line and headers pass a limit.
6. record_response_heads(): the same parser class also keeps each response's
   status line and header lines as they came (reason phrase, order, case,
   Transfer-Encoding and Connection, which Scrapy's Response drops or
   rebuilds), and Scrapy's HTTP/1.1 agent (_ScrapyAgent._cb_bodyready, where
   Twisted's response and Scrapy's request meet) hands them to the request
   as request.meta[RESPONSE_HEAD], for the content store's WARC records
   (checked on a real crawl's records by tests/test_archives_e2e.py).
7. Stats: Scrapy's StatsCollector looks up each of its attributes through a
   __getattribute__ that first tries a cached wrapper (raising and catching
   an AttributeError for every attribute without one, its own _stats dict
   included), and calls each method through that wrapper, which warns of a
   spider argument: for a worker that counts dozens of stats a page, the
   wrapper costs many times the increments it wraps (docs/benchmarks.md,
   "What each setting is measured to give"). Stats (STATS_CLASS,
   settings/base.py) is Scrapy's MemoryStatsCollector with Python's plain
   lookup, the methods unwrapped.
8. quick_sender(): Scrapy's send_catch_log calls each receiver through
   PyDispatcher's robustApply, which reads the receiver's code object anew
   on every call to pass it only the arguments it takes, most of the cost
   of a signal sent for every response (docs/benchmarks.md). The content
   store, page metadata, the crawl log and the figures all receive
   exchange_recorded, once per response; quick_sender sends it to the same
   receivers, each given what it takes, its errors logged as Scrapy logs
   them, with what robustApply reads kept per function.
9. downloads_in_flight(): the engine's downloader holds each request from
   its fetch until the response has come back through the downloader
   middlewares (Downloader.active). When it holds none, no response is on
   its way: the WARC writer's gathering window (WARC_GATHER) closes then
   rather than wait for records that cannot come.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydispatch.dispatcher import getAllReceivers, liveReceivers
from pydispatch.robustapply import function
from scrapy.statscollectors import MemoryStatsCollector

logger = logging.getLogger(__name__)


def _slot(crawler):
    try:
        engine = crawler.engine
    except (AttributeError, RuntimeError):  # Scrapy 2.19 raises until the crawl starts
        return None
    return getattr(engine, "_slot", None) if engine is not None else None


def wake(crawler) -> None:
    """Have the engine pull from its scheduler in the next reactor turn."""
    slot = _slot(crawler)
    if slot is not None and slot.closing is None:
        slot.nextcall.schedule()


def on_request_done(crawler, callback: Callable) -> None:
    """Call callback(request) whenever the engine is done with a request.
    Call it from the scheduler's open(): the engine's slot exists by then."""
    slot = _slot(crawler)
    if slot is None:
        raise RuntimeError("the engine has no slot yet: call on_request_done from open()")
    remove = slot.remove_request

    def remove_request(request):
        try:
            callback(request)
        finally:
            remove(request)

    slot.remove_request = remove_request


class ResponseHeadTooLarge(Exception):
    """A response's status line and headers passed the limit of bound_response_heads()."""


# What the response parser does beyond Scrapy's (set by the two functions below).
_HEADS: dict = {"limit": None, "record": False}
# Request meta key of the response head as received (a '_' key: never queued).
RESPONSE_HEAD = "_crawlproj_response_head"


def _install_head_parser() -> None:
    """Replace Scrapy's response parser class by one doing what _HEADS says
    (once per process)."""
    from scrapy.core.downloader.handlers import http11

    base = http11._LenientHTTPClientParser
    if getattr(base, "crawlproj_base", None) is not None:
        return

    class HeadParser(base):
        # no state of its own but a count and the lines: Scrapy assigns the
        # class to a parser object Twisted made
        crawlproj_base = base
        head_bytes = 0
        head_lines = None

        def lineReceived(self, line):  # status and header lines; the body is raw
            limit = _HEADS["limit"]
            if limit is not None:
                self.head_bytes += len(line) + 1
                if self.head_bytes > limit:
                    raise ResponseHeadTooLarge(f"response head longer than {limit} bytes")
            if _HEADS["record"]:
                if self.head_lines is None:
                    self.head_lines = []
                self.head_lines.append(line[:-1] if line.endswith(b"\r") else line)
            super().lineReceived(line)

        def allHeadersReceived(self):
            # before Twisted's: it may hand the response on at once
            lines, self.head_lines = self.head_lines, None
            response = getattr(self, "response", None)
            if lines and response is not None:
                # the last line is the empty one that ended the head
                response.crawlproj_head = b"\r\n".join(lines[:-1]) + b"\r\n\r\n"
            super().allHeadersReceived()

    http11._LenientHTTPClientParser = HeadParser


def bound_response_heads(limit: int) -> None:
    """Fail any response of this process whose status line and headers pass
    limit bytes, as they arrive (the connection is dropped; Scrapy sees a
    ResponseFailed). Idempotent: the last limit set holds."""
    _HEADS["limit"] = limit
    _install_head_parser()


def record_response_heads() -> None:
    """Keep every response head of this process as it was received, in
    request.meta[RESPONSE_HEAD] of its request (bytes, ending in CRLF CRLF)."""
    from scrapy.core.downloader.handlers.http11 import _ScrapyAgent as ScrapyAgent

    _HEADS["record"] = True
    _install_head_parser()
    bodyready = ScrapyAgent._cb_bodyready
    if getattr(bodyready, "crawlproj", False):
        return

    def _cb_bodyready(self, txresponse, request):
        head = getattr(txresponse, "crawlproj_head", None)
        if head is not None:
            request.meta[RESPONSE_HEAD] = head
        return bodyready(self, txresponse, request)

    _cb_bodyready.crawlproj = True
    ScrapyAgent._cb_bodyready = _cb_bodyready


def raise_download_limit(crawler, limit: int) -> None:
    """Let the engine pull while its downloader holds fewer than limit requests."""
    downloader = crawler.engine.downloader
    downloader.total_concurrency = max(downloader.total_concurrency, limit)


def downloads_in_flight(crawler, besides=None) -> int:
    """The requests the engine's downloader holds (9), but besides; 0
    without an engine."""
    try:
        engine = crawler.engine
    except (AttributeError, RuntimeError):
        return 0
    downloader = getattr(engine, "downloader", None)
    if downloader is None:
        return 0
    return len(downloader.active) - (besides is not None and besides in downloader.active)


def on_close_started(crawler, callback: Callable[[], None]) -> bool:
    """Call callback() when the engine starts closing the spider, before it
    waits for the requests in progress. False, and nothing hooked, where no
    engine runs a spider (a component built outside a crawl, as tools do)."""
    slot = _slot(crawler)
    if slot is None:
        return False
    close = slot.close

    async def closing():
        callback()
        await close()

    slot.close = closing
    return True


class Stats(MemoryStatsCollector):
    """Scrapy's MemoryStatsCollector without its per-attribute wrapper (7):
    the same methods and values, a spider argument taken without a warning."""

    __getattribute__ = object.__getattribute__


def quick_sender(crawler, signal) -> Callable[..., None]:
    """send(**named): signal sent to its receivers as
    crawler.signals.send_catch_log(signal, **named) sends it (8), for a signal
    sent for every page; receivers connected later are sent it too."""
    sender = crawler.signals.sender
    takes: dict = {}   # function -> the names it takes (None: any, it has **kwargs)

    def send(**named) -> None:
        named["signal"], named["sender"] = signal, sender
        for receiver in liveReceivers(getAllReceivers(sender, signal)):
            key = getattr(receiver, "__func__", receiver)
            try:
                names = takes[key]
            except KeyError:
                _, code, bound = function(receiver)
                names = takes[key] = (None if code.co_flags & 8  # CO_VARKEYWORDS
                                      else frozenset(code.co_varnames[bound:code.co_argcount]))
            try:
                receiver(**(named if names is None
                            else {k: v for k, v in named.items() if k in names}))
            except Exception:
                logger.error("Error caught on signal handler: %(receiver)s",
                             {"receiver": receiver}, exc_info=True)

    return send
