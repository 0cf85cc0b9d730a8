"""The Scrapy internals crawlproj patches, each for a crawl's correctness
where Scrapy has no public way, and only here.

Each hook's docstring says why it is needed and the Scrapy releases it was
checked on (CHECKED); tests/test_internals.py checks each one's behaviour on
the installed Scrapy's real engine. Before a crawl starts, check() looks for
every name the hooks patch (NEEDS): on a Scrapy without one, ``scrapy crawl``
refuses in one line with exit status 2, rather than crawl without the hook.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

import scrapy

from crawlproj.errors import CrawlprojError

# The Scrapy releases every hook below was checked on (tests/test_internals.py
# and the crawl tests, on each); pyproject.toml allows these alone.
CHECKED = ("2.18.0", "2.19.0")

# Scrapy's settings that settings/base.py sets and an older supported release
# lacks (it ignores them): they are Scrapy's, never crawlproj's own, whatever
# the release (crawlproj/addon.py, table()).
NEWER_SCRAPY_SETTINGS = frozenset({"REMOTE_CONTROL_ENABLED"})  # Scrapy 2.19

# How a name is present on its owner: an attribute of the class or module,
# an attribute the class's constructor sets, or a global the function reads.
ATTRIBUTE, SET_BY_INIT, READ_BY = "attribute", "set by __init__", "read by"

_ENGINE = "scrapy.core.engine"
_HTTP11 = "scrapy.core.downloader.handlers.http11"
# (owner, name, how): every name the hooks patch or call, by the hook
NEEDS = (
    (f"{_ENGINE}.ExecutionEngine", "_slot", SET_BY_INIT),          # all engine hooks
    (f"{_ENGINE}._Slot", "nextcall", SET_BY_INIT),                 # wake
    (f"{_ENGINE}._Slot", "closing", SET_BY_INIT),                  # wake
    ("scrapy.utils.reactor.CallLaterOnce", "schedule", ATTRIBUTE),  # wake
    (f"{_ENGINE}._Slot", "remove_request", ATTRIBUTE),             # on_request_done
    (f"{_ENGINE}._Slot", "close", ATTRIBUTE),                      # on_close_started
    (f"{_HTTP11}._LenientHTTPClientParser", "lineReceived", ATTRIBUTE),        # heads
    (f"{_HTTP11}._LenientHTTPClientParser", "allHeadersReceived", ATTRIBUTE),  # heads
    (f"{_HTTP11}._LenientHTTP11ClientProtocol.request", "_LenientHTTPClientParser",
     READ_BY),                                                     # heads
    (f"{_HTTP11}._ScrapyAgent", "_cb_bodyready", ATTRIBUTE),       # record_response_heads
)


class UnsupportedScrapy(CrawlprojError):
    """The installed Scrapy lacks an internal a hook patches; the message is one line."""


def _load(path: str):
    """The object at a dotted path: a module, then attributes (a class, its function)."""
    parts = path.split(".")
    obj, i = import_module(parts[0]), 1
    while i < len(parts):
        try:
            obj = import_module(".".join(parts[:i + 1]))
        except ModuleNotFoundError:
            break
        i += 1
    for part in parts[i:]:
        obj = getattr(obj, part)
    return obj


def _present(owner: str, name: str, how: str) -> bool:
    try:
        obj = _load(owner)
    except (AttributeError, ImportError):
        return False
    if how == ATTRIBUTE:
        return hasattr(obj, name)
    code = getattr(obj.__init__ if how == SET_BY_INIT else obj, "__code__", None)
    return code is not None and name in code.co_names


def missing(needs=NEEDS) -> list[str]:
    """The names of needs absent from the installed Scrapy, as owner.name."""
    return [f"{owner}.{name}" if how != READ_BY else f"{name} ({how} {owner})"
            for owner, name, how in needs if not _present(owner, name, how)]


def check(needs=NEEDS) -> None:
    """Raise UnsupportedScrapy when the installed Scrapy lacks a name a hook needs."""
    absent = missing(needs)
    if absent:
        raise UnsupportedScrapy(
            f"Scrapy {scrapy.__version__} lacks {', '.join(absent)}, which crawlproj "
            f"patches to crawl correctly; it runs on Scrapy {' and '.join(CHECKED)}")


def _engine(crawler):
    try:
        return crawler.engine
    except (AttributeError, RuntimeError):  # Scrapy 2.19 raises until the crawl starts
        return None


def _slot(crawler):
    return getattr(_engine(crawler), "_slot", None)


def wake(crawler) -> None:
    """Have the engine pull from its scheduler in the next reactor turn.

    Why: the engine stops pulling at the scheduler's first None and looks
    again only on its 5 s heartbeat, so leases that arrive, or a host whose
    politeness wait ends, would otherwise wait up to 5 s (Mercator §3.1: a
    back-end queue is served as soon as its host may be contacted).
    Checked on Scrapy 2.18.0 and 2.19.0."""
    slot = _slot(crawler)
    if slot is not None and slot.closing is None:
        slot.nextcall.schedule()


def on_request_done(crawler, callback: Callable) -> None:
    """Call callback(request) whenever the engine is done with a request:
    downloaded, and its output through the scraper (links enqueued, items
    through the pipelines). Call it from the scheduler's open(): the engine's
    slot exists by then.

    Why: a URL's lease may end only once its page's links and items are safe,
    so that a worker dying mid-page has its URL crawled again, and Scrapy
    signals no such moment (request_left_downloader and response_received
    come before the scraper). Checked on Scrapy 2.18.0 and 2.19.0."""
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
    ResponseFailed). Idempotent: the last limit set holds.

    Why: Scrapy's HTTP/1.1 parser (_LenientHTTPClientParser, which it sets as
    the class of each request's Twisted parser) bounds each header line but
    not their number, and DOWNLOAD_MAXSIZE counts body bytes only, so a
    server sending header lines without end fills the worker's memory.
    Checked on Scrapy 2.18.0 and 2.19.0."""
    _HEADS["limit"] = limit
    _install_head_parser()


def record_response_heads() -> None:
    """Keep every response head of this process as it was received, in
    request.meta[RESPONSE_HEAD] of its request (bytes, ending in CRLF CRLF).

    Why: a WARC response record holds the head as the server sent it (reason
    phrase, order, case, Transfer-Encoding), which Scrapy's Response drops or
    rebuilds; only its parser sees it, and its agent's _cb_bodyready is where
    Twisted's response meets Scrapy's request (tests/test_archives_e2e.py
    checks a real crawl's records). Checked on Scrapy 2.18.0 and 2.19.0."""
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
    engine runs a spider (a component built outside a crawl, as tools do).

    Why: the engine's close waits for every request in progress before
    spider_closed is sent, so a page whose store write waits for an
    unreachable Redis would hold the close forever unless its writer learns
    that the close has begun. Checked on Scrapy 2.18.0 and 2.19.0."""
    slot = _slot(crawler)
    if slot is None:
        return False
    close = slot.close

    async def closing():
        callback()
        await close()

    slot.close = closing
    return True
