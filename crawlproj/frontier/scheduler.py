"""FrontierScheduler: Scrapy's SCHEDULER on the shared Mercator frontier.

Scrapy's scheduler interface is synchronous (../shared/scrapy-notes.md §1), so
nothing here waits on Redis in the reactor thread. Everything a worker has to
tell the frontier (new links, finished downloads, lease renewals) is buffered
and sent by one sync, a single pipelined round trip (frontier.Frontier.sync)
run in a thread; while one sync is out, the next accumulates, so under load a
round trip carries many pages' work (group commit). Each sync also leases the
next hosts, which wait here, prefetched, for the engine to pull them.

The life of a URL in one worker:
    enqueue_request -> buffered -> sync: DUE test-and-set + host back queue
    sync leases host -> prefetched -> next_request hands it to the engine
      (a host's first URL once its robots.txt is parsed: parked meanwhile)
    download ends (signal) -> release buffered with the politeness delay
    -> sync: host back on the heap, the URL still leased (pending)
    engine done with its output (engine.py) -> sync: links in, then URL done
A run (docs/frontier.md) leases a host with its next URLs; they wait here for
the host's download to end, and the host goes back after the last.
"""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
from collections import deque
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from scrapy import signals
from twisted.internet import reactor, threads
from twisted.internet.defer import Deferred, succeed

from crawlproj.frontier import codec, engine
from crawlproj.frontier.admission import RecentURLs, Refused, admit
from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.prioritizers import load_prioritizer
from crawlproj.prioritizers.basic import Prioritizer
from crawlproj.redisconn import get_redis

logger = logging.getLogger(__name__)

# How often a worker with nothing to do asks the frontier again when other
# workers hold leases (their pages may bring new URLs). Seconds.
POLL_INTERVAL = 0.25
# How often a worker with room for more asks while hosts are leased anywhere.
# A leased host comes back at the end of each download and goes to whichever
# worker asks first; asking often lets a crawl's last few big hosts spread
# over the workers instead of staying with the one that happens to hold them.
HUNGRY_POLL = 0.01
# A partition whose earliest host is due within this many ms is asked now.
SOON_MS = 20
_UNSET = object()


@dataclass
class InFlight:
    """A leased URL this worker is working on."""

    host: str
    token: str
    partition: int
    reached: float | None = None      # request reached the downloader
    left: float | None = None         # request left the downloader
    status: int | None = None         # HTTP status of the raw response
    retry_after: float | None = None  # seconds, from a 429/503
    released: bool = False            # host released at download end
    host_token: str | None = None     # a run's URL: the token holding the host


