"""Group commit of store writes to Redis, off the reactor thread.

Entries are added from the reactor thread; one write (a pipelined round trip)
runs at a time in a worker thread, and whatever arrives meanwhile makes the
next batch, as in the frontier's sync (crawlproj/frontier/scheduler.py). So a
lightly loaded worker writes each page at once and a busy one sends many
pages per round trip; Redis commands per page fall as load rises. Each add()
returns a Deferred that fires when its entry is committed, so a page's
request is finished (and its frontier lease released) only once its links
and metadata are in Redis. A failed write is retried, entries kept in order.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import reactor, threads
from twisted.internet.defer import Deferred, succeed

logger = logging.getLogger(__name__)


class GroupCommit:
    def __init__(self, write: Callable[[list], Any], name: str, stats=None,
                 max_batch: int = 2000, retry_delay: float = 1.0,
                 on_result: Callable[[Any], None] | None = None):
        self.write = write
        self.name = name
        self.stats = stats
        self.max_batch = max_batch
        self.retry_delay = retry_delay
        self.on_result = on_result
        self._entries: list = []
        self._waiters: list[Deferred] = []
        self._busy = False
        self._timer = None
        self._failing = False
        self._closed: Deferred | None = None
        self.batches = 0
        self.entries = 0

    def add(self, entry) -> Deferred:
        d = Deferred()
        self._entries.append(entry)
        self._waiters.append(d)
        if not self._busy and (self._timer is None or not self._timer.active()):
            # entries added in this reactor turn (a page's item, the next
            # responses) go in the same batch
            self._timer = reactor.callLater(0, self._flush)
        return d

    def _flush(self) -> None:
        if self._busy or not self._entries:
            self._maybe_closed()
            return
        entries, waiters = self._entries[: self.max_batch], self._waiters[: self.max_batch]
        del self._entries[: self.max_batch], self._waiters[: self.max_batch]
        self._busy = True
        d = threads.deferToThread(self.write, entries)
        d.addCallbacks(self._done, self._failed, callbackArgs=(entries, waiters),
                       errbackArgs=(entries, waiters))

    def _done(self, result, entries, waiters) -> None:
        self._busy = False
        self.batches += 1
        self.entries += len(entries)
        if self.stats is not None:
            self.stats.inc_value(f"stores/{self.name}/redis_batches")
        if self._failing:
            logger.info("%s: Redis writes work again", self.name)
            self._failing = False
        for w in waiters:
            w.callback(None)
        if self.on_result is not None:
            self.on_result(result)
        self._flush()

    def _failed(self, failure, entries, waiters) -> None:
        self._busy = False
        if not self._failing:
            logger.error("%s: Redis write failed (retrying every %.0f s): %s",
                         self.name, self.retry_delay, failure.getErrorMessage())
            self._failing = True
        if self.stats is not None:
            self.stats.inc_value(f"stores/{self.name}/redis_errors")
        self._entries[:0] = entries
        self._waiters[:0] = waiters
        if self._closed is not None and self._closed_tries <= 0:
            lost = len(self._entries)
            logger.error("%s: giving up at close: %d entries not stored", self.name, lost)
            for w in self._waiters:
                w.callback(None)
            self._entries, self._waiters = [], []
            self._maybe_closed()
            return
        if self._closed is not None:
            self._closed_tries -= 1
        self._timer = reactor.callLater(self.retry_delay, self._flush)

    def _maybe_closed(self) -> None:
        if self._closed is not None and not self._busy and not self._entries \
                and not self._closed.called:
            self._closed.callback(None)

    def close(self, tries: int = 5) -> Deferred:
        """Fires when everything added is written (or given up after `tries`
        failed retries, logged)."""
        if self._closed is None:
            self._closed = Deferred()
            self._closed_tries = tries
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if not self._busy and not self._entries:
            self._maybe_closed()
            return self._closed if not self._closed.called else succeed(None)
        if not self._busy:
            self._flush()
        return self._closed
