"""LockedWork: a worker's share of a crawl-wide job, as a Scrapy extension.

The ranker and the indexer each run in at most one process of a crawl, the
holder of a Redis lock; every worker may be it. Each tick (a LoopingCall) runs
`work()` in a thread, one at a time, so the reactor keeps crawling and a long
run never overlaps the next tick; when the spider closes, `leave()` runs in a
thread (releasing the lock, writing what is left).
"""

from __future__ import annotations

import logging
import time

from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task, threads

logger = logging.getLogger(__name__)


class LockedWork:
    name = "work"             # in the error log line and the stats key <name>/errors
    wait_at_close = False     # leave() waits for a running work() to end first

    def __init__(self, crawler, tick: float):
        self.crawler = crawler
        self.stats = crawler.stats
        self.tick = tick
        self._loop = None
        self._busy = False

    def connect(self):
        self.crawler.signals.connect(self.opened, signals.spider_opened)
        self.crawler.signals.connect(self.closed, signals.spider_closed)
        return self

    def work(self):
        """In a thread, every tick."""
        raise NotImplementedError

    def leave(self):
        """In a thread, once, when the spider closes."""
        raise NotImplementedError

    def opened(self, spider=None):
        self._loop = task.LoopingCall(self._tick)
        self._loop.start(self.tick, now=False)

    async def closed(self, spider=None):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        try:
            if self.wait_at_close:
                await maybe_deferred_to_future(threads.deferToThread(self._leave_when_idle))
            elif not self._busy:
                await maybe_deferred_to_future(threads.deferToThread(self.leave))
        except Exception as exc:  # Redis out of reach at close: one line, the lock expires
            logger.error("%s: could not finish at close: %s", self.name.capitalize(), exc)
            self.stats.inc_value(f"{self.name}/errors")

    def _leave_when_idle(self):
        while self._busy:  # a tick's thread is working: let it end
            time.sleep(0.05)
        self.leave()

    def _tick(self):
        if self._busy:
            return None
        self._busy = True
        d = threads.deferToThread(self.work)
        d.addErrback(lambda f: logger.error("%s failed: %s", self.name.capitalize(), f.getErrorMessage())
                     or self.stats.inc_value(f"{self.name}/errors"))
        d.addBoth(self._idle)
        return None  # the LoopingCall must not wait for a long run

    def _idle(self, _):
        self._busy = False
