"""The worker's side of the frontier's one round trip.

Everything a worker has to tell the frontier (new links, finished downloads,
lease renewals) goes through one group commit (crawlproj/redis/groupcommit.py):
one sync, a pipelined call of lua/sync.lua per partition, runs at a time in
a thread, and whatever arrives meanwhile goes in the next, so under load one
round trip carries many pages' work. Each sync also asks for leases where a
host may be ready and the lease book has room; the answer says when the next
host of each partition may be ready, and the next sync is timed by it. Other
commands may ride along (carry: the worker's heartbeat), so that a worker with
nothing to do sends at most one round trip a second. The answer also carries
the crawl's control (crawlproj/monitor/control.py): paused, or stopped. Knows
Redis, not Scrapy.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from twisted.internet import reactor
from twisted.internet.defer import Deferred

from crawlproj.frontier.frontier import Batch, Frontier, Host, Release, Result
from crawlproj.frontier.leases import LeaseBook
from crawlproj.redis.groupcommit import GroupCommit

logger = logging.getLogger(__name__)

# How long new links wait for more before they are sent: a page's links
# arrive one by one within a few ms (seconds).
GATHER = 0.005
# A host released with a wait this short (ms) may be leased again at once:
# its release is sent now, and its partition asked for leases.
SOON_MS = 20
# How often a worker asks again when nothing is queued or leased anywhere
# but it may not close yet (waiting for its crawl's seeds, or told not to
# close when idle), seconds: an idle worker costs one round trip a second.
POLL_INTERVAL = 1.0
# The longest a worker sleeps before asking again when a partition said when
# its next host is due (a host released meanwhile by another worker may come
# sooner), seconds.
LONGEST_SLEEP = 1.0
# How soon a worker with room asks again when every host with queued URLs is
# leased and some to other workers, seconds: a host handed back with no wait
# is ready at once, and the worker that hands it back leases it again in the
# same call if it has room. A worker that asked only on its own releases, or
# once LONGEST_SLEEP had passed, would get fewer hosts the fewer it had (two
# workers on the benchmark web split the pages 2:1).
BUSY_POLL = SOON_MS / 1000.0

ENQUEUE, RELEASE, RENEW = 0, 1, 2


class Control:
    """The crawl's control as the sync's answers carry it
    (crawlproj/monitor/control.py): a pause or resume is passed on once; so
    is a stop stamped after this worker's first answer (a stop before it was
    meant for the workers running then)."""

    def __init__(self, crawl_id: str, on_pause: Callable[[bool], None] | None = None,
                 on_stop: Callable[[], None] | None = None):
        self.crawl_id = crawl_id
        self.on_pause = on_pause      # on_pause(paused): the crawl was paused or resumed
        self.on_stop = on_stop        # the crawl was stopped while this worker ran
        self.paused = False
        self.opened_ms: int | None = None  # server time of this worker's first answer
        self.stopped = False

    def answered(self, results: dict[int, Result]) -> None:
        if self.opened_ms is None:
            self.opened_ms = min(r.now_ms for r in results.values())
        paused = any(r.paused for r in results.values())
        if paused != self.paused:
            self.paused = paused
            logger.info("Frontier: crawl %r %s", self.crawl_id,
                        "paused: finishing the downloads under way, leasing nothing"
                        if paused else "resumed")
            if self.on_pause is not None:
                self.on_pause(paused)
        stopped = max(r.stopped for r in results.values())
        if stopped >= self.opened_ms and not self.stopped:
            self.stopped = True
            logger.info("Frontier: crawl %r stopped (scrapy crawlctl stop): closing, "
                        "giving back every lease", self.crawl_id)
            if self.on_stop is not None:
                self.on_stop()


class IdleWait:
    """A worker started before its crawl's seeds are in (jobs scheduled
    together, workers started before `scrapy seed`) waits for them
    FRONTIER_IDLE_WAIT seconds from open instead of closing, while the crawl
    shows no work (this worker sent no URL, and the frontier had none queued,
    leased or pending)."""

    def __init__(self, crawl_id: str, close: bool, wait: float):
        self.crawl_id = crawl_id
        self.close = close            # FRONTIER_IDLE_CLOSE: close when the crawl is done
        self.wait = wait              # seconds to wait for a crawl that shows no work yet
        self.work_seen = False        # this worker sent URLs, or the frontier had some
        self._end = None              # the call that ends the wait for work
        self._said = False

    def open(self, wake: Callable[[], None]) -> None:
        if self.close and self.wait > 0:
            self._end = reactor.callLater(self.wait, self._waited, wake)

    def _waited(self, wake: Callable[[], None]) -> None:
        if not self.work_seen:
            logger.info("Frontier: no work in crawl %r after %g s (FRONTIER_IDLE_WAIT)",
                        self.crawl_id, self.wait)
        wake()  # the engine looks again, and closes if the crawl is still empty

    def may_wait(self) -> bool:
        return not self.work_seen and self._end is not None and self._end.active()

    def waiting(self) -> bool:
        """may_wait(), said once in the log."""
        if not self.may_wait():
            return False
        if not self._said:
            self._said = True
            logger.info("Frontier: crawl %r has no work yet; waiting up to %g s for it "
                        "(FRONTIER_IDLE_WAIT)", self.crawl_id, self.wait)
        return True

    def cancel(self) -> None:
        if self._end is not None and self._end.active():
            self._end.cancel()


class LastAnswers:
    """Each partition's last answer to this worker, aged on its own clock
    (server clocks are only compared with themselves)."""

    def __init__(self, frontier: Frontier):
        self.frontier = frontier
        self.results: dict[int, Result] = {}
        self._received: dict[int, float] = {}  # partition -> monotonic time of its result

    def __iter__(self):
        return iter(self.results)

    def got(self, p: int, r: Result, received: float) -> None:
        self.results[p] = r
        self._received[p] = received

    def all_in(self) -> bool:
        """Every partition has answered."""
        return len(self.results) == self.frontier.partitions

    def is_empty(self) -> bool:
        return self.frontier.is_empty(self.results)

    def due_in(self, p: int, book: LeaseBook, target: int) -> float | None:
        """Seconds until partition p may have a ready host, by its last answer
        aged on our clock; None when it had nothing queued nor leased."""
        r = self.results[p]
        age = time.monotonic() - self._received[p]
        if (r.queued and not (r.heap or r.ready or r.rready)
                and r.leases > book.queued + book.fetching
                and len(book) < target):
            return BUSY_POLL - age  # every host with work leased, not all here
        if r.next_ready_ms < 0:
            return None
        return (r.next_ready_ms - r.now_ms) / 1000.0 - age


class Renewals:
    """Keeps this worker's leases alive: every third of the lease TTL each
    held lease's renewal goes with the next sync (Mercator's frontier hands
    a host to one thread at a time; here a lease says which worker, and for
    how long). A lease the sync grants or renews ends, on the server's
    clock, a TTL after the server ran it: never sooner than a TTL after the
    sync was sent."""

    def __init__(self, book: LeaseBook, ttl_ms: int, add: Callable):
        self.book = book
        self.every = ttl_ms / 3000.0
        self.ttl = ttl_ms / 1000.0
        self.add = add                # puts a command in the next sync
        self.sent_at = 0.0            # monotonic time the sync under way was sent
        self.under_way: set = set()   # (partition, token) renewed by it
        self._call = None

    def start(self) -> None:
        self._call = reactor.callLater(self.every, self._renew)

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()

    def _renew(self) -> None:
        for lease in self.book:
            self.add((RENEW, lease.partition, (lease.host, lease.token)))
        self._call = reactor.callLater(self.every, self._renew)

    def sent(self, renewing: set) -> None:
        """A sync carrying these renewals leaves now."""
        self.sent_at = time.monotonic()
        self.under_way = renewing

    def answered(self) -> float:
        """The sync under way was answered: its renewals hold until the
        deadline returned (monotonic), which its new leases share."""
        deadline = self.sent_at + self.ttl
        for p, token in self.under_way:
            self.book.renewed(p, token, deadline)
        return deadline


class Poll:
    """The next look at the frontier when this worker has nothing to send:
    when the earliest waiting host may be ready, or a second from now. A
    poll asks every partition for leases (one believed empty may have been
    filled by another worker)."""

    def __init__(self, flush: Callable[[], None]):
        self.flush = flush
        self.due = False              # the next sync is a poll
        self._call = None

    def armed(self, within: float = math.inf) -> bool:
        """A poll is set, at most `within` seconds from now."""
        return self._call is not None and self._call.active() \
            and self._call.getTime() - reactor.seconds() <= within

    def arm(self, delay: float) -> None:
        self._call = reactor.callLater(delay, self._fire)

    def cancel(self) -> None:
        if self.armed():
            self._call.cancel()

    def _fire(self) -> None:
        self.due = True
        self.flush()


class FrontierSync:
    def __init__(self, frontier: Frontier, book: LeaseBook, stats, target: int,
                 idle_close: bool, idle_wait: float, wake: Callable[[], None],
                 on_unreachable: Callable[[], None] | None = None,
                 on_pause: Callable[[bool], None] | None = None,
                 on_stop: Callable[[], None] | None = None):
        self.frontier = frontier
        self.book = book
        self.stats = stats
        self.target = target          # leases to hold (prefetch)
        self.idle = IdleWait(frontier.crawl_id, idle_close, idle_wait)
        self.wake = wake              # the engine should pull: new work, or none left
        self.answers = LastAnswers(frontier)
        self.control = Control(frontier.crawl_id, on_pause, on_stop)
        self._riders: list = []       # (command, answered) for the next sync
        self.commit = GroupCommit(
            self._send, "frontier", stats, prepare=self._batches, on_result=self._synced,
            on_unreachable=on_unreachable, replay=True)
        self.renewals = Renewals(book, frontier.lease_ttl_ms, self.commit.add)
        self.poll = Poll(self.commit.flush)
        self._was_empty = False
        self._held = False            # a download was held back: wake when Redis answers

    @property
    def paused(self) -> bool:
        """The crawl is paused (crawlproj/monitor/control.py)."""
        return self.control.paused

    # -- what the worker says ----------------------------------------------

    def enqueue(self, partition: int, entry) -> None:
        self.idle.work_seen = True
        self.commit.add((ENQUEUE, partition, entry), GATHER)

    def release(self, releases: list[Release], partition: int) -> None:
        """Send releases now if one frees a host with (almost) no wait, when
        another lease may take it; else with the page's links, within GATHER."""
        now = False
        for r in releases:
            self.commit.add((RELEASE, partition, r), GATHER)
            now = now or (r.host_fate != Host.NONE and r.delay_ms <= SOON_MS)
        if now:
            self.commit.flush()

    def ask(self) -> None:
        """Sync now (next reactor turn): the book has room."""
        self.commit.flush()

    def carry(self, command: tuple, answered: Callable, within: float) -> None:
        """Send command with the next sync: the poll already armed, or else
        within `within` seconds; answered(reply) gets its reply (an exception if it failed) on
        the reactor thread. A sync that fails takes its riders with it: the
        rider sends again what was not answered."""
        self._riders.append((command, answered))
        if self.poll.armed(within=LONGEST_SLEEP):
            return  # the next poll, at most a second away, takes it: no round trip of its own
        self.commit.flush(within)

    def holding(self) -> bool:
        """Start no download now: Redis does not take this worker's writes
        (down, restarting, paused). A page fetched now could not be recorded
        before its lease ends, and would be fetched again by whoever gets the
        lease next; the leases held wait, and go on when Redis answers (or
        are dropped at their deadline)."""
        if self.commit.stalled():
            self._held = True
            return True
        return False

    def low(self) -> bool:
        """Fewer than half the prefetch target queued: time to ask for more."""
        return self.book.queued < self.target // 2

    # -- the frontier as last seen -----------------------------------------

    def known(self) -> bool:
        """Every partition has answered, and nothing is under way."""
        return self.answers.all_in() and self.commit.idle

    def is_empty(self) -> bool:
        return self.answers.is_empty()

    def waiting(self) -> bool:
        """The crawl has shown no work yet and FRONTIER_IDLE_WAIT has not
        passed since open (IdleWait): keep polling for its seeds instead of
        closing. Asked by the scheduler when the engine would close."""
        return self.idle.waiting()

    def _due_in(self, p: int) -> float | None:
        return self.answers.due_in(p, self.book, self.target)

    # -- the sync ----------------------------------------------------------

    def _batches(self, entries: list) -> dict[int, Batch] | None:
        """One sync's batches, from the entries gathered and the leases the
        book has room for."""
        batches: dict[int, Batch] = {}
        renewing = set()
        for kind, p, item in entries:
            if kind == RENEW:  # renewals pile up while Redis is away: one each
                if (p, item[1]) in renewing:
                    continue
                renewing.add((p, item[1]))
            batch = batches.get(p)
            if batch is None:
                batch = batches[p] = Batch()
            (batch.enqueue, batch.release, batch.renew)[kind].append(item)
        for p, n in self._wanted(batches).items():
            batch = batches.get(p)
            if batch is None:
                batch = batches[p] = Batch()
            batch.lease = n
        self.poll.due = False
        riders, self._riders = self._riders, []
        if not batches and not riders:
            self._arm_timer()
            return None
        self.poll.cancel()
        self.renewals.sent(renewing)
        return batches, riders

    def _send(self, payload):
        """In the writer thread: the sync and its riders, one round trip."""
        batches, riders = payload
        results, replies = self.frontier.sync_with(batches, [c for c, _ in riders])
        return results, replies, riders

    def _wanted(self, batches: dict[int, Batch]) -> dict[int, int]:
        """How many leases to ask of which partitions.

        Ask a partition when a host there may be ready: unknown, just given
        URLs, a host released there with (almost) no wait, or its earliest
        next-contact time has come. A poll asks every partition: one believed
        empty may have been filled by another worker.

        The release rule matters where a crawl is host-bound (its last big
        hosts, or no politeness wait): the call that hands a host back also
        leases its next URL (sync.lua releases before it leases), instead of
        the host waiting for a second round trip.
        """
        # pages still being processed count: their links may change what is best
        want = 0 if self.book.closing else self.target - len(self.book)
        if want <= 0:
            return {}
        parts = range(self.frontier.partitions)
        if not self.poll.due:
            def may_be_ready(p):
                batch = batches.get(p)
                if p not in self.answers.results or (batch and batch.enqueue):
                    return True
                if batch and any(r.host_fate != Host.NONE and r.delay_ms <= SOON_MS
                                 for r in batch.release):
                    return True
                due = self._due_in(p)
                return due is not None and due <= SOON_MS / 1000.0

            parts = [p for p in parts if may_be_ready(p)]
        if not parts:
            return {}
        share = max(1, math.ceil(want / len(parts)))
        return {p: share for p in parts}

    def _synced(self, answer) -> None:
        results, replies, riders = answer
        for (_, answered), reply in zip(riders, replies):
            answered(reply)
        received = time.monotonic()
        deadline = self.renewals.answered()
        got = 0
        for p, r in results.items():
            self.answers.got(p, r, received)
            for token in r.lost:  # the frontier took it back: never fetch it now
                self.book.lost(p, token)
            if r.lost:
                self.stats.inc_value("frontier/leases_lost", len(r.lost))
            back = self.book.add(r.leased, deadline)  # closing: given back at once
            for release in back:
                self.commit.add((RELEASE, p, release))
            got += len(r.leased) - len(back)
            for key, value in (("added", r.added), ("duplicates", r.duplicates),
                               ("bumped", r.bumped), ("stale_releases", r.stale),
                               ("expired_leases", r.expired)):
                if value:
                    self.stats.inc_value(f"frontier/{key}", value)
            for rule, value in (("host_queued", r.refused_host_queued),
                                ("host_pages", r.refused_host_pages),
                                ("near_duplicates", r.refused_suspects)):
                if value:
                    self.stats.inc_value(f"trapguard/refused/{rule}", value)
        self.stats.inc_value("frontier/leased", got)
        self.stats.inc_value("frontier/redis_commands", len(results))
        if results:
            self.control.answered(results)
        empty = self.is_empty()
        if not empty:
            self.idle.work_seen = True
        if got or (empty and not self._was_empty) or self._held:
            self._held = False
            self.wake()  # new work, or time to see that there is none
        self._was_empty = empty
        if got and self.low():
            self.commit.flush()
        else:
            self._arm_timer()

    def _arm_timer(self) -> None:
        """Look again when the earliest waiting host may be ready."""
        if self.book.closing or self.poll.armed():
            return
        delays = [d for d in map(self._due_in, self.answers) if d is not None]
        if self.paused:
            delay = LONGEST_SLEEP  # nothing will be leased: only look for a resume
        elif delays:
            delay = min(max(0.001, min(delays)), LONGEST_SLEEP)
        elif self.idle.close and self.is_empty() and not len(self.book) \
                and not self.idle.may_wait():
            return  # nothing anywhere: the engine will close us
        else:
            delay = POLL_INTERVAL
        self.poll.arm(delay)

    # -- open and close ----------------------------------------------------

    def open(self) -> None:
        self.renewals.start()
        self.idle.open(self.wake)
        self.commit.flush()

    def close(self, releases: list[Release]) -> Deferred:
        """Send the last releases (the book is closing: no more leases)."""
        self.poll.cancel()
        self.renewals.stop()
        self.idle.cancel()
        for r in releases:
            p = self.frontier.partition_of(r.host)
            self.commit.add((RELEASE, p, r))
        return self.commit.close()
