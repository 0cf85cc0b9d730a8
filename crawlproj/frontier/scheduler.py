"""FrontierScheduler: Scrapy's SCHEDULER on the shared Mercator frontier.

A thin adapter between Scrapy's engine and parts that know little or nothing
of Scrapy, each with one job:

    Admission (admission.py)   which URLs may enter, their scores and payloads
    LeaseBook (leases.py)      where each lease is, what its end sends
    Downloads (downloads.py)   a lease from the engine's pull to its end: the
                               download's signals, the page's end, robots.txt
    FrontierSync (sync.py)     one round trip to Redis at a time, carrying all
    Recrawl (recrawl.py)       a continuous crawl's plan, and its re-plan loop

Scrapy's scheduler interface is synchronous (../shared/scrapy-notes.md §1),
so nothing here waits on Redis. The scheduler registers its parts as the
crawler's components (crawlproj.components): the middlewares, the sitemap
worker and the heartbeat find them there, typed, and never reach into the
scheduler.

The life of a URL in one worker:
    enqueue_request -> admitted -> sync: DUE test-and-set + host back queue
    sync leases host -> book: queued -> next_request hands it to the engine
    download ends (request_left_downloader) -> book: the host goes back with
      its politeness wait (sync), the URL stays leased, pending
    engine done with the page's output (internals.on_request_done), and the
      stores' writes of the page done (stores/pending.py) -> book: the URL's
      lease ends (sync), after the page's links
"""

from __future__ import annotations

import logging

from scrapy.utils.defer import deferred_from_coro

from crawlproj import internals
from crawlproj.components import register
from crawlproj.frontier.admission import Admission
from crawlproj.frontier.downloads import Downloads
from crawlproj.frontier.frontier import Frontier
from crawlproj.frontier.leases import LeaseBook
from crawlproj.frontier.politeness import Politeness
from crawlproj.frontier.sync import FrontierSync
from crawlproj.prioritizers import load_prioritizer
from crawlproj.recrawl.schedule import Recrawl
from crawlproj.redis.client import embedded_restarter, get_redis
from crawlproj.redis.guard import RedisGuard
from crawlproj.stores.common import worker_id
from crawlproj.stores.pending import PendingWrites

logger = logging.getLogger(__name__)

# FRONTIER_PREFETCH unset: a lease for each download slot and this many more,
# so that a slot freed finds its next URL here, not a round trip away.
PREFETCH_SPARE = 8


class FrontierScheduler:
    def __init__(self, crawler, frontier: Frontier, prioritizer):
        self.crawler = crawler
        self.stats = crawler.stats
        self.frontier = frontier
        s = crawler.settings
        self.admission = Admission.from_settings(s, frontier, prioritizer, self.stats)
        self.book = LeaseBook()
        prefetch = s.get("FRONTIER_PREFETCH")
        target = int(prefetch) if prefetch else s.getint("CONCURRENT_REQUESTS") + PREFETCH_SPARE
        self.sync = FrontierSync(frontier, self.book, self.stats, target,
                                 s.getbool("FRONTIER_IDLE_CLOSE"), s.getfloat("FRONTIER_IDLE_WAIT"),
                                 self._wake, on_unreachable=embedded_restarter(s),
                                 on_pause=self._paused, on_stop=self._stop)
        # continuous crawling (RECRAWL_ENABLED): pages go back with a due time
        self.recrawl = Recrawl.from_settings(s, frontier)
        self.downloads = Downloads(self.book, self.sync, self.stats, Politeness.from_settings(s),
                                   PendingWrites.of(crawler), s.getint("FRONTIER_MAX_URL_LENGTH"),
                                   self.recrawl)
        self.worker_id = worker_id(crawler)
        self.spider = None
        # the parts the crawl's other components ask (crawlproj.components)
        for part in (frontier, self.admission, self.book, self.sync, self.downloads,
                     self.recrawl):
            if part is not None:
                register(crawler, part)

    @classmethod
    def from_crawler(cls, crawler):
        frontier = Frontier.from_settings(crawler.settings, get_redis(crawler.settings))
        prioritizer = load_prioritizer(crawler.settings.get("FRONTIER_PRIORITIZER"), crawler)
        return cls(crawler, frontier, prioritizer)

    # -- Scrapy's scheduler interface ----------------------------------------

    def open(self, spider):
        self.spider = spider
        self.downloads.watch(self.crawler, internals.on_request_done)
        RedisGuard.of(self.crawler).watch(self.sync.commit)
        if self.recrawl is not None:
            self.recrawl.start()
        logger.info("Frontier opened: crawl %r, %d partition(s), worker %s, prioritizer %s",
                    self.frontier.crawl_id, self.frontier.partitions, self.worker_id,
                    type(self.admission.prioritizer).__name__)
        self.sync.open()

    def close(self, reason):
        """Give back what this worker holds but has not finished, then flush."""
        if self.recrawl is not None:
            self.recrawl.stop()
        d = self.sync.close(self.downloads.give_back())
        d.addCallback(lambda _: logger.info("Frontier closed (%s): %s", reason, self._summary()))
        return d

    def has_pending_requests(self) -> bool:
        if self.sync.paused:
            return True  # a paused crawl waits for its resume, not for work
        if self.recrawl is not None:
            return True  # a continuous crawl does not finish on its own
        if len(self.book) or not self.sync.idle.close or not self.sync.known():
            return True
        # other workers' leases may bring new URLs; a crawl not started yet, its seeds
        return not self.sync.is_empty() or self.sync.waiting()

    def enqueue_request(self, request) -> bool:
        admitted = self.admission.admit(request, self.spider)
        if admitted is None:
            return False
        self.sync.enqueue(*admitted)
        self.stats.inc_value("frontier/enqueue_requests")
        return True

    def next_request(self):
        if self.sync.paused:
            return None  # woken at the resume
        if self.sync.low():
            self.sync.ask()
        if self.sync.holding():
            return None  # woken when Redis answers again
        return self.downloads.hand_out(self.spider)

    # -- wiring ----------------------------------------------------------------

    def _wake(self):
        internals.wake(self.crawler)

    def _paused(self, paused: bool) -> None:
        """The crawl's control (crawlproj/monitor/control.py). Paused: the
        leases not started go back. Resumed: pull."""
        if paused:
            self.downloads.give_back_queued()
        else:
            self._wake()

    def _stop(self) -> None:
        """The crawl was stopped: close as on Ctrl-C; close() gives back every lease."""
        if self.spider is not None:
            deferred_from_coro(self.crawler.engine.close_spider_async(reason="stopped"))

    def _summary(self) -> str:
        keys = ("enqueue_requests", "added", "duplicates", "leased", "released",
                "returned", "expired_leases", "redis_writes", "redis_commands")
        return ", ".join(f"{k}={self.stats.get_value('frontier/' + k, 0)}" for k in keys)
