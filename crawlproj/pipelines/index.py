"""IndexPipeline: every fetched HTML page handed over to the crawl's indexer.

Settings: INDEX_ENABLED, INDEX_HANDOVER_DELAY, INDEX_CRAWL_ID. A page item becomes a
document (crawlproj/search/document.py: content-seen duplicates, error pages
and non-HTML documents are not indexed) and is pushed, by the stores' group
commit (crawlproj/stores/commit.py), onto the crawl's hand-over list in Redis, from which the one indexer of the crawl
writes the index (crawlproj/search/indexer.py). Pages from every worker thus
land in one index, on whichever machine runs the indexer.
"""

from __future__ import annotations

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from crawlproj import internals
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.search.document import Document
from crawlproj.search.handover import Backlog, HandOver
from crawlproj.stores.commit import StoreCommit

PART = "index hand-over"


class IndexPipeline:
    def __init__(self, crawler):
        s = crawler.settings
        if not s.getbool("INDEX_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.delay = s.getfloat("INDEX_HANDOVER_DELAY")
        self.batch: StoreCommit | None = None
        self.backlog: Backlog | None = None

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def open_spider(self, spider=None):
        s = self.crawler.settings
        redis = get_redis(s)
        handover = HandOver(redis, Keyspace.of_index(s, redis))
        self.backlog = Backlog(handover, s.getint("INDEX_MAX_WAITING"))
        self.batch = StoreCommit.of(self.crawler)
        self.batch.part(PART, handover.queue, handover.pushed, self.backlog.pushed)
        internals.on_close_started(self.crawler, self.backlog.close)

    def process_item(self, item, spider=None):
        if self.batch is None or not hasattr(item, "get"):
            return item
        doc = Document.from_item(item)
        if doc is None:
            return item
        if self.backlog.full():
            return self._after_room(item, doc)
        self._hand_over(doc)
        return item

    def _hand_over(self, doc: Document) -> None:
        self.crawler.stats.inc_value("stores/index/documents")
        self.batch.add(PART, doc.pack(), within=self.delay)

    async def _after_room(self, item, doc: Document):
        """The indexer is INDEX_MAX_WAITING documents behind: the item waits
        (a coroutine, which Scrapy awaits), and downloads with it."""
        self.crawler.stats.inc_value("stores/index/waited_for_indexer")
        await maybe_deferred_to_future(self.backlog.room())
        self._hand_over(doc)
        return item

    async def close_spider(self, spider=None):
        if self.backlog is not None:
            self.backlog.close()
        if self.batch is not None:
            await maybe_deferred_to_future(self.batch.close())
