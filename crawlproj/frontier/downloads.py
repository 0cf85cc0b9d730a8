"""Downloads: this worker's leases from the engine's pull to their end.

A lease the sync brought (leases.py's book) is handed to the engine as a
request (hand_out), checked right before its download starts (may_download,
asked by crawlproj/frontier/lease.py), and followed through Scrapy's signals: its
download's start and end, its status, and the engine's end of its page
(internals.on_request_done). Each end is told to the frontier as the book
words it (a Release, sent by the sync):

    download ends (request_left_downloader): the host goes back with its
      politeness wait (Mercator §3.1), counted from now; the URL stays leased
    the engine is done with the page, and the stores' writes of it are done
      (stores/pending.py): the URL's lease ends, or the page is scheduled
      again (recrawl.py)

A lease whose host has no robots rules yet carries its host's robots.txt
download instead (middlewares/robots.py, meta ROBOTS_FOR names the page): its
times and status count as the lease's download, and the page goes back to
its queue unfetched (robots_fetched), the host waiting from that download.

Middlewares find the crawler's Downloads in crawlproj.components.
"""

from __future__ import annotations

import logging
import time

from scrapy import signals

from crawlproj.frontier import codec
from crawlproj.frontier.frontier import Host
from crawlproj.frontier.leases import FETCHING, Lease, LeaseBook
from crawlproj.frontier.politeness import Politeness, retry_after
from crawlproj.recrawl.record import HELD, STORED
from crawlproj.robots import ROBOTS_FOR

logger = logging.getLogger(__name__)

# A lease is not downloaded this close to its deadline (seconds, at most a
# tenth of the TTL): the request must reach the host before the frontier may
# give the host to another worker.
LEASE_MARGIN = 1.0


