"""Group commit of a worker's writes to Redis, off the reactor thread; and
its kind for the per-page tests that must answer (GroupCall).

Entries are added from the reactor thread; one write (a pipelined round trip)
runs at a time in a worker thread, and whatever arrives meanwhile goes in the
next one. A lightly loaded worker thus writes each entry at once and a busy
one sends many per round trip: Redis round trips per page fall as load rises.
The frontier's sync (crawlproj/frontier/sync.py) and the Redis-backed stores
(crawlproj/pipelines) both write through this class.

A write that fails because Redis is out of reach (down, restarting, paused,
loading its data) is retried every retry_delay seconds with its entries put
back in front, in order: the failure is logged at once, again every
few seconds while it lasts, and its end once, for all the worker's writers
and tests together (crawlproj.redis.client.OutageLog); a writer may
start the server again between tries (on_unreachable: the embedded server).
A write that Redis refuses for a reason waiting cannot mend (crawlproj.redis.client.refusal:
out of memory, the crawl's state gone) is not retried: on_refused gets the
reason once, and the entries are dropped. They lose nothing: what a worker
holds stays leased in Redis and goes back to its queue when the lease expires.
While the crawl closes (stopping()), a page waiting for its write to an
unreachable server is let go, so that Ctrl-C ends a worker during an outage.

A server that dies may take its last writes with it even though it answered
them: with appendfsync everysec, up to a second or two of writes are not in
the AOF it restarts from. A writer whose writes may be applied twice
(replay=True: the frontier, whose script tests each URL against the DUE and
fences each release by its lease token) has the entries it wrote in the last
REPLAY_WINDOW seconds written again with the ones that failed, so that
nothing acknowledged before a crash is lost.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import redis
from twisted.internet import reactor, threads
from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

from crawlproj.redis.client import OutageLog, refusal

logger = logging.getLogger(__name__)

# How long close() waits for the last writes when Redis is out of reach (seconds)
CLOSE_TIMEOUT = 3.0
# A write out this long (seconds) is taken for a server that stopped answering
# (paused, hung), before the read timeout says so: a round trip takes
# milliseconds (docs/benchmarks.md).
STALLED = 1.0
# How far back (seconds) written entries are written again after a failure:
# the AOF's everysec loss (at most about 2 s, Redis' persistence docs) plus the
# time a worker may take to notice (its next write, at most LONGEST_SLEEP).
REPLAY_WINDOW = 5.0


def timed(fn, *args) -> tuple[Any, float]:
    """fn(*args) and the CPU seconds its thread spent on it: the
    ``<name>/thread_cpu_s`` stats say what each kind of work costs off the
    reactor thread (a profiler's share of samples does not: the threads'
    work costs more in a busy worker than alone, docs/benchmarks.md)."""
    start = time.thread_time()
    return fn(*args), time.thread_time() - start


class Waiting:
    """The entries waiting for a write, in order, each with the Deferred of
    whoever waits for it to be written (None: nobody)."""

    def __init__(self):
        self.entries: list = []
        self.waiters: list[Deferred | None] = []

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry, waiter: Deferred | None = None) -> None:
        self.entries.append(entry)
        self.waiters.append(waiter)

    def take(self, n: int | None) -> tuple[list, list]:
        """The first n entries (all: None) and their waiters, removed."""
        n = len(self.entries) if n is None else n
        entries, waiters = self.entries[:n], self.waiters[:n]
        del self.entries[:n], self.waiters[:n]
        return entries, waiters

    def put_back(self, entries: list, waiters: list) -> None:
        """In front, in their order: they go first in the next write."""
        self.entries[:0] = entries
        self.waiters[:0] = waiters

    def release(self) -> None:
        """Whoever waits is let go; the entries stay."""
        waiters, self.waiters = self.waiters, [None] * len(self.entries)
        release(waiters)

    def drop(self) -> None:
        self.release()
        self.entries, self.waiters = [], []


def release(waiters) -> None:
    for w in waiters:
        if w is not None and not w.called:
            w.callback(None)


class ReplayLog:
    """The entries written in the last REPLAY_WINDOW seconds, which a server
    that died may not have in the AOF it restarts from."""

    def __init__(self):
        self._written: deque = deque()   # (monotonic time, entries)

    def wrote(self, entries: list) -> None:
        now = time.monotonic()
        self._written.append((now, entries))
        while self._written[0][0] < now - REPLAY_WINDOW:
            self._written.popleft()

    def take(self) -> list:
        """The entries to write again, oldest first; the log is emptied."""
        now = time.monotonic()
        again = [e for t, entries in self._written if t >= now - REPLAY_WINDOW for e in entries]
        self._written.clear()
        return again


class Closing:
    """A writer's close: asked for (stopping), and the Deferred that fires
    once the last writes are done or given up after a timeout."""

    def __init__(self):
        self.stopping = False
        self.closed: Deferred | None = None
        self._timer = None

    def start(self, timeout: float, give_up: Callable[[], None]) -> None:
        self.stopping = True
        self.closed = Deferred()
        self._timer = reactor.callLater(timeout, give_up)

    @property
    def asked(self) -> bool:
        return self.closed is not None

    @property
    def done(self) -> bool:
        return self.closed is not None and self.closed.called

    def finish(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if not self.closed.called:
            self.closed.callback(None)


class Faults:
    """What a writer's failed writes mean: an outage (said through the
    worker's one OutageLog and retried; the server may be started again,
    on_unreachable, and what it may have lost is written again, the replay
    log) or a refusal waiting cannot mend (on_refused gets the reason once;
    nothing more is written)."""

    def __init__(self, name: str, stats, replay: bool,
                 on_refused: Callable[[str], None] | None,
                 on_unreachable: Callable[[], None] | None):
        self.name = name
        self.on_refused = on_refused
        self.on_unreachable = on_unreachable   # runs in the writer thread
        # where failures are said: the worker's one log (crawlproj/redis/guard.py)
        self.outage = OutageLog(stats)
        self.replay_log = ReplayLog() if replay else None
        self.refused: str | None = None   # why Redis refuses our writes for good
        self.failing = False              # the last write failed

    def unreachable(self) -> None:
        """In the writer thread: the server cannot be reached; have it
        started again before the retry."""
        if self.on_unreachable is not None:
            try:
                self.on_unreachable()
            except Exception as exc:  # said with the write's failure
                logger.warning("%s: could not start Redis again: %s", self.name, exc)

    def wrote(self, entries: list) -> None:
        if self.replay_log is not None and entries:
            self.replay_log.wrote(entries)
        if self.failing:
            self.outage.ok(self.name)
            self.failing = False

    def failed(self, message: str, retry_delay: float) -> list:
        """An outage: said; when it starts, the entries written in the last
        REPLAY_WINDOW seconds, to write again first (the server may have
        lost them)."""
        self.outage.failed(self.name, message, retry_delay)
        if self.failing:
            return []
        self.failing = True
        return self.replay_log.take() if self.replay_log is not None else []

    def refuse(self, reason: str) -> None:
        self.refused = reason
        if self.on_refused is not None:
            self.on_refused(reason)
        else:
            logger.error("%s: Redis refuses our writes: %s", self.name, reason)


class GroupCommit:
    """write(payload) runs in a thread; prepare(entries) turns the entries
    taken for one write into its payload on the reactor thread (None: nothing
    to write now); on_result(result) gets each write's result there."""

    def __init__(self, write: Callable[[Any], Any], name: str, stats=None,
                 max_batch: int | None = 2000, retry_delay: float = 1.0,
                 prepare: Callable[[list], Any] | None = None,
                 on_result: Callable[[Any], None] | None = None,
                 on_refused: Callable[[str], None] | None = None,
                 on_unreachable: Callable[[], None] | None = None,
                 replay: bool = False):
        self.write = write
        self.name = name
        self.stats = stats
        self.max_batch = max_batch
        self.retry_delay = retry_delay
        self.prepare = prepare
        self.on_result = on_result
        self.faults = Faults(name, stats, replay, on_refused, on_unreachable)
        self._waiting = Waiting()
        self._started: float | None = None   # the write out since (monotonic), if any
        self._again = False     # a write was asked for while one was out
        self._timer = None
        self._closing = Closing()

    @property
    def _busy(self) -> bool:
        return self._started is not None

    @property
    def refused(self) -> str | None:
        """Why Redis refuses our writes for good, if it does."""
        return self.faults.refused

    def add(self, entry, within: float = 0.0) -> None:
        """Write entry within `within` seconds, with whatever else comes by then."""
        self._waiting.add(entry)
        self.flush(within)

    def add_confirmed(self, entry) -> Deferred:
        """Write entry in this reactor turn's batch; the Deferred fires once it
        is written (a page's lease ends only once its links and metadata are
        stored: crawlproj/stores/pending.py)."""
        d = Deferred()
        self._waiting.add(entry, d)
        self.flush()
        return d

    def flush(self, within: float = 0.0) -> None:
        """Write within `within` seconds (0: next reactor turn, so that what
        this turn adds goes in the same write), even with no entries: prepare
        may find something to say."""
        if self.refused is not None or self._closing.done:
            self._waiting.drop()
            return
        if self._busy:
            self._again = True
            return
        timer = self._timer
        if timer is not None and timer.active():
            # while writes fail, the next try is the retry's, every retry_delay:
            # an entry added meanwhile does not bring it forward
            if self.faults.failing or timer.getTime() - reactor.seconds() <= within:
                return
            timer.cancel()
        self._timer = reactor.callLater(within, self._write)

    @property
    def failing(self) -> bool:
        """Redis failed or refused our last write (not merely slow)."""
        return self.faults.failing or self.refused is not None

    def stalled(self) -> bool:
        """Redis does not take our writes now: they fail, or the one out has
        been waiting for its answer for more than STALLED seconds."""
        return self.faults.failing or self.refused is not None or (
            self._busy and time.monotonic() - self._started > STALLED)

    @property
    def idle(self) -> bool:
        """Nothing under way and nothing waiting to be written."""
        return not self._busy and not self._waiting

    def _write(self) -> None:
        if self._busy:
            return
        if self.refused is not None or self._closing.done:
            self._waiting.drop()
            self._maybe_closed()
            return
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._again = False
        entries, waiters = self._waiting.take(self.max_batch)
        payload = self.prepare(entries) if self.prepare is not None else (entries or None)
        if payload is None:
            self._maybe_closed()
            return
        self._started = time.monotonic()
        d = threads.deferToThread(self._run, payload)
        d.addCallbacks(self._done, self._failed, callbackArgs=(waiters, entries),
                       errbackArgs=(entries, waiters))

    def _run(self, payload):
        """In the writer thread: the write and the CPU seconds it took; when
        the server cannot be reached, have it started again (on_unreachable)
        before the retry."""
        try:
            return timed(self.write, payload)
        except redis.ConnectionError:
            self.faults.unreachable()
            raise

    def _done(self, result, waiters, entries) -> None:
        self._started = None
        result, cpu = result
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/thread_cpu_s", cpu)
        if self._closing.done:  # given up at close: nobody waits for this any more
            return
        self.faults.wrote(entries)
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/redis_writes")
        release(waiters)
        if self.on_result is not None:
            self.on_result(result)
        if self._waiting or self._again or self._closing.asked:
            self._write()

    def _failed(self, failure, entries, waiters) -> None:
        self._started = None
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/redis_errors")
        self._waiting.put_back(entries, waiters)
        if self._closing.done:
            return
        reason = refusal(failure.value)
        if reason is not None:
            self._refuse(reason)
            return
        again = self.faults.failed(failure.getErrorMessage(), self.retry_delay)
        if again:
            self._waiting.put_back(again, [None] * len(again))
            if self.stats is not None:
                self.stats.inc_value(f"{self.name}/replayed", len(again))
        if self._closing.stopping:
            self._waiting.release()
        self._timer = reactor.callLater(self.retry_delay, self._write)

    def refuse(self, reason: str) -> None:
        """Write nothing more (another writer of the worker met reason): what
        waits is dropped, its waiters released."""
        if self.refused is None:
            self.faults.refused = reason
            self._waiting.drop()
            self._maybe_closed()

    def _refuse(self, reason: str) -> None:
        """Redis refuses our writes for good: say why (once), write no more."""
        self.faults.refused = reason  # before the waiters hear: they may write again
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/refused_entries", len(self._waiting))
        self._waiting.drop()
        self.faults.refuse(reason)
        self._maybe_closed()

    def stopping(self) -> None:
        """The crawl is closing: pages waiting for a write that Redis does not
        take now are not held back (their URLs stay leased in Redis, and go
        back to their queues if the write never comes)."""
        self._closing.stopping = True
        if self.faults.failing:
            self._waiting.release()

    def _give_up(self) -> None:
        if self._closing.done:
            return
        if self._waiting or self._busy:
            logger.error("%s: giving up at close: %d entries not written; the URLs they "
                         "concern stay leased in Redis and go back to their queues when "
                         "their leases expire", self.name, len(self._waiting))
        self._waiting.drop()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._closing.finish()

    def _maybe_closed(self) -> None:
        if self._closing.asked and not self._busy and not self._waiting and not self._closing.done:
            self._closing.finish()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> Deferred:
        """Fires when everything added is written, or after timeout seconds
        (given up: logged with the count of entries not written), or at once
        when Redis refuses our writes."""
        if not self._closing.asked:
            self._closing.start(timeout, self._give_up)
            if self.refused is not None:
                self._waiting.drop()
        if self._closing.done:
            return succeed(None)
        if not self._busy:
            self._write()
        return self._closing.closed


