"""LinkStorePipeline: every parsed page's out-links into the link store.

Settings: LINKSTORE_ENABLED, LINKSTORE_SEGMENT_PAGES, LINKSTORE_DIR. The
source of a page's links is the URL its content came from (item
["final_url"]); the targets are item["outlinks"], all of them, in scope or
not (the graph the ranker sees is the web's, not the crawl's). Pages go to
Redis by the stores' group commit (one RPUSH per partition per batch, in the
round trip of the other stores' writes: crawlproj/stores/commit.py), each
write held for the page's URL, whose lease waits for it
(crawlproj/stores/pending.py);
a partition whose
working set passes LINKSTORE_SEGMENT_PAGES is compacted to a Parquet segment
by a child process (stores/compaction.py). A segment that cannot be written stops
the crawl (nothing is lost: the pages stay in Redis).
"""

from __future__ import annotations

import logging

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

from crawlproj.pipelines.guard import StoreGuard
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.commit import StoreCommit
from crawlproj.stores.compaction import Compactor
from crawlproj.stores.linkstore import LinkStore, encode_page
from crawlproj.stores.pending import PendingWrites

logger = logging.getLogger(__name__)
STORE = "link store"


class LinkStorePipeline:
    def __init__(self, crawler):
        s = crawler.settings
        if not s.getbool("LINKSTORE_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.stats = crawler.stats
        self.segment_pages = s.getint("LINKSTORE_SEGMENT_PAGES")
        self.directory = LinkStore.directory_of(s, s.get("CRAWL_ID"))
        self.store: LinkStore | None = None
        self.batch: StoreCommit | None = None
        self.compactor: Compactor | None = None
        self._compacting: set[int] = set()
        self._running: list = []
        self.writes = PendingWrites.of(crawler)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def open_spider(self, spider=None):
        s = self.crawler.settings
        redis = get_redis(s)
        self.store = LinkStore(redis, Keyspace.from_settings(s, redis), self.directory,
                               self.segment_pages)
        self.compactor = Compactor(s)
        self.batch = StoreCommit.of(self.crawler)
        self.batch.part(STORE, self.store.queue, self.store.due, on_result=self._maybe_compact)

    def process_item(self, item, spider=None):
        if self.batch is None or not hasattr(item, "get") or item.get("outlinks") is None:
            return item
        source = item.get("final_url") or item.get("url")
        value, edges = encode_page(source, item.get("fetch_time") or 0.0, item["outlinks"],
                                   item.get("duplicate_of"))
        self.stats.inc_value("stores/links/pages")
        self.stats.inc_value("stores/links/edges", edges)
        self.writes.hold(source, self.batch.add_confirmed(STORE, (self.store.partition_of(source), value)))
        return item

    def _maybe_compact(self, due: list[int]) -> None:
        for p in due:
            if p in self._compacting:
                continue
            self._compacting.add(p)
            d = threads.deferToThread(self.compactor.compact, p)
            self._running.append(d)
            d.addCallbacks(self._compacted, self._compact_failed, callbackArgs=(p,),
                           errbackArgs=(p,))
            d.addBoth(lambda _, d=d: self._running.remove(d))

    def _compacted(self, done, p):
        segments, moved = done
        self._compacting.discard(p)
        if moved:
            self.stats.inc_value("stores/links/segments", segments)
            self.stats.inc_value("stores/links/compacted_pages", moved)
            # Pages appended after the child last looked may already fill
            # another segment: compact again until the working set is below
            # one, so that it stays bounded when compaction lags behind the
            # crawl (and the pages of a short crawl reach their segments at
            # close).
            self._maybe_compact([p])

    def _compact_failed(self, failure, p):
        self._compacting.discard(p)
        if failure.check(OSError):
            StoreGuard.of(self.crawler).fail(STORE, self.directory, failure.value)
        else:
            logger.error("Link store: compaction of partition %d failed (pages stay in "
                         "Redis): %s", p, failure.getErrorMessage())

    async def close_spider(self, spider=None):
        if self.batch is not None:
            await maybe_deferred_to_future(self.batch.close())
        while self._running:  # a compaction may start the next one
            await maybe_deferred_to_future(self._running[0])
