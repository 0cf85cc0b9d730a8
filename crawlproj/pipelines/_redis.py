"""The Redis client and key layout the Redis-backed stores share."""

from __future__ import annotations

from crawlproj.frontier.frontier import Frontier
from crawlproj.redisconn import get_redis


def open_layout(settings) -> Frontier:
    """A Frontier object used for its key layout only (prefix, partition_of):
    the stores' keys live in the frontier's partitions, so one hash tag (one
    Redis Cluster slot) holds a host's queue, metadata and links."""
    redis = get_redis(settings)
    return Frontier(redis, crawl_id=settings.get("CRAWL_ID", "default"),
                    partitions=settings.getint("FRONTIER_PARTITIONS", 1),
                    due_buckets=settings.getint("DUE_BUCKETS", 4096))
