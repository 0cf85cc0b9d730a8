"""WarcPipeline: every fetched response, with its request, into WARC files.

Settings: WARC_ENABLED, WARC_MAX_SIZE, WARC_DIR, WARC_STORAGE (see
settings/base.py). Needs middlewares.record.RecordMiddleware.

Which record a response becomes is decided when it is known: a 2xx page is
held until its item comes through the pipelines, so that a page the
content-seen test marked as a duplicate (item["duplicate_of"], Mercator §3
step 4) is written as a ``revisit`` record (WARC 1.1 §6.7.2, profile
identical-payload-digest) instead of a second copy, and a page that said
noarchive (item["robots"]) gets the mark that keeps it out of replay
(crawlproj/stores/warc.py, ROBOTS_MARK); every other response
(redirects, errors, robots.txt) is written as it arrives. A held response
whose item never comes (the spider failed, or another spider) is written as
a plain response after WARC_PENDING_TIMEOUT seconds, or at close.

The records are made (warcio) and compressed on the reactor thread, where the
page's bytes are, in the reactor turn after they come; the files are
written in one dedicated thread (a file is appended in order), so the
reactor never waits for the disk, and in batches: what arrives while a
batch is being written goes into the next one, one thread hand-off and one
write() for the lot (group commit, as the Redis-backed stores write:
crawlproj/redis/groupcommit.py). Made in that thread too, the records would cost
the worker more CPU: the thread would take the GIL from the reactor and give
it back for every hash, compression and write. Two kinds
are still made there: a revisit, which is checked against page metadata
first (a Redis round trip, _verified), and a body over THREAD_BODY bytes,
whose compression would hold the reactor (ISA-L lets other threads run while
it works). Nothing on the page's path waits for the writes: each is held
for the page's URL (crawlproj/stores/pending.py), and its lease ends only
once its records are in the file.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque

from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor, task, threads
from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from crawlproj.due.contentseen import DUPLICATE_CAPTURED
from crawlproj.pipelines.guard import FINISH_REASON, StoreGuard, warn_without_recorder
from crawlproj.redis.groupcommit import timed
from crawlproj.stores.common import warc_dir, worker_id
from crawlproj.stores.exchange import Exchange
from crawlproj.stores.pending import PendingWrites
from crawlproj.stores.signals import exchange_recorded
from crawlproj.stores.storage import make_storage
from crawlproj.stores.warc import NOT_MODIFIED_PROFILE, WarcWriter, recover, warc_date

logger = logging.getLogger(__name__)
STORE = "content store"
# A body this large (bytes) is compressed in the writer thread, not on the
# reactor: ISA-L takes about 4 ms a megabyte, a reactor turn's worth.
THREAD_BODY = 1 << 20


def duplicate_target(value) -> dict | None:
    """The earlier capture a duplicate refers to, from item["duplicate_of"]:
    a URL string, a (url, digest[, date]) sequence or a dict with "url" and
    optionally "date" (ISO 8601) / "digest"."""
    if not value:
        return None
    if isinstance(value, str):
        return {"url": value}
    if isinstance(value, dict):
        return {"url": value.get("url"), "date": value.get("date")} if value.get("url") else None
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
        date = value[2] if len(value) > 2 and isinstance(value[2], str) else None
        return {"url": value[0], "date": date}
    return None


def _dated(exchange: Exchange, revisit: dict | None) -> dict | None:
    """The revisit target with the WARC-Date of the response record holding
    its payload: the start of the fetch the content-seen test recorded for
    the first copy (crawlproj.due.contentseen), which is how that record is
    dated. None when that capture is not known: the page is then stored in
    full, since a revisit must name the record it refers to exactly."""
    if revisit is None:
        return None
    if not revisit.get("date"):
        started = exchange.request.meta.get(DUPLICATE_CAPTURED) if exchange.request is not None else None
        if started is None:
            return None
        revisit["date"] = warc_date(started)
    return revisit


class HeldResponses:
    """2xx responses held until their item comes through the pipelines, by
    final URL, first come first taken; one held past `timeout` seconds is
    let go (its item never came)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._by_url: dict[str, deque] = defaultdict(deque)

    def hold(self, exchange: Exchange) -> None:
        self._by_url[exchange.url].append((exchange, time.monotonic()))

    def take(self, url) -> Exchange | None:
        queue = self._by_url.get(url)
        if not queue:
            return None
        exchange, _ = queue.popleft()
        if not queue:
            del self._by_url[url]
        return exchange

    def expired(self) -> list[Exchange]:
        """Those held past the timeout, taken."""
        cutoff = time.monotonic() - self.timeout
        out = []
        for url in [u for u, q in self._by_url.items() if q and q[0][1] < cutoff]:
            while self._by_url.get(url) and self._by_url[url][0][1] < cutoff:
                out.append(self.take(url))
        return out

    def take_all(self) -> list[Exchange]:
        held = [e for q in self._by_url.values() for e, _ in q]
        self._by_url.clear()
        return held


