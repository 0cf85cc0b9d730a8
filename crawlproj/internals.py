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
"""

from __future__ import annotations

from collections.abc import Callable


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


def bound_response_heads(limit: int) -> None:
    """Fail any response of this process whose status line and headers pass
    limit bytes, as they arrive (the connection is dropped; Scrapy sees a
    ResponseFailed). Idempotent: the last limit set holds."""
    from scrapy.core.downloader.handlers import http11

    lenient = http11._LenientHTTPClientParser
    base = getattr(lenient, "crawlproj_base", lenient)

    class BoundedHeadParser(base):
        # no state of its own but a count: Scrapy assigns the class to a
        # parser object Twisted made
        crawlproj_base = base
        head_limit = limit
        head_bytes = 0

        def lineReceived(self, line):  # status and header lines; the body is raw
            self.head_bytes += len(line) + 1
            if self.head_bytes > self.head_limit:
                raise ResponseHeadTooLarge(f"response head longer than {self.head_limit} bytes")
            super().lineReceived(line)

    http11._LenientHTTPClientParser = BoundedHeadParser


def raise_download_limit(crawler, limit: int) -> None:
    """Let the engine pull while its downloader holds fewer than limit requests."""
    downloader = crawler.engine.downloader
    downloader.total_concurrency = max(downloader.total_concurrency, limit)


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