def _retry_after(value: bytes | None) -> float | None:
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class FrontierScheduler:
    def __init__(self, crawler, frontier: Frontier, prioritizer):
        self.crawler = crawler
        self.frontier = frontier
        self.prioritizer = prioritizer
        self.stats = crawler.stats
        s = crawler.settings
        self.delay_factor = s.getfloat("FRONTIER_DELAY_FACTOR", 10.0)
        self.min_delay = s.getfloat("FRONTIER_MIN_DELAY", 0.0)
        self.max_delay = s.getfloat("FRONTIER_MAX_DELAY", 60.0)
        self.obey_crawl_delay = s.getbool("FRONTIER_OBEY_CRAWL_DELAY", True)
        self.idle_close = s.getbool("FRONTIER_IDLE_CLOSE", True)
        self.max_url_length = s.getint("FRONTIER_MAX_URL_LENGTH", 2083)
        prefetch = s.get("FRONTIER_PREFETCH")
        self.target = int(prefetch) if prefetch else s.getint("CONCURRENT_REQUESTS", 16) + 8
        self.max_backlog = s.getint("FRONTIER_MAX_BACKLOG", 4)
        cache = s.getint("DUE_CACHE_SIZE", 2 ** 16)
        self.recent = RecentURLs(cache) if cache > 0 else None
        # The URL strings this worker sent lately, for middlewares/recentlinks.py;
        # none when duplicates must arrive (a prioritizer that bumps).
        bumps = getattr(type(prioritizer), "bump", Prioritizer.bump) is not Prioritizer.bump
        self._sent_urls = RecentURLs(cache) if cache > 0 and not bumps else None
        self._backlog = 0  # leases whose download ended and page is not done
        # Runs (Mercator's back queue owned by one thread): when fewer hosts are
        # ready than this worker has room for, a leased host brings up to
        # FRONTIER_HOST_RUN of its URLs, fetched back to back while the rule
        # lets the host be contacted again at once (within SOON_MS).
        self.run = max(1, s.getint("FRONTIER_HOST_RUN", 4))
        self._short = 1.0 if self.min_delay * 1000 <= SOON_MS else 0.0  # share of short delays
        self._runs: dict[str, deque] = {}          # host -> (request, InFlight) waiting for it
        self._hosts: dict[str, InFlight] = {}      # host -> its lease, while a run is out
        self._parked: list = []                    # (request, InFlight) awaiting robots.txt
        self._robots = _UNSET                      # middlewares/robots.py, once looked up
        self._robots_out = 0                       # robots.txt downloads started here
        # Start the next download when a transfer ends, not when the engine
        # lets go of the response (engine.start_freed).
        self.refill_at_transfer_end = s.getbool("FRONTIER_REFILL_AT_TRANSFER_END", True)
        self.worker_id = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.spider = None
        self._pending: dict[int, Batch] = {}
        self._prefetched: deque = deque()          # (request, InFlight)
        self._inflight: dict = {}                  # request -> InFlight
        self._results: dict = {}                   # partition -> last Result
        self._received: dict = {}                  # partition -> monotonic time of it
        self._syncing: Deferred | None = None
        self._again = False
        self._timer = None
        self._renew_loop = None
        self._closing = False
        self._was_empty = False
        self._hooked = False

    @classmethod
    def from_crawler(cls, crawler):
        frontier = Frontier.from_settings(crawler.settings, get_redis(crawler.settings))
        prioritizer = load_prioritizer(crawler.settings.get("FRONTIER_PRIORITIZER", "bfs"), crawler)
        return cls(crawler, frontier, prioritizer)

    # -- Scrapy's scheduler interface ----------------------------------------

    def open(self, spider):
        self.spider = spider
        sig = self.crawler.signals
        sig.connect(self._reached, signals.request_reached_downloader)
        sig.connect(self._left, signals.request_left_downloader)
        sig.connect(self._downloaded, signals.response_downloaded)
        ttl = self.frontier.lease_ttl_ms / 1000.0
        self._renew_loop = reactor.callLater(ttl / 3, self._renew)
        self._pending = {p: Batch() for p in range(self.frontier.partitions)}
        logger.info("Frontier %s: crawl %r, %d partition(s), worker %s, prioritizer %s",
                    "opened", self.frontier.crawl_id, self.frontier.partitions,
                    self.worker_id, type(self.prioritizer).__name__)
        self._sync()
        return None

    def close(self, reason):
        """Give back what this worker holds but has not fetched, then flush."""
        self._closing = True
        for call in (self._timer, self._renew_loop):
            if call is not None and call.active():
                call.cancel()
        waiting = self._syncing or succeed(None)
        done = Deferred()

        def final(_):
            returned = set()
            for _request, lease in self._held():
                self._release(lease, 0.0, "return")
                self.stats.inc_value("frontier/returned")
                returned.add(lease.token)
            for lease in self._hosts.values():  # a run's host, its first URL done
                if lease.token not in returned:
                    self._release(lease, 0.0, "return")
            self._prefetched.clear()
            self._parked.clear()
            self._inflight.clear()
            self._runs.clear()
            self._hosts.clear()
            self._backlog = 0
            try:
                if self._pending:
                    batches, self._pending = self._pending, {}
                    self._apply(self.frontier.sync(batches))
            except Exception as exc:  # the server is gone: leases will expire
                logger.error("Frontier: could not return leases on close: %s", exc)
            logger.info("Frontier closed (%s): %s", reason, self._summary())
            done.callback(None)

        waiting.addBoth(final)
        return done

    def _held(self):
        """Every (request, lease) this worker holds: prefetched, in the engine,
        waiting in a run for their host."""
        yield from self._prefetched
        yield from self._parked
        yield from self._inflight.items()
        for run in self._runs.values():
            yield from run

    def _holding(self) -> int:
        return len(self._prefetched) + len(self._parked) + len(self._inflight) \
            + sum(map(len, self._runs.values()))

    def has_pending_requests(self) -> bool:
        if self._prefetched or self._parked or self._inflight or self._runs or self._pending \
                or not self.idle_close:
            return True
        if not self._results or self._syncing is not None:
            return True  # not known yet
        # other workers' leases may still bring new URLs
        return not self.frontier.is_empty(self._results)

    def enqueue_request(self, request) -> bool:
        request.meta.pop("crawlproj_lease", None)
        try:
            admitted = admit(self.frontier, self.prioritizer, request, self.spider,
                             self.max_url_length, self.recent)
        except Refused as exc:
            logger.warning("Frontier refused %s: %s", request.url[:200], exc.message)
            self.stats.inc_value(f"frontier/refused/{exc.reason}")
            return False
        if self._sent_urls is not None and not request.dont_filter:
            self._sent_urls.seen(request.url)
        if admitted is None:
            self.stats.inc_value("frontier/recent_duplicates")
            return False
        p, entry = admitted
        self._batch(p).enqueue.append(entry)
        self.stats.inc_value("frontier/enqueue_requests")
        self._soon()  # links of one page arrive one by one: send them together
        return True

    def sent_lately(self, url: str) -> bool:
        """Did this worker send this exact URL to the frontier lately? Then
        another link to it changes nothing (middlewares/recentlinks.py)."""
        return self._sent_urls is not None and url in self._sent_urls

    def next_request(self):
        if len(self._prefetched) < self.target // 2:
            self._sync()
        while self._prefetched:
            if self._robots_out and self._slots_full():
                return None
            request, lease = self._prefetched.popleft()
            waiting, started = self._robots_pending(request)
            if waiting is None:
                self._inflight[request] = lease
                return request
            # the host's robots.txt first, without the page holding a slot
            self._parked.append((request, lease))
            if started:
                self._robots_out += 1
            waiting.addBoth(self._unpark, request, lease, started)
        return None

    def _slots_full(self) -> bool:
        """Whether the downloader is full, counting the robots.txt downloads this
        scheduler started that have not reached it yet (they start a turn later)."""
        d = self.crawler.engine.downloader
        there = sum(1 for r in d.active if r.meta.get("dont_obey_robotstxt"))
        busy = engine.transfers(self.crawler) if self.refill_at_transfer_end \
            else len(d.active)
        return 0 < d.total_concurrency <= busy + max(0, self._robots_out - there)

    def _robots_pending(self, request):
        if self._robots is _UNSET:
            self._robots = next((mw for mw in self.crawler.engine.downloader.middleware.middlewares
                                 if hasattr(mw, "rules_pending")), None)
        return (None, False) if self._robots is None else self._robots.rules_pending(request)

    def _unpark(self, _result, request, lease, started=False):
        """The host's robots.txt rules are in: its URL goes first in line."""
        if started:
            self._robots_out -= 1
        try:
            self._parked.remove((request, lease))
        except ValueError:
            return  # returned meanwhile (closing)
        self._prefetched.appendleft((request, lease))
        engine.wake(self.crawler)

    # -- download bookkeeping (signals) -------------------------------------

    def _reached(self, request, spider=None):
        request.meta.pop(engine.ENDED, None)  # a copy of a downloaded request transfers anew
        lease = self._inflight.get(request)
        if lease is not None and lease.reached is None:
            lease.reached = time.monotonic()

    def _left(self, request, spider=None):
        """The download ended: the host may be contacted again after its
        politeness delay, counted from now (Mercator §3.1), not from when the
        page's links are in. The URL itself stays leased until then."""
        lease = self._inflight.get(request)
        if lease is not None and not lease.released:
            lease.left = time.monotonic()
            delay, outcome = self._politeness(lease, request)
            lease.released = True
            self._backlog += 1
            self._end_download(lease, delay, outcome, page_done=False)
            if delay > 0:
                self._soon()  # nobody may contact the host yet: ride with the page's links
            else:
                self._sync()
        if self.refill_at_transfer_end:
            engine.end_transfer(request)
            # Only while this worker keeps up with its pages: on a CPU-bound
            # worker an early start only lengthens the queue of responses
            # waiting for the event loop (measured 6-10 % slower, more time in
            # the garbage collector: docs/benchmarks.md, session 5).
            if self._backlog < self.max_backlog:
                started = engine.start_freed(self.crawler)
                if started:
                    self.stats.inc_value("frontier/started_at_transfer_end", started)

    def _downloaded(self, response, request, spider=None):
        lease = self._inflight.get(request)
        if lease is not None:
            lease.status = response.status
            if response.status in (429, 503):
                lease.retry_after = _retry_after(response.headers.get(b"Retry-After"))

    def _politeness(self, lease: InFlight, request) -> tuple[float, str]:
        """The host's delay before its next contact, and how its download ended."""
        took = (lease.left - lease.reached) if lease.reached and lease.left else 0.0
        request.meta["crawlproj_download_time"] = took
        delay = max(self.min_delay, self.delay_factor * took)
        crawl_delay = request.meta.get("crawl_delay")
        if self.obey_crawl_delay and crawl_delay:
            delay = max(delay, float(crawl_delay))
        delay = min(delay, self.max_delay)
        if lease.status in (429, 503):
            outcome = f"block:{int((lease.retry_after or 0) * 1000)}"
        elif lease.reached is not None and lease.status is None:
            outcome = "fail"  # connection error, timeout, DNS failure
        else:
            outcome = "ok"
        return delay, outcome

    def _done(self, request):
        """The engine is finished with request (its links are enqueued): the URL
        is done; its host too if the download never ended (dropped before it)."""
        lease = self._inflight.pop(request, None)
        if lease is None:
            return  # not ours (robots.txt, or a request from another path)
        if lease.released:
            self._backlog -= 1
            self._release(lease, 0.0, "done")
        elif self._end_download(lease, *self._politeness(lease, request), page_done=True):
            self._release(lease, 0.0, "done")
        self.stats.inc_value("frontier/released")
        self._sync()

    def _end_download(self, lease: InFlight, delay: float, outcome: str, page_done: bool) -> bool:
        """The host of a finished (or dropped) download: its run goes on, or it
        goes back to the frontier. True if the URL itself is still pending."""
        self._short = 0.9 * self._short + 0.1 * (delay * 1000 <= SOON_MS)
        host = lease.host
        if self._runs.get(host) and outcome == "ok" and delay * 1000 <= SOON_MS \
                and self._backlog < self.max_backlog and not self._closing:
            if lease.token == lease.host_token:
                self._release(lease, 0.0, "hold")  # the URL pending, the host still ours
            reactor.callLater(delay, self._continue, host)
            return True
        held = self._hosts.pop(host, None)
        if held is not None:  # the run ends: the host goes back, with what is left of it
            self._release(held, delay, outcome, keep=True)
            for _request, extra in self._runs.pop(host, ()):
                self._release(extra, 0.0, "return")
                self.stats.inc_value("frontier/run_returned")
            return True
        self._release(lease, delay, outcome, keep=not page_done)
        return not page_done

    def _continue(self, host: str):
        """The next URL of host's run: the host is this worker's, its time has come."""
        run = self._runs.get(host)
        if not run:
            return  # returned meanwhile (closing)
        self._prefetched.appendleft(run.popleft())
        if not run:
            del self._runs[host]
        engine.wake(self.crawler)

    # -- the sync --------------------------------------------------------------

    def _batch(self, partition: int) -> Batch:
        batch = self._pending.get(partition)
        if batch is None:
            batch = self._pending[partition] = Batch()
        return batch

    def _soon(self, within: float = 0.005):
        """Sync within a few ms: what comes in meanwhile goes in the same call."""
        if self._timer is not None and self._timer.active():
            if self._timer.getTime() - reactor.seconds() <= within:
                return
            self._timer.cancel()
        self._timer = reactor.callLater(within, self._sync)

    def _release(self, lease: InFlight, delay: float, outcome: str, keep: bool = False):
        """keep: the host only; the URL stays leased (pending) until "done"."""
        self._batch(lease.partition).release.append(
            (lease.host, lease.token, int(delay * 1000), ("left:" if keep else "") + outcome))

    def _renew(self):
        for _, lease in self._held():
            self._batch(lease.partition).renew.append((lease.host, lease.token))
        for lease in self._hosts.values():
            self._batch(lease.partition).renew.append((lease.host, lease.token))
        self._sync()
        self._renew_loop = reactor.callLater(self.frontier.lease_ttl_ms / 3000.0, self._renew)

    def _due_in(self, p: int) -> float | None:
        """Seconds until partition p may have a ready host, by its last answer
        aged on our own clock (server clocks are only compared with themselves);
        None when it had nothing queued nor leased."""
        r = self._results[p]
        if r.next_ready_ms < 0:
            return None
        return (r.next_ready_ms - r.now_ms) / 1000.0 - (time.monotonic() - self._received[p])

    def _wanted(self, poll: bool) -> dict[int, int]:
        """How many leases to ask of which partitions.

        Ask a partition when a host there may be ready: unknown, just given
        URLs, a host released there with (almost) no delay, or its earliest
        next-contact time has come. A poll asks every partition: one believed
        empty may have been filled by another worker.

        The release rule matters where a crawl is host-bound (its last big
        hosts, or no politeness wait): the call that hands a host back also
        leases its next URL (sync.lua releases before it leases), instead of
        the host waiting for a second round trip.
        """
        # pages still being processed count: their links may change what is best;
        # and a worker behind on its pages (CPU-bound) leaves hosts to others
        want = 0 if self._closing or self._backlog >= self.max_backlog \
            else self.target - self._holding()
        if want <= 0:
            return {}
        parts = list(range(self.frontier.partitions))
        if not poll:
            def may_be_ready(p):
                batch = self._pending.get(p)
                if p not in self._results or (batch and batch.enqueue):
                    return True
                if batch and any(r[2] <= SOON_MS and r[3] != "done" for r in batch.release):
                    return True
                due = self._due_in(p)
                return due is not None and due <= SOON_MS / 1000.0

            parts = [p for p in parts if may_be_ready(p)]
        if not parts:
            return {}
        share = max(1, math.ceil(want / len(parts)))
        return {p: share for p in parts}

    def _poll(self):
        self._sync(poll=True)

    def _sync(self, poll: bool = False):
        if self._syncing is not None:
            self._again = True
            return
        if self._closing:
            return
        run = self.run if self._short >= 0.5 else 1
        for p, n in self._wanted(poll).items():
            batch = self._batch(p)
            batch.lease, batch.run = n, run
        if not self._pending:
            self._arm_timer()
            return
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        batches, self._pending = self._pending, {}
        self._again = False
        self._syncing = threads.deferToThread(self.frontier.sync, batches)
        self._syncing.addCallbacks(self._synced, self._sync_failed, errbackArgs=(batches,))

    def _synced(self, results):
        self._syncing = None
        got = self._apply(results)
        logger.debug("Frontier sync: %d leased, prefetched %d, in flight %d, again %s, results %s",
                     got, len(self._prefetched), len(self._inflight), self._again,
                     list(results.values()))
        empty = self.frontier.is_empty(self._results)
        if got or (empty and not self._was_empty):
            engine.wake(self.crawler)  # new work, or time to see that there is none
        self._was_empty = empty
        if self._again or (got and len(self._prefetched) < self.target // 2):
            self._sync()
        else:
            self._arm_timer()

    def _apply(self, results) -> int:
        got = 0
        received = time.monotonic()
        for p, r in results.items():
            self._results[p] = r
            self._received[p] = received
            host_token: dict[str, str | None] = {}  # a host's first URL holds its lease
            for leased in r.leased:
                first = host_token.setdefault(leased.host, leased.token)
                lease = InFlight(leased.host, leased.token, p, host_token=first)
                if first is None:  # the host's first URL was unreadable: no run
                    self._release(lease, 0.0, "return")
                    continue
                try:
                    request = codec.decode(leased.payload, self.spider, leased.host)
                except Exception as exc:  # a payload no worker can read: drop it, say so
                    logger.error("Frontier: unreadable queued request on %s dropped: %s",
                                 leased.host, exc)
                    self.stats.inc_value("frontier/undecodable")
                    if first == leased.token:
                        self._release(lease, 0.0, "ok")
                        host_token[leased.host] = None
                    else:
                        self._release(lease, 0.0, "done")
                    continue
                request.meta["crawlproj_lease"] = leased.token
                # the page's importance as the frontier saw it, for its links'
                # scores (middlewares/linkcontext.py) and for retries/redirects
                request.meta["frontier_score"] = leased.score
                if first == leased.token:
                    self._prefetched.append((request, lease))
                else:  # the next URLs of a run wait for their host
                    self._runs.setdefault(leased.host, deque()).append((request, lease))
                    self._hosts.setdefault(leased.host, InFlight(leased.host, first, p))
                    self.stats.inc_value("frontier/run_leased")
                got += 1
            for key, value in (("added", r.added), ("duplicates", r.duplicates),
                               ("bumped", r.bumped), ("stale_releases", r.stale),
                               ("expired_leases", r.expired)):
                if value:
                    self.stats.inc_value(f"frontier/{key}", value)
        self.stats.inc_value("frontier/leased", got)
        self.stats.inc_value("frontier/redis_syncs")
        self.stats.inc_value("frontier/redis_commands", len(results))
        if not self._hooked:
            self._hooked = engine.on_request_done(self.crawler, self._done)
        return got

    def _sync_failed(self, failure, batches):
        self._syncing = None
        logger.error("Frontier sync failed (retrying in 1 s): %s", failure.getErrorMessage())
        self.stats.inc_value("frontier/sync_errors")
        for p, batch in batches.items():  # keep everything that was not confirmed
            mine = self._batch(p)
            mine.enqueue[:0] = batch.enqueue
            mine.release[:0] = batch.release
        if self._timer is None or not self._timer.active():
            self._timer = reactor.callLater(1.0, self._sync)

    def _arm_timer(self):
        """Look again when the earliest waiting host becomes ready."""
        if self._closing or (self._timer is not None and self._timer.active()):
            return
        delays = [d for d in map(self._due_in, self._results) if d is not None]
        if delays:
            delay = min(max(0.001, min(delays)), POLL_INTERVAL * 4)
        elif self.idle_close and self.frontier.is_empty(self._results) \
                and not self._inflight and not self._prefetched and not self._runs \
                and not self._parked:
            return  # nothing anywhere: the engine will close us
        else:
            delay = POLL_INTERVAL
        if self._backlog < self.max_backlog and self._holding() < self.target // 2 \
                and any(r.leases or r.pending for r in self._results.values()):
            delay = min(delay, HUNGRY_POLL)
        self._timer = reactor.callLater(delay, self._poll)

    def _summary(self) -> str:
        keys = ("enqueue_requests", "added", "duplicates", "leased", "released",
                "returned", "expired_leases", "redis_syncs", "redis_commands")
        return ", ".join(f"{k}={self.stats.get_value('frontier/' + k, 0)}" for k in keys)