class Downloads:
    def __init__(self, book: LeaseBook, sync, stats, politeness: Politeness, writes,
                 max_url_length: int, recrawl=None):
        self.book = book
        self.sync = sync              # FrontierSync: where the releases go
        self.stats = stats
        self.politeness = politeness
        self.writes = writes          # PendingWrites: the stores' writes of each page
        self.recrawl = recrawl        # Recrawl in a continuous crawl, else None
        self.max_url_length = max_url_length
        self.margin = min(LEASE_MARGIN, sync.frontier.lease_ttl_ms / 10000.0)
        self._inflight: dict = {}  # request -> its lease, from hand_out to done
        # page request -> the host's extra wait (None: its politeness delay
        # alone), for pages whose lease carried their host's robots.txt
        self._returning: dict = {}
        self._said_expired = False

    def watch(self, crawler, on_request_done) -> None:
        """Follow the crawler's downloads (on_request_done: how to hear of a
        request's end, crawlproj.internals.on_request_done)."""
        sig = crawler.signals
        sig.connect(self._reached, signals.request_reached_downloader)
        sig.connect(self._left, signals.request_left_downloader)
        sig.connect(self._downloaded, signals.response_downloaded)
        on_request_done(crawler, self._done)

    # -- the engine's pull ---------------------------------------------------

    def hand_out(self, spider):
        """The next lease's request for the engine, or None."""
        while (lease := self.book.next()) is not None:
            if self.book.expired(lease, time.monotonic(), self.margin):
                self._lost(lease)
                continue
            try:
                request = codec.decode(lease.payload, spider, lease.host, self.max_url_length)
            except Exception as exc:  # a payload no worker can or may act on: drop it, say so
                logger.error("Frontier: unreadable queued request on %s dropped: %s",
                             lease.host, exc)
                self.stats.inc_value("frontier/undecodable")
                self.stats.inc_value(f"frontier/undecodable/{getattr(exc, 'reason', 'format')}")
                self.sync.release(self.book.done(lease), lease.partition)
                continue
            record = request.meta.pop(STORED, None)  # trusted only from a recrawl queue
            if self.recrawl is not None:
                request.meta[HELD] = record if lease.recrawl and _is_record(record) else None
            if not lease.recrawl:
                # the page's importance as the frontier saw it, for its links'
                # scores (middlewares/linkcontext.py) and for retries/redirects
                # (a recrawl's score is its due time)
                request.meta["frontier_score"] = lease.score
            self._inflight[request] = lease
            return request
        return None

    def may_download(self, request) -> bool:
        """Is request's lease still this worker's? Asked by the lease check
        (crawlproj/frontier/lease.py) right before each download starts: a worker
        stopped or cut off from Redis longer than FRONTIER_LEASE_TTL must not
        fetch a URL, nor contact a host, that the frontier has given to
        another worker meanwhile. A host's robots.txt is fetched under the
        lease of the page that needs it, and is asked about as that page. A
        request the frontier did not lease may."""
        page = request.meta.get(ROBOTS_FOR, request)
        lease = self._inflight.get(page)
        if lease is None:
            return True
        if self.sync.commit.failing:
            # Redis does not take our writes: a request that waited in the
            # middlewares (for its host's robots.txt) would be fetched with no
            # way to record it; its lease goes back when it expires
            del self._inflight[page]
            self.book.forget(lease)
            self.stats.inc_value("frontier/held_dropped")
            return False
        if not self.book.expired(lease, time.monotonic(), self.margin):
            return True
        del self._inflight[page]
        self._lost(lease)
        return False

    def _lost(self, lease: Lease) -> None:
        """Forget a lease past its deadline: nothing is sent (the frontier gives
        its URL and host to another worker, or to us again)."""
        self.book.forget(lease)
        self.stats.inc_value("frontier/expired_dropped")
        if not self._said_expired:
            self._said_expired = True
            logger.warning("Frontier: leases expired before their download started (this "
                           "worker was stopped or cut off from Redis longer than "
                           "FRONTIER_LEASE_TTL): their URLs are left to other workers "
                           "(counted in frontier/expired_dropped)")
        self.sync.ask()

    def robots_fetched(self, request, crawl_delay: float | None = None,
                       retry_wait: float | None = None) -> bool:
        """request's lease carried its host's robots.txt download: when the
        engine drops request, its URL goes back to its queue and the host waits
        from that download (its politeness delay, crawl_delay, and retry_wait
        when robots.txt could not be had). False if request holds no lease."""
        lease = self._inflight.get(request)
        if lease is None:
            return False
        lease.download.crawl_delay = crawl_delay
        self._returning[request] = retry_wait
        return True

    # -- the download's signals ----------------------------------------------

    def _lease_of(self, request) -> Lease | None:
        """The lease a download is made under: its own, or, for a robots.txt
        request, the page's on whose behalf it is made."""
        return self._inflight.get(request.meta.get(ROBOTS_FOR, request))

    def _reached(self, request, spider=None):
        if ROBOTS_FOR in request.meta:
            lease = self._lease_of(request)
            if lease is not None and lease.download.reached is None:
                lease.download.reached = time.monotonic()
            if lease is not None:
                return
        lease = self._inflight.get(request)
        if lease is not None and lease.download.reached is None:
            lease.download.reached = time.monotonic()

    def _downloaded(self, response, request, spider=None):
        lease = self._lease_of(request)
        if lease is not None:
            lease.download.status = response.status
            if response.status in (429, 503):
                lease.download.retry_after = retry_after(response.headers.get(b"Retry-After"))

    def _left(self, request, spider=None):
        """The download ended: the host may be contacted again after its
        politeness wait, counted from now (Mercator §3.1), not from when the
        page's links are in. The URL itself stays leased until then."""
        if ROBOTS_FOR in request.meta:
            lease = self._lease_of(request)
            if lease is not None:  # the page's lease ends when the engine drops the page
                lease.download.left = time.monotonic()
                return
        lease = self._inflight.get(request)
        if lease is None or lease.state != FETCHING:
            return
        download = lease.download
        download.left = time.monotonic()
        download.crawl_delay = request.meta.get("crawl_delay")
        request.meta["crawlproj_download_time"] = download.took
        delay = self.politeness.delay(download)
        fate, wait_ms = self.politeness.host_fate(download)
        self.sync.release(self.book.ended(lease, fate, delay, wait_ms), lease.partition)

    def _done(self, request):
        """The engine is done with request (its links are enqueued); its URL's
        lease ends once the stores' writes of its page are done too."""
        lease = self._inflight.pop(request, None)
        if lease is None:
            return  # not the frontier's (robots.txt, a request from another path)
        download = lease.download
        if request in self._returning:
            retry_wait = self._returning.pop(request)
            if retry_wait is None:
                fate, wait_ms = self.politeness.host_fate(download)
            else:
                fate, wait_ms = Host.BUSY, int(retry_wait * 1000)
            self.sync.release(self.book.returned(lease, fate, self.politeness.delay(download),
                                                 wait_ms), lease.partition)
            self.stats.inc_value("frontier/robots_returned")
            self.sync.ask()
            return
        stored = self.writes.stored(request.url)
        if stored is None:
            self._end(request, lease)
        else:
            stored.addCallback(lambda _: self._end(request, lease))

    def _end(self, request, lease: Lease) -> None:
        """The page of request is done and stored: its URL's lease ends."""
        if not self.book.holds(lease):
            return  # given back meanwhile (the crawl closed), or forgotten
        download = lease.download
        fate, wait_ms = self.politeness.host_fate(download)
        schedule = None
        if self.recrawl is not None:
            schedule = self.recrawl.after(request, lease.recrawl and bool(request.meta.get(HELD)),
                                          self.stats)
        self.sync.release(self.book.done(lease, fate, self.politeness.delay(download), schedule),
                          lease.partition)
        self.stats.inc_value("frontier/released")
        self.sync.ask()

    # -- giving leases back ----------------------------------------------------

    def give_back_queued(self) -> None:
        """The crawl is paused: the leases not started go back at once, so
        that no other worker waits for them; the downloads under way finish."""
        releases = self.book.give_back_queued()
        if releases:
            self.stats.inc_value("frontier/returned", len(releases))
            for release in releases:
                self.sync.release([release], self.sync.frontier.partition_of(release.host))
            self.sync.ask()

    def give_back(self) -> list:
        """The worker closes: everything held goes back (the releases)."""
        releases = self.book.give_back()
        self.stats.inc_value("frontier/returned", sum(1 for r in releases if r.url_fate))
        self._inflight.clear()
        self._returning.clear()
        return releases


def _is_record(record) -> bool:
    """A recrawl record as Recrawl writes it: [state, ETag, Last-Modified, digest]."""
    from crawlproj.recrawl.state import SIZE
    return (isinstance(record, list) and len(record) == 4 and isinstance(record[0], bytes)
            and len(record[0]) == SIZE and isinstance(record[1], str)
            and isinstance(record[2], int) and isinstance(record[3], bytes))
