"""RedisDupeFilter: the DUE as Scrapy's DUPEFILTER_CLASS.

The frontier runs the URL-seen test inside its enqueue script
(frontier/lua/sync.lua), so that a URL is marked seen exactly when it enters a
back queue. This class offers the same seen sets, with the same keys and the
crawl's agreed DUE configuration, to code that uses Scrapy's dupefilter
interface: Scrapy's own scheduler, tools, tests. ``request_seen`` costs one
round trip per request, as Scrapy's interface asks; :meth:`urls_seen` tests a
batch in one round trip, which is how the frontier works and how a tool
should call it (bench/due_bench.py measures both).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from scrapy.dupefilters import BaseDupeFilter

from crawlproj.due.canonical import InvalidURL
from crawlproj.due.urlseen import DueConfig, URLSeen
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)


class RedisDupeFilter(BaseDupeFilter):
    def __init__(self, due: URLSeen, debug: bool = False, stats=None):
        self.due = due
        self.debug = debug
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        redis = get_redis(s)
        due = URLSeen(redis, Keyspace.from_settings(s, redis), DueConfig.from_settings(s))
        return cls(due, s.getbool("DUPEFILTER_DEBUG"), crawler.stats)

    def urls_seen(self, urls: Iterable[str], mark: bool = True) -> list[bool]:
        """For each URL, whether it was seen before (marking the new ones seen,
        unless mark is false); one round trip for the whole batch. A URL that
        cannot be canonicalised counts as seen: it can never be fetched."""
        urls = list(urls)
        fps: dict[int, list[int]] = {}
        where: list[tuple[int, int] | None] = []
        for url in urls:
            try:
                fp = self.due.fingerprint(url)
            except InvalidURL as exc:
                logger.debug("DUE: %s refused: %s", url[:200], exc)
                where.append(None)
                continue
            p = self.due.keyspace.partition_of(host_of(url))
            group = fps.setdefault(p, [])
            where.append((p, len(group)))
            group.append(fp)
        new = self.due.check(fps, mark=mark) if fps else {}
        return [True if w is None else not new[w[0]][w[1]] for w in where]

    def request_seen(self, request) -> bool:
        seen = self.urls_seen([request.url])[0]
        if self.stats is not None:
            self.stats.inc_value("dupefilter/seen" if seen else "dupefilter/new")
        return seen

    def log(self, request, spider):
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request})
