"""Heartbeat: a worker's share of the crawl-wide stats, and its sign of life.

Every MONITOR_INTERVAL seconds a worker sends one call of lua/heartbeat.lua:
how much each of its Scrapy counters (numbers only) grew since the last
heartbeat the server answered, which the script adds to the crawl's totals
and keeps in the worker's own record (state, rate, leases held).
The call rides the frontier's next sync (FrontierSync.carry), so it costs no
round trip of its own while the worker crawls, and an idle worker still sends
at most one a second. Growth is measured from the last answered heartbeat: a
heartbeat lost with a failed sync is counted in the next one, and one the
server applied but whose answer was lost (a timeout) is not counted twice: the
script counts from the worker's record, which holds what it applied.

The same call keeps the crawl's history (history.py): a sample of the
crawl's counters, the frontier as this worker's last syncs saw it, and its
own pages, in one field of each ring of MONITOR_HISTORY.

A worker whose heartbeat is older than GONE_AFTER intervals is gone (killed,
cut off): its leases go back to their queues when they expire, at most
FRONTIER_LEASE_TTL after its last heartbeat (crawlproj/monitor/status.py says
so); the heartbeats of the others forget it once that time has passed too.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task, threads

from crawlproj import internals
from crawlproj.components import registered
from crawlproj.errors import CrawlprojError
from crawlproj.monitor import history
from crawlproj.redis.client import get_redis, lua_script
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.common import crawllog_dir, worker_id
from crawlproj.stores.crawllog import log_path

logger = logging.getLogger(__name__)

HEARTBEAT_LUA = lua_script("crawlproj.monitor", "heartbeat.lua")
# A worker silent for this many intervals is shown as gone.
GONE_AFTER = 3
# Counters that are the worker's own business, not the crawl's: a sum of them
# over workers means nothing.
LOCAL = ("memusage/", "log_count/")


def monitor_interval(settings) -> float:
    """MONITOR_INTERVAL, checked: a number of seconds, 0 or more."""
    value = settings.get("MONITOR_INTERVAL")
    try:
        interval = float(value)
    except (TypeError, ValueError):
        interval = -1.0
    if not interval >= 0 or interval == float("inf"):
        raise CrawlprojError(f"MONITOR_INTERVAL must be a number of seconds, 0 (off) or more, "
                             f"not {value!r}")
    return interval


def counters(stats: dict) -> dict[str, int]:
    """The stats a heartbeat adds up: whole numbers (not flags, not times)."""
    return {k: v for k, v in stats.items()
            if isinstance(v, int) and not isinstance(v, bool) and not k.startswith(LOCAL)}


class RateMeter:
    """Pages and bytes per second between two ticks (the worker's "now")."""

    def __init__(self):
        self.rates = (0.0, 0.0)
        self._last = None               # (monotonic, pages, bytes) of the last tick

    def tick(self, stats) -> None:
        now = time.monotonic()
        pages = stats.get_value("figures/attempts", 0)
        size = stats.get_value("figures/document_bytes", 0)
        if self._last is not None:
            t, p, b = self._last
            if now > t:
                self.rates = ((pages - p) / (now - t), (size - b) / (now - t))
        self._last = (now, pages, size)


class CounterDeltas:
    """The worker's counters as each heartbeat reports them: what grew since
    the last answered one, as (name, now, then) triples, so that a
    heartbeat lost on the way is made good by the next one."""

    def __init__(self):
        self._acked: dict[str, int] = {}    # as of the last answered heartbeat
        self._sending: dict[str, int] | None = None

    def grown(self, now: dict[str, int]) -> list[tuple[str, int, int]]:
        """The triples to send now; kept until answered()."""
        self._sending = now
        return [(k, v, self._acked.get(k, 0)) for k, v in now.items()
                if v != self._acked.get(k, 0)]

    def answered(self) -> None:
        if self._sending is not None:
            self._acked, self._sending = self._sending, None


class Heartbeat:
    def __init__(self, crawler, redis, keyspace: Keyspace, interval: float, lease_ttl: float,
                 rings: list[tuple[int, int]] = ()):
        self.crawler = crawler
        self.rings = list(rings)
        self.stats = crawler.stats
        self.redis = redis
        self.keyspace = keyspace
        self.interval = interval
        self.lease_ttl = lease_ttl
        self.worker = ""
        self.state = "running"
        self.deltas = CounterDeltas()
        self._loop = None
        self._meter = RateMeter()
        self._log = ""
        self._reason = ""

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        interval = monitor_interval(s)
        if interval == 0:
            raise NotConfigured
        beat = cls(crawler, get_redis(s), Keyspace(s.get("CRAWL_ID"), 1), interval,
                   s.getfloat("FRONTIER_LEASE_TTL"), history.rings(s))
        if s.getbool("CRAWLLOG_ENABLED"):
            beat._log = str(crawllog_dir(s))
        crawler.signals.connect(beat.opened, signals.spider_opened)
        crawler.signals.connect(beat.closed, signals.spider_closed)
        return beat

    # -- what a heartbeat says ------------------------------------------------

    def _frontier(self):
        """The frontier's sync of this worker (crawlproj.components), None
        under another scheduler."""
        from crawlproj.frontier.sync import FrontierSync  # after Scrapy installed its reactor

        return registered(self.crawler, FrontierSync)

    def _record(self) -> dict[str, str]:
        sync = self._frontier()
        book = sync.book if sync is not None else None
        state = self.state
        if state == "running" and sync is not None and sync.paused:
            state = "paused"
        pages_s, bytes_s = self._meter.rates
        return {"state": state, "interval": f"{self.interval:g}",
                "lease_ttl": f"{self.lease_ttl:g}",
                "host": socket.gethostname(), "pid": str(os.getpid()),
                "leases": str(len(book) if book is not None else 0),
                "fetching": str(book.fetching if book is not None else 0),
                "pages_s": f"{pages_s:.3f}", "bytes_s": f"{bytes_s:.0f}",
                "log": self._log, "finish_reason": self._reason,
                # the crawl-wide jobs this worker ran last (crawlproj/ranker, crawlproj/search)
                "ranker_last_run": self._when("ranker/last_run"),
                "index_last_batch": self._when("index/last_batch")}

    def _gauges(self) -> dict[str, int]:
        """The frontier as this worker's last syncs saw it, summed over the
        partitions (each as of its last answer)."""
        sync = self._frontier()
        rs = list(sync.answers.results.values()) if sync is not None else []
        return {"queued": sum(r.queued for r in rs), "ready": sum(r.ready for r in rs),
                "waiting": sum(r.heap for r in rs), "leased": sum(r.leases for r in rs),
                "pending": sum(r.pending for r in rs),
                "backed_off": sum(r.backed_off for r in rs)} if rs else {}

    def _when(self, name: str) -> str:
        value = self.stats.get_value(name)
        return value.isoformat(timespec="seconds") if hasattr(value, "isoformat") else ""

    def command(self) -> tuple:
        """The heartbeat's call, and the counters it reports, kept until answered."""
        grown = self.deltas.grown(counters(self.stats.get_stats()))
        record = self._record()
        forget_ms = int((GONE_AFTER * self.interval + self.lease_ttl) * 1000)
        past = history.spec(self.rings, int(GONE_AFTER * self.interval * 1000),
                            self._gauges()) if self.rings else ""
        args = [self.worker, forget_ms, past, len(record)]
        for k, v in record.items():
            args += (k, v)
        for triple in grown:
            args += triple
        return ("EVAL", HEARTBEAT_LUA, 1, self.keyspace.monitor_prefix, *args)

    def answered(self, reply) -> None:
        if isinstance(reply, Exception):
            logger.warning("Heartbeat failed (sent again with the next): %s", reply)
            self.stats.inc_value("monitor/heartbeat_errors")
            return
        self.deltas.answered()

    # -- when -------------------------------------------------------------------

    def opened(self, spider=None):
        self.worker = worker_id(self.crawler)
        if self._log:
            self._log = str(log_path(Path(self._log),
                                     self.keyspace.crawl_id, self.worker))
        internals.on_close_started(self.crawler, self._closing)
        self._loop = task.LoopingCall(self.beat)
        # the first after one interval: a worker's start-up syncs (its crawl's
        # work, or the wait for it) go as they would without heartbeats
        self._loop.start(self.interval, now=False)

    def beat(self) -> None:
        self._meter.tick(self.stats)
        sync = self._frontier()  # None: another scheduler: a round trip of its own
        if sync is not None:
            # within a tenth of the interval: joins a sync under way if there is one
            sync.carry(self.command(), self.answered, within=min(1.0, self.interval / 10))
        else:
            command = self.command()
            d = threads.deferToThread(self.redis.execute_command, *command)
            d.addBoth(self.answered)

    def _closing(self) -> None:
        self.state = "closing"

    async def closed(self, spider=None, reason=None):
        """The last heartbeat, with the finish reason, in a round trip of its
        own: the frontier's sync has closed by now."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        from crawlproj.redis.guard import RedisGuard  # after Scrapy installed its reactor

        if RedisGuard.of(self.crawler).lost:
            return  # the crawl's state is gone from the server: no record to litter it with
        self.state = "closed"
        self._reason = reason or ""
        self._meter.tick(self.stats)
        self._meter.rates = (0.0, 0.0)
        command = self.command()

        def send():
            try:
                self.answered(self.redis.execute_command(*command))
            except Exception as exc:  # the crawl closes anyway; its log says so
                logger.warning("Heartbeat: the last one could not be sent: %s", exc)

        await maybe_deferred_to_future(threads.deferToThread(send))
