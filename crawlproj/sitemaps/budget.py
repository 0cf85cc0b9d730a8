"""SITEMAP_MAX_FILES: how many sitemap files one host may have the crawl fetch.

A sitemap index names up to 50,000 sitemaps, each of which may be an index
again down to SITEMAP_MAX_DEPTH, and a robots.txt may name thousands: a
host could make a crawler fetch sitemaps without end (a trap of the kind
Heritrix bounds with its queue budgets). The budget is counted for the whole
crawl, whichever worker reads the robots.txt or the index, in one Redis hash
per partition (Keyspace.sitemap_files): HINCRBY by the files asked for, and
the part of them still under the limit is granted. Sitemap files refused are
counted (sitemaps/dropped/files_per_host); the host's pages are not.
"""

from __future__ import annotations

from crawlproj.redis.keyspace import Keyspace


class FileBudget:
    def __init__(self, redis, keyspace: Keyspace, limit: int):
        self.redis = redis
        self.keyspace = keyspace
        self.limit = limit  # 0: no budget

    def take(self, host: str, n: int) -> int:
        """How many of n more sitemap files of host may be fetched. Blocking
        (Redis): call it in a thread."""
        if self.limit <= 0 or n <= 0:
            return max(n, 0)
        key = self.keyspace.sitemap_files(self.keyspace.partition_of(host))
        total = self.redis.hincrby(key, host, n)
        return max(0, min(n, self.limit - (total - n)))
