"""The Redis client and key layout the Redis-backed stores share."""

from __future__ import annotations

from crawlproj.frontier.frontier import Frontier
from crawlproj.redisconn import get_redis


def open_layout(settings) -> Frontier:
    """A Frontier object used for its key layout only (prefix, partition_of):
    the stores' keys live in the frontier's partitions, so one hash tag (one
    Redis Cluster slot) holds a host's queue, metadata and links."""
    return Frontier.from_settings(settings, get_redis(settings))
