"""Group commit of a worker's writes to Redis, off the reactor thread.

Entries are added from the reactor thread; one write (a pipelined round trip)
runs at a time in a worker thread, and whatever arrives meanwhile goes in the
next one. A lightly loaded worker thus writes each entry at once and a busy
one sends many per round trip: Redis round trips per page fall as load rises.
The frontier's sync (crawlproj/frontier/sync.py) and the Redis-backed stores
(crawlproj/pipelines) both write through this class.

A failed write is retried every retry_delay seconds with its entries put back
in front, in order; the failure is logged once, and its end once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor, threads
from twisted.internet.defer import Deferred, succeed

logger = logging.getLogger(__name__)


class GroupCommit:
    """write(payload) runs in a thread; prepare(entries) turns the entries
    taken for one write into its payload on the reactor thread (None: nothing
    to write now); on_result(result) gets each write's result there."""

    def __init__(self, write: Callable[[Any], Any], name: str, stats=None,
                 max_batch: int | None = 2000, retry_delay: float = 1.0,
                 prepare: Callable[[list], Any] | None = None,
                 on_result: Callable[[Any], None] | None = None):
        self.write = write
        self.name = name
        self.stats = stats
        self.max_batch = max_batch
        self.retry_delay = retry_delay
        self.prepare = prepare
        self.on_result = on_result
        self._entries: list = []
        self._waiters: list[Deferred | None] = []  # beside _entries, one each
        self._busy = False
        self._again = False     # a write was asked for while one was out
        self._timer = None
        self._failing = False
        self._closed: Deferred | None = None
        self._close_tries = 0

    def add(self, entry, within: float = 0.0) -> None:
        """Write entry within `within` seconds, with whatever else comes by then."""
        self._entries.append(entry)
        self._waiters.append(None)
        self.flush(within)

    def add_confirmed(self, entry) -> Deferred:
        """Write entry in this reactor turn's batch; the Deferred fires once it
        is written (a page's request is finished only once its links and
        metadata are stored)."""
        d = Deferred()
        self._entries.append(entry)
        self._waiters.append(d)
        self.flush()
        return d

    def flush(self, within: float = 0.0) -> None:
        """Write within `within` seconds (0: next reactor turn, so that what
        this turn adds goes in the same write), even with no entries: prepare
        may find something to say."""
        if self._busy:
            self._again = True
            return
        timer = self._timer
        if timer is not None and timer.active():
            if timer.getTime() - reactor.seconds() <= within:
                return
            timer.cancel()
        self._timer = reactor.callLater(within, self._write)

    @property
    def idle(self) -> bool:
        """Nothing under way and nothing waiting to be written."""
        return not self._busy and not self._entries

    def _write(self) -> None:
        if self._busy:
            return
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._again = False
        n = len(self._entries) if self.max_batch is None else self.max_batch
        entries, waiters = self._entries[:n], self._waiters[:n]
        del self._entries[:n], self._waiters[:n]
        payload = self.prepare(entries) if self.prepare is not None else (entries or None)
        if payload is None:
            self._maybe_closed()
            return
        self._busy = True
        d = threads.deferToThread(self.write, payload)
        d.addCallbacks(self._done, self._failed, callbackArgs=(waiters,),
                       errbackArgs=(entries, waiters))

    def _done(self, result, waiters) -> None:
        self._busy = False
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/redis_writes")
        if self._failing:
            logger.info("%s: Redis writes work again", self.name)
            self._failing = False
        for w in waiters:
            if w is not None:
                w.callback(None)
        if self.on_result is not None:
            self.on_result(result)
        if self._entries or self._again or self._closed is not None:
            self._write()

    def _failed(self, failure, entries, waiters) -> None:
        self._busy = False
        if not self._failing:
            logger.error("%s: Redis write failed (retrying every %.0f s): %s",
                         self.name, self.retry_delay, failure.getErrorMessage())
            self._failing = True
        if self.stats is not None:
            self.stats.inc_value(f"{self.name}/redis_errors")
        self._entries[:0] = entries
        self._waiters[:0] = waiters
        if self._closed is not None:
            if self._close_tries <= 0:
                self._give_up()
                return
            self._close_tries -= 1
        self._timer = reactor.callLater(self.retry_delay, self._write)

    def _give_up(self) -> None:
        logger.error("%s: giving up at close: %d entries not written",
                     self.name, len(self._entries))
        for w in self._waiters:
            if w is not None:
                w.callback(None)
        self._entries, self._waiters = [], []
        self._maybe_closed()

    def _maybe_closed(self) -> None:
        if self._closed is not None and not self._busy and not self._entries \
                and not self._closed.called:
            self._closed.callback(None)

    def close(self, tries: int = 5) -> Deferred:
        """Fires when everything added is written (or, after `tries` failed
        retries, given up: logged with the count of entries lost)."""
        if self._closed is None:
            self._closed = Deferred()
            self._close_tries = tries
        if self._closed.called:
            return succeed(None)
        if not self._busy:
            self._write()
        return self._closed