class WarcBatches:
    """The records of the exchanges handed over, made on the reactor thread
    and written in batches by the one writer thread, in the order handed
    over (group commit: what comes while a batch is written, or within
    WARC_GATHER seconds while a response is on its way, joins the next)."""

    def __init__(self, gather: float, stats, guard: StoreGuard, spool):
        self.gather = gather
        self.stats, self.guard, self.spool = stats, guard, spool
        self.writer: WarcWriter | None = None
        self.pool: ThreadPool | None = None
        self.pagemeta = None  # to check revisits (see _verified)
        # (exchange, revisit, deferred) waiting for the next batch; one batch
        # out at a time (in the writer thread), so the file keeps their order.
        # A revisit is checked there (_verified), against page metadata.
        self._queue: list[tuple[Exchange, dict | None, Deferred]] = []
        self._unwritten: set[Deferred] = set()  # writes handed over, not done
        self._busy = False
        self._since = 0.0  # when the queue's first exchange came (time.monotonic)
        self._timer = None  # the gathered batch's flush, while it waits
        # transfers in progress (Scrapy's request_reached/left_downloader
        # signals): while there are none, no response is on its way to join a batch
        self.transfers = 0

    def open(self, writer: WarcWriter, pagemeta) -> None:
        self.writer, self.pagemeta = writer, pagemeta
        self.pool = ThreadPool(minthreads=1, maxthreads=1, name="warc-writer")
        self.pool.start()

    def stop_pool(self) -> None:
        if self.pool is not None and self.pool.started:
            self.pool.stop()

    async def close(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()  # closing: what is gathered goes now
            self._flush()
        # every record handed over is in the file before it closes (a revisit
        # may still wait for its first copy's metadata, which the page
        # metadata pipeline is writing as it closes)
        while self._unwritten:
            await maybe_deferred_to_future(DeferredList(list(self._unwritten)))
        if self.pool is not None:
            try:
                await maybe_deferred_to_future(
                    threads.deferToThreadPool(reactor, self.pool, self.writer.close))
            except OSError as exc:
                self.guard.fail(STORE, self.spool, exc)
            finally:
                self.pool.stop()
                self.pool = None

    def track(self, d: Deferred) -> Deferred:
        """d is a write not done yet: the file is not closed before it is."""
        self._unwritten.add(d)
        d.addBoth(self._untrack, d)
        return d

    def _untrack(self, result, d: Deferred):
        self._unwritten.discard(d)
        return result

    def write(self, exchange: Exchange, revisit: dict | None = None) -> Deferred:
        """Fires once the exchange's records are in the file (or failed)."""
        if self.pool is None:
            return succeed(None)
        d = self.track(Deferred())
        if not self._queue:
            self._since = time.monotonic()
        self._queue.append((exchange, revisit, d))
        if not self._busy:
            self._busy = True
            # whatever is recorded within WARC_GATHER seconds joins the batch
            self._timer = reactor.callLater(self._window(self.gather), self._flush)
        elif self._timer is not None and not self.transfers:
            self._timer.reset(0)  # the last response on its way has come
        return d

    def _window(self, wait: float) -> float:
        """How long the batch still gathers: not at all when no response is
        on its way to join it. A crawl with one request at a time would
        otherwise wait the window for every page, whose URL's lease ends only
        once its records are written."""
        return wait if wait > 0 and self.transfers else 0

    def _flush(self) -> None:
        self._timer = None
        batch, self._queue = self._queue, []
        if not batch or self.pool is None:
            self._busy = False
            for _, _, d in batch:
                d.callback(None)
            return
        try:
            items, cpu = timed(self._made, batch)
        except Exception:
            self._batch_failed(Failure(), batch)
            return
        self.stats.inc_value("warc/records_cpu_s", cpu)
        w = threads.deferToThreadPool(reactor, self.pool, timed, self._write_batch, items)
        w.addCallbacks(self._written, self._batch_failed, callbackArgs=(batch,),
                       errbackArgs=(batch,))

    def _made(self, batch: list) -> list[tuple[Exchange, dict | None, list | None]]:
        """On the reactor thread: the records of the batch's exchanges, but
        for those made in the writer thread (None)."""
        return [(e, r, None if self._in_thread(e, r) else self.writer.members(e, r))
                for e, r, _ in batch]

    def _in_thread(self, exchange: Exchange, revisit: dict | None) -> bool:
        """Whether the exchange's records are made in the writer thread."""
        return (len(exchange.body) > THREAD_BODY
                or (revisit is not None and self.pagemeta is not None
                    and not revisit.get("profile")))

    def _verified(self, exchange: Exchange, revisit: dict | None) -> dict | None:
        """In the writer thread: the revisit target if its payload is this
        one's, else None (the page is stored in full).

        A revisit record of profile identical-payload-digest promises the
        same payload bytes as the record it refers to. The content-seen test
        may compare decoded bodies, or near-duplicates (CONTENTSEEN_NEAR), so
        the claim is checked against the page metadata of the first URL (its
        last 2xx payload digest, written when its response came). Without
        page metadata the content-seen test is trusted."""
        if revisit is None or self.pagemeta is None or revisit.get("profile"):
            return revisit
        try:
            meta = self.pagemeta.get(revisit["url"])
        except Exception as exc:
            logger.warning("page metadata of %s unavailable (%s): %s stored in full",
                           revisit["url"], exc, exchange.url)
            return None
        if meta is None or meta.digest != exchange.digest64.hex():
            return None
        return revisit

    def _write_batch(self, items: list[tuple[Exchange, dict | None, list | None]]) -> list:
        """In the writer thread: the records not made yet made (a revisit
        checked first), the batch written; (error or None, revisit written)
        for each exchange."""
        done = []
        for exchange, revisit, members in items:
            if members is None:
                revisit = self._verified(exchange, revisit)
                members = self.writer.members(exchange, revisit)
            done.append((revisit, members))
        errors = self.writer.append_many([m for _, m in done])
        return [(error, r) for error, (r, _) in zip(errors, done)]

    def _written(self, results, batch) -> None:
        results, cpu = results  # timed(): with the CPU seconds of its thread
        self.stats.inc_value("warc/batches")
        self.stats.inc_value("warc/thread_cpu_s", cpu)
        for (exchange, asked, d), (error, revisit) in zip(batch, results):
            if asked and not revisit:
                self.stats.inc_value("warc/duplicates_stored_in_full")
            if error is None:
                self.stats.inc_value("warc/revisits" if revisit else "warc/responses")
            else:
                self.guard.fail(STORE, self.spool, error, [exchange.request])
            d.callback(None)
        self._next()

    def _batch_failed(self, failure, batch) -> None:
        logger.error("WARC records for %d responses not written: %s", len(batch),
                     failure.getTraceback())
        self.stats.inc_value("warc/errors", len(batch))
        for _, _, d in batch:
            d.callback(None)
        self._next()

    def _next(self) -> None:
        if self._queue:
            # what came while the last batch was written gathers for the rest
            # of its WARC_GATHER seconds
            wait = self._window(self._since + self.gather - time.monotonic())
            if wait > 0:
                self._timer = reactor.callLater(wait, self._flush)
            else:
                self._flush()
        else:
            self._busy = False


class WarcPipeline:
    def __init__(self, crawler):
        s = crawler.settings
        if not s.getbool("WARC_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.crawl_id = s.get("CRAWL_ID")
        self.storage = make_storage(s.get("WARC_STORAGE"), warc_dir(s))
        self.max_size = s.getint("WARC_MAX_SIZE")
        self.user_agent = s.get("USER_AGENT")
        self.guard = StoreGuard.of(crawler)
        self.writes = PendingWrites.of(crawler)
        self.held = HeldResponses(s.getfloat("WARC_PENDING_TIMEOUT"))
        self.batches = WarcBatches(s.getfloat("WARC_GATHER"), self.stats, self.guard,
                                   self.storage.spool)
        self._sweeper = None
        crawler.signals.connect(self._reached, signals.request_reached_downloader)
        crawler.signals.connect(self._left, signals.request_left_downloader)
        crawler.signals.connect(self._recorded, exchange_recorded)
        crawler.signals.connect(self._item_gone, signals.item_dropped)
        crawler.signals.connect(self._item_gone, signals.item_error)
        crawler.signals.connect(self._spider_error, signals.spider_error)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def _reached(self) -> None:
        self.batches.transfers += 1

    def _left(self) -> None:
        self.batches.transfers -= 1

    # -- lifecycle ---------------------------------------------------------------

    def open_spider(self, spider=None):
        warn_without_recorder(self.crawler, STORE)
        writer = WarcWriter(self.storage, self.crawl_id, worker_id(self.crawler),
                            self.max_size, info={"http-header-user-agent": self.user_agent,
                                                 "robots": "obey" if self.crawler.settings
                                                 .getbool("ROBOTSTXT_OBEY") else "ignore"})
        try:
            self.stats.inc_value("warc/recovered_files", len(recover(self.storage)))
            writer.open()  # fail now, before anything is fetched, if we cannot write
        except OSError as exc:
            self.guard.failed.setdefault(STORE, str(exc))
            logger.error("%s: cannot write %s: %s. The crawl does not start (finish reason %s).",
                         STORE, self.storage.spool, exc.strerror or exc, FINISH_REASON)
            self.stats.inc_value(f"stores/{STORE}/write_errors")
            raise CloseSpider(FINISH_REASON) from None
        s = self.crawler.settings
        pagemeta = None
        if s.getbool("PAGEMETA_ENABLED"):
            from crawlproj.redis.client import get_redis
            from crawlproj.redis.keyspace import Keyspace
            from crawlproj.stores.pagemeta import PageMetaStore
            redis = get_redis(s)
            pagemeta = PageMetaStore(redis, Keyspace.from_settings(s, redis),
                                     s.getint("PAGEMETA_BUCKETS"))
        self.batches.open(writer, pagemeta)
        # Ctrl-C while the crawl starts stops the reactor without closing the
        # spider: the writer's thread must not then keep the process alive
        # (the file left open is recovered by the next worker, see recover())
        reactor.addSystemEventTrigger("during", "shutdown", self.batches.stop_pool)
        self._sweeper = task.LoopingCall(self._sweep)
        self._sweeper.start(min(5.0, max(0.1, self.held.timeout / 2)), now=False)

    async def close_spider(self, spider=None):
        if self._sweeper is not None and self._sweeper.running:
            self._sweeper.stop()
        for exchange in self.held.take_all():
            self.batches.write(exchange)
        await self.batches.close()
        for where in self.batches.writer.published if self.batches.writer else ():
            logger.debug("WARC published: %s", where)

    # -- responses -----------------------------------------------------------------

    def _recorded(self, exchange: Exchange):
        if self.batches.pool is None:
            return
        if 200 <= exchange.status < 300 and not exchange.robots:
            self.held.hold(exchange)
            return
        revisit = None
        if exchange.status == 304:  # a conditional GET's answer: unchanged
            revisit = {"url": exchange.url, "profile": NOT_MODIFIED_PROFILE}
        self.writes.hold(exchange.url, self.batches.write(exchange, revisit))

    def process_item(self, item, spider=None):
        exchange = self.held.take(item.get("final_url")) if hasattr(item, "get") else None
        if exchange is None:
            return item
        if "noarchive" in (item.get("robots") or ()):
            exchange.noarchive = True  # kept, marked, out of the CDXJ index
        target = duplicate_target(item.get("duplicate_of"))
        revisit = _dated(exchange, target)
        if target is not None and revisit is None:
            self.stats.inc_value("warc/duplicates_stored_in_full")
        first = self.writes.stored(revisit["url"]) if revisit is not None else None
        if first is None:
            written = self.batches.write(exchange, revisit)
        else:
            # the first copy's page metadata, which the revisit is checked
            # against, is on its way from this worker: write after it
            written = self.batches.track(
                first.addCallback(lambda _: self.batches.write(exchange, revisit)))
        self.writes.hold(exchange.url, written)
        return item

    def _item_gone(self, item, response, spider=None, **kwargs):
        exchange = self.held.take(getattr(response, "url", None))
        if exchange is not None:
            revisit = _dated(exchange, duplicate_target(item.get("duplicate_of"))
                             if hasattr(item, "get") else None)
            self.writes.hold(exchange.url, self.batches.write(exchange, revisit))

    def _spider_error(self, failure, response, spider=None):
        exchange = self.held.take(getattr(response, "url", None))
        if exchange is not None:
            self.writes.hold(exchange.url, self.batches.write(exchange))

    def _sweep(self):
        for exchange in self.held.expired():
            self.batches.write(exchange)