class GroupCall:
    """call(arg) returns a Deferred of fn's answer for arg: fn(args) gives one
    answer per arg, in a thread, one call at a time; what is asked while one
    is out, or in the same reactor turn, goes in the next. The per-page
    content-seen and near-duplicate tests ask Redis through this, a batch in
    one pipelined round trip: a thread hand-off per page would cost the
    reactor more than the tests themselves. A failed call fails
    every page of its batch alike; each handles it as it would its own.

    After a failure, calls fail at once, without asking, for retry_delay
    seconds; then one call tries again (and those made while it is out fail
    at once), until one gets through: a paused or unreachable server answers
    each call with a socket timeout, and pages waiting out one timeout per
    test kept a worker told to stop (Ctrl-C) for most of a minute. The tests'
    callers let a page through untested: its links are extracted, and the DUE
    still drops the URLs it has seen."""

    def __init__(self, fn: Callable[[list], list], max_batch: int = 256,
                 retry_delay: float = 1.0, name: str | None = None, stats=None):
        self.fn = fn
        self.name = name      # stats <name>/thread_cpu_s, with stats
        self.stats = stats
        self.max_batch = max_batch
        self.retry_delay = retry_delay
        self._asked: list[tuple[Any, Deferred]] = []
        self._busy = False
        self._timer = None
        self._failure: Failure | None = None   # of the last call, while calls fail
        self._failed_at = 0.0

    def __call__(self, arg) -> Deferred:
        d = Deferred()
        if self._failure is not None and (
                self._busy or time.monotonic() - self._failed_at < self.retry_delay):
            d.errback(self._failure)
            return d
        self._asked.append((arg, d))
        if not self._busy and self._timer is None:
            self._timer = reactor.callLater(0, self._call)
        return d

    def _call(self) -> None:
        self._timer = None
        batch, self._asked = self._asked[:self.max_batch], self._asked[self.max_batch:]
        self._busy = True
        d = threads.deferToThread(timed, self.fn, [arg for arg, _ in batch])
        d.addBoth(self._answered, batch)

    def _answered(self, answers, batch) -> None:
        self._busy = False
        if isinstance(answers, Failure):
            self._failure, self._failed_at = answers, time.monotonic()
            batch, self._asked = batch + self._asked, []
            for _, d in batch:
                d.errback(answers)
            return
        answers, cpu = answers
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/thread_cpu_s", cpu)
        self._failure = None
        for (_, d), answer in zip(batch, answers, strict=True):
            d.callback(answer)
        if self._asked and self._timer is None:
            self._call()
