"""FrontierScheduler: Scrapy's SCHEDULER on the shared Mercator frontier.

A thin adapter between Scrapy's engine and three parts that know nothing of
Scrapy: the frontier's admission (admission.py: which URLs may enter, their
scores and payloads), the lease book (leases.py: where each lease is, what
its end sends) and the sync (sync.py: one round trip to Redis at a time,
carrying everything). Scrapy's scheduler interface is synchronous
(../shared/scrapy-notes.md §1), so nothing here waits on Redis.

The life of a URL in one worker:
    enqueue_request -> admitted -> sync: DUE test-and-set + host back queue
    sync leases host -> book: queued -> next_request hands it to the engine
    download ends (request_left_downloader) -> book: the host goes back with
      its politeness wait (sync), the URL stays leased, pending
    engine done with the page's output (internals.on_request_done), and the
      stores' writes of the page done (stores/pending.py) -> book: the URL's
      lease ends (sync), after the page's links
A lease whose host has no robots rules yet carries its host's robots.txt
download instead (middlewares/robots.py, meta ROBOTS_FOR names the page):
its times and status count as the lease's download, and the page goes back
to its queue unfetched (robots_fetched), the host waiting from that download.
"""

from __future__ import annotations

import logging
import os
import time
import uuid

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import task, threads

from crawlproj import internals
from crawlproj.frontier import codec
from crawlproj.frontier.admission import Filtered, RecentURLs, Refused, Trap, admit
from crawlproj.frontier.frontier import Frontier, Host
from crawlproj.frontier.leases import FETCHING, LeaseBook
from crawlproj.frontier.politeness import Politeness, retry_after
from crawlproj.frontier.recrawl import Recrawl
from crawlproj.frontier.sync import FrontierSync
from crawlproj.frontier.urlfilter import URLFilter
from crawlproj.prioritizers import load_prioritizer
from crawlproj.prioritizers.basic import Prioritizer
from crawlproj.recrawl.record import HELD, STORED
from crawlproj.redis.client import embedded_restarter, get_redis
from crawlproj.redis.guard import RedisGuard
from crawlproj.robots import ROBOTS_FOR
from crawlproj.stores.pending import PendingWrites
from crawlproj.traps import TrapGuard
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)

# FRONTIER_PREFETCH unset: a lease for each download slot and this many more,
# so that a slot freed finds its next URL here, not a round trip away.
PREFETCH_SPARE = 8
# A lease is not downloaded this close to its deadline (seconds, at most a
# tenth of the TTL): the request must reach the host before the frontier may
# give the host to another worker.
LEASE_MARGIN = 1.0


