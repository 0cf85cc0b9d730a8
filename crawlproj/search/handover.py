"""Documents on their way from the workers to the one indexer, in Redis.

Every worker pushes the documents of the pages it fetched onto one list of
the crawl (Keyspace.index_queue); the indexer reads batches from its head,
writes them to the index, commits, and only then trims them off. An indexer that
dies between its commit and the trim leaves the batch to its successor, which
writes it again: writing a document is an upsert by its key, so a batch
written twice is in the index once.
"""

from __future__ import annotations


class HandOver:
    def __init__(self, redis, keyspace):
        self.redis = redis
        self.key = keyspace.index_queue

    def push(self, packed: list[bytes]) -> None:
        """Workers: append packed documents (one round trip)."""
        if packed:
            self.redis.rpush(self.key, *packed)

    def queue(self, pipe, packed: list[bytes]) -> None:
        """push's command added to pipe (a StoreCommit's round trip, shared
        with the other stores)."""
        if packed:
            pipe.rpush(self.key, *packed)

    @staticmethod
    def pushed(_, replies: list) -> None:
        """Raises the error the push got, if any."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply

    def peek(self, n: int, after: int = 0) -> list[bytes]:
        """The indexer: n documents after the first `after`, left in place."""
        return self.redis.lrange(self.key, after, after + n - 1)

    def head(self) -> bytes | None:
        """The indexer: the first document waiting. (LRANGE, not LINDEX: the
        workers' ACL user of docs/deploy.md needs no other command.)"""
        first = self.redis.lrange(self.key, 0, 0)
        return first[0] if first else None

    def done(self, n: int) -> None:
        """The indexer: the first n documents are in the index."""
        if n:
            self.redis.ltrim(self.key, n, -1)

    def waiting(self) -> int:
        return self.redis.llen(self.key)
