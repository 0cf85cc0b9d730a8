"""The stores' writes of each page, which its URL's lease waits for.

A URL leaves the frontier only once its page is stored [Mercator §3: a URL is
removed from the frontier when its processing is done; here a worker that
dies before that leaves it leased, and it goes back to its queue]. The
stores do not hold the page for that: the WARC writer, the link store and
page metadata each hold their write here, by the URL of the response it
records, and go on; the frontier's scheduler ends the lease of a URL whose
page the engine is done with once the writes held for that URL are done
(crawlproj/frontier/scheduler.py). The response goes up to the spider, and
the item through the pipelines, without waiting for a disk or a round trip,
which a store awaiting its own write on the page's path would make it do.

A write's Deferred fires when it is done, or given up (a store that cannot
write puts the page back in the frontier first, crawlproj/pipelines/guard.py).
A slow disk or Redis slows the crawl rather than filling memory: a page whose
writes are under way keeps its lease, and the lease book counts it against
the worker's prefetch (crawlproj/frontier/sync.py), so no new URL is leased
in its place.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from crawlproj.components import component


class _Page:
    """The writes under way for one URL's page, and who waits for them all."""

    __slots__ = ("writes", "waiting")

    def __init__(self):
        self.writes = 0
        self.waiting: list[Deferred] = []


class PendingWrites:
    """A count of writes per URL: cheaper on the reactor than a DeferredList
    per page, for work done on every page."""

    def __init__(self):
        self._pending: dict[str, _Page] = {}

    @classmethod
    def of(cls, crawler) -> PendingWrites:
        """The crawler's one book of pending writes."""
        return component(crawler, cls, lambda _: cls())

    def hold(self, url: str, write: Deferred) -> None:
        """The page of url is not stored until write fires."""
        if write.called:
            return
        page = self._pending.get(url)
        if page is None:
            page = self._pending[url] = _Page()
        page.writes += 1
        write.addBoth(self._settled, url, page)

    def _settled(self, result, url: str, page: _Page):
        page.writes -= 1
        if not page.writes:
            if self._pending.get(url) is page:
                del self._pending[url]
            waiting, page.waiting = page.waiting, []
            for d in waiting:
                d.callback(None)
        return result

    def __len__(self) -> int:
        """URLs with writes under way."""
        return len(self._pending)

    def stored(self, url: str) -> Deferred | None:
        """A Deferred that fires once no write is under way for url (each
        caller its own); None when none is under way now."""
        page = self._pending.get(url)
        if page is None:
            return None
        d = Deferred()
        page.waiting.append(d)
        return d