class FrontierScheduler:
    def __init__(self, crawler, frontier: Frontier, prioritizer):
        self.crawler = crawler
        self.stats = crawler.stats
        self.frontier = frontier
        self.prioritizer = prioritizer
        s = crawler.settings
        self.politeness = Politeness.from_settings(s)
        self.max_url_length = s.getint("FRONTIER_MAX_URL_LENGTH")
        self.trap_guard = TrapGuard.from_settings(s)
        self.url_filter = URLFilter.from_settings(s)  # None: no filter set
        self.book = LeaseBook()
        # the stores' writes of each page, which its lease waits for
        self.writes = PendingWrites.of(crawler)
        prefetch = s.get("FRONTIER_PREFETCH")
        target = int(prefetch) if prefetch else s.getint("CONCURRENT_REQUESTS") + PREFETCH_SPARE
        self.sync = FrontierSync(frontier, self.book, self.stats, target,
                                 s.getbool("FRONTIER_IDLE_CLOSE"), s.getfloat("FRONTIER_IDLE_WAIT"),
                                 self._wake, on_unreachable=embedded_restarter(s),
                                 on_pause=self._paused, on_stop=self._stop)
        self.lease_margin = min(LEASE_MARGIN, frontier.lease_ttl_ms / 10000.0)
        # The URLs this worker sent lately, for middlewares/recentlinks.py;
        # none when duplicates must arrive (a prioritizer that bumps).
        size = s.getint("DUE_CACHE_SIZE")
        bumps = getattr(type(prioritizer), "bump", Prioritizer.bump) is not Prioritizer.bump \
            or getattr(prioritizer, "BEST_LINK", False)
        self.sent = RecentURLs(size) if size > 0 and not bumps else None
        self.worker_id = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.spider = None
        self._inflight: dict = {}  # request -> its lease, from next_request to done
        # page request -> the host's extra wait (None: its politeness delay
        # alone), for pages whose lease carried their host's robots.txt
        self._returning: dict = {}
        self._said_expired = False
        # continuous crawling (RECRAWL_ENABLED): pages go back with a due time
        self.recrawl = Recrawl.from_settings(s, frontier)
        self.plan_interval = s.getfloat("RECRAWL_PLAN_INTERVAL")
        self._replanning = None

    @classmethod
    def from_crawler(cls, crawler):
        frontier = Frontier.from_settings(crawler.settings, get_redis(crawler.settings))
        prioritizer = load_prioritizer(crawler.settings.get("FRONTIER_PRIORITIZER"), crawler)
        return cls(crawler, frontier, prioritizer)

    # -- Scrapy's scheduler interface ----------------------------------------

    def open(self, spider):
        self.spider = spider
        sig = self.crawler.signals
        sig.connect(self._reached, signals.request_reached_downloader)
        sig.connect(self._left, signals.request_left_downloader)
        sig.connect(self._downloaded, signals.response_downloaded)
        internals.on_request_done(self.crawler, self._done)
        RedisGuard.of(self.crawler).watch(self.sync.commit)
        if self.recrawl is not None:
            self._replanning = task.LoopingCall(self._replan)
            self._replanning.start(self.plan_interval, now=True)
            logger.info("Continuous crawl: policy %s, budget %g fetches/s", self.recrawl.policy,
                        self.recrawl.budget * self.recrawl.scale)
        logger.info("Frontier opened: crawl %r, %d partition(s), worker %s, prioritizer %s",
                    self.frontier.crawl_id, self.frontier.partitions, self.worker_id,
                    type(self.prioritizer).__name__)
        self.sync.open()

    def close(self, reason):
        """Give back what this worker holds but has not finished, then flush."""
        if self._replanning is not None and self._replanning.running:
            self._replanning.stop()
        releases = self.book.give_back()
        self.stats.inc_value("frontier/returned", sum(1 for r in releases if r.url_fate))
        self._inflight.clear()
        self._returning.clear()
        d = self.sync.close(releases)
        d.addCallback(lambda _: logger.info("Frontier closed (%s): %s", reason, self._summary()))
        return d

    def has_pending_requests(self) -> bool:
        if self.sync.paused:
            return True  # a paused crawl waits for its resume, not for work
        if self.recrawl is not None:
            return True  # a continuous crawl does not finish on its own
        if len(self.book) or not self.sync.idle_close or not self.sync.known():
            return True
        # other workers' leases may bring new URLs; a crawl not started yet, its seeds
        return not self.sync.is_empty() or self.sync.waiting()

    def enqueue_request(self, request) -> bool:
        try:
            p, entry = admit(self.frontier, self.prioritizer, request, self.spider,
                             self.max_url_length, self.trap_guard, self.url_filter)
        except Filtered as exc:
            self.url_filter.log(exc.reason, request.url, exc.message)
            self.stats.inc_value(f"{exc.stat}/{exc.reason}")
            return False
        except Trap as exc:
            self.trap_guard.log(host_of(request.url), exc.reason, request.url, exc.message)
            self.stats.inc_value(f"{exc.stat}/{exc.reason}")
            return False
        except Refused as exc:
            logger.warning("Frontier refused %s: %s", request.url[:200], exc.message)
            self.stats.inc_value(f"{exc.stat}/{exc.reason}")
            return False
        if self.sent is not None and not request.dont_filter:
            self.sent.seen(request.url)
        self.sync.enqueue(p, entry)
        self.stats.inc_value("frontier/enqueue_requests")
        return True

    def next_request(self):
        if self.sync.paused:
            return None  # woken at the resume
        if self.sync.low():
            self.sync.ask()
        if self.sync.holding():
            return None  # woken when Redis answers again
        while (lease := self.book.next()) is not None:
            if self.book.expired(lease, time.monotonic(), self.lease_margin):
                self._lost(lease)
                continue
            try:
                request = codec.decode(lease.payload, self.spider, lease.host,
                                       self.max_url_length)
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
        (middlewares/lease.py) right before each download starts: a worker
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
        if not self.book.expired(lease, time.monotonic(), self.lease_margin):
            return True
        del self._inflight[page]
        self._lost(lease)
        return False

    def _lost(self, lease) -> None:
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

    def sent_lately(self, url: str) -> bool:
        """Did this worker send this exact URL to the frontier lately? Then
        another link to it changes nothing (middlewares/recentlinks.py)."""
        return self.sent is not None and url in self.sent

    # -- download bookkeeping (signals) -------------------------------------

    def _lease_of(self, request):
        """The lease a download is made under: its own, or, for a robots.txt
        request, the page's on whose behalf it is made."""
        return self._inflight.get(request.meta.get(ROBOTS_FOR, request))

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

    def _end(self, request, lease) -> None:
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

    def _wake(self):
        internals.wake(self.crawler)

    # -- crawl control (crawlproj/monitor/control.py) -------------------------

    def _paused(self, paused: bool) -> None:
        """Paused: the leases not started go back at once, so that no other
        worker waits for them; the downloads under way finish. Resumed: pull."""
        if paused:
            releases = self.book.give_back_queued()
            if releases:
                self.stats.inc_value("frontier/returned", len(releases))
                for release in releases:
                    self.sync.release([release], self.frontier.partition_of(release.host))
                self.sync.ask()
        else:
            self._wake()

    def _stop(self) -> None:
        """The crawl was stopped: close as on Ctrl-C; close() gives back every lease."""
        if self.spider is not None:
            deferred_from_coro(self.crawler.engine.close_spider_async(reason="stopped"))
    def _replan(self):
        """The recrawl plan again, from the schedule's population (a read of
        Redis, in a thread)."""
        d = threads.deferToThread(self.recrawl.replan)
        d.addErrback(lambda f: logger.warning("recrawl plan not renewed: %s", f.getErrorMessage()))
        return d

    def _summary(self) -> str:
        keys = ("enqueue_requests", "added", "duplicates", "leased", "released",
                "returned", "expired_leases", "redis_writes", "redis_commands")
        return ", ".join(f"{k}={self.stats.get_value('frontier/' + k, 0)}" for k in keys)


def _is_record(record) -> bool:
    """A recrawl record as Recrawl writes it: [state, ETag, Last-Modified, digest]."""
    from crawlproj.recrawl.state import SIZE
    return (isinstance(record, list) and len(record) == 4 and isinstance(record[0], bytes)
            and len(record[0]) == SIZE and isinstance(record[1], str)
            and isinstance(record[2], int) and isinstance(record[3], bytes))
