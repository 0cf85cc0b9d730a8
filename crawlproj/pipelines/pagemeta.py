"""PageMetaPipeline: the fetch history of every URL, in Redis.

Settings: PAGEMETA_ENABLED, PAGEMETA_BUCKETS. Needs the record middleware:
every response updates its URL's history (including redirects, 404s and
robots.txt, so the fetch counts agree with what the servers saw), batched by
the stores' group commit (one EVALSHA per partition per batch, see
stores/pagemeta.py, in the round trip of the other stores' writes:
crawlproj/stores/commit.py).
The response goes on at once; the URL's lease waits for the write
(crawlproj/stores/pending.py). A parsed page that names another URL as its
canonical one (item["canonical"]) adds it to its metadata, in the same way.
"""

from __future__ import annotations

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from crawlproj.pipelines.guard import warn_without_recorder
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.commit import StoreCommit
from crawlproj.stores.pagemeta import PageMetaStore
from crawlproj.stores.pending import PendingWrites
from crawlproj.stores.signals import exchange_recorded

STORE = "page metadata"


class PageMetaPipeline:
    def __init__(self, crawler):
        s = crawler.settings
        if not s.getbool("PAGEMETA_ENABLED"):
            raise NotConfigured
        self.crawler = crawler
        self.buckets = s.getint("PAGEMETA_BUCKETS")
        self.store: PageMetaStore | None = None
        self.batch: StoreCommit | None = None
        self.writes = PendingWrites.of(crawler)
        # fetches from the signal, canonical URLs from the items
        crawler.signals.connect(self._recorded, exchange_recorded)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def open_spider(self, spider=None):
        warn_without_recorder(self.crawler, STORE)
        s = self.crawler.settings
        redis = get_redis(s)
        self.store = PageMetaStore(redis, Keyspace.from_settings(s, redis), self.buckets)
        self.batch = StoreCommit.of(self.crawler)
        self.batch.part(STORE, self.store.queue, self.store.created)

    def _recorded(self, exchange):
        if self.batch is None:
            return
        self.crawler.stats.inc_value("stores/pagemeta/fetches")
        self.writes.hold(exchange.url, self.batch.add_confirmed(STORE, self.store.entry(exchange)))

    def process_item(self, item, spider=None):
        canonical = item.get("canonical") if hasattr(item, "get") else None
        if canonical and self.batch is not None:
            url = item.get("final_url") or item.get("url")
            entry = self.store.canonical_entry(url, item.get("fetch_time") or 0.0, canonical)
            if entry is not None:
                self.crawler.stats.inc_value("stores/pagemeta/canonicals")
                self.writes.hold(url, self.batch.add_confirmed(STORE, entry))
        return item

    async def close_spider(self, spider=None):
        if self.batch is not None:
            await maybe_deferred_to_future(self.batch.close())
