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
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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
