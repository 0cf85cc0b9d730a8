"""RedisDupeFilter: the DUE as Scrapy's DUPEFILTER_CLASS.

The frontier runs the URL-seen test inside its enqueue script (lua/sync.lua),
so a URL is marked seen exactly when it enters a back queue. This class gives
the same shared seen sets to code that uses Scrapy's dupefilter interface
(Scrapy's own scheduler, tools, tests); it writes the same keys.
"""

from __future__ import annotations

import logging

from scrapy.dupefilters import BaseDupeFilter

from crawlproj.due.fingerprint import bucket_of, url_fingerprint
from crawlproj.frontier.admission import host_of
from crawlproj.frontier.frontier import Frontier
from crawlproj.redisconn import get_redis

logger = logging.getLogger(__name__)


class RedisDupeFilter(BaseDupeFilter):
    def __init__(self, frontier: Frontier, debug: bool = False):
        self.frontier = frontier
        self.debug = debug

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        return cls(Frontier.from_settings(s, get_redis(s)), s.getbool("DUPEFILTER_DEBUG"))

    def seen_key(self, url: str) -> tuple[str, int]:
        fp = url_fingerprint(url)
        host = host_of(url)
        p = self.frontier.partition_of(host)
        return f"{self.frontier.prefix(p)}seen:{bucket_of(fp, self.frontier.due_buckets)}", fp

    def request_seen(self, request) -> bool:
        key, fp = self.seen_key(request.url)
        return self.frontier.redis.sadd(key, fp) == 0

    def log(self, request, spider):
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
