"""Documents on their way from the workers to the one indexer, in Redis.

Every worker pushes the documents of the pages it fetched onto one list of
the crawl (Keyspace.index_queue); the indexer reads batches from its head,
writes them to the index, commits, and only then trims them off. An indexer that
dies between its commit and the trim leaves the batch to its successor, which
writes it again: writing a document is an upsert by its key, so a batch
written twice is in the index once.
"""

from __future__ import annotations

import logging
import time

from twisted.internet import reactor, threads
from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

# How often (seconds) a worker whose pages wait for the indexer looks at the
# hand-over list's length again.
LOOK_EVERY = 0.5
# How often (seconds) the wait is said again while it lasts.
SAY_EVERY = 60.0


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
    def pushed(_, replies: list) -> int:
        """The list's length after the push (RPUSH's reply); raises the error
        the push got, if any."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return max(replies, default=0)

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


class Backlog:
    """The hand-over list kept at most `limit` documents long (INDEX_MAX_WAITING).

    The indexer runs below the crawl's priority (crawlproj/search/process.py),
    so on a machine the workers keep busy it falls behind; in a long crawl it
    would fall ever further, each waiting document held in Redis. Past the
    limit, a page's item waits in the pipelines until the indexer has caught
    up: Scrapy then stops starting downloads (its scraper's
    SCRAPER_SLOT_MAX_ACTIVE_SIZE), which frees the cores the indexer needs.
    The search stays as close to the crawl as WebCrawler's real-time index
    promised [Pinkerton], and Redis holds a bounded backlog (docs/scale.md).

    The length is learnt from each push's reply, and while full looked at
    again every LOOK_EVERY seconds (one LLEN for every page waiting). Once
    the crawl starts closing nothing waits: the last pages are pushed
    whatever the length (nothing lost; the indexer takes them in its time).
    """

    def __init__(self, handover: HandOver, limit: int):
        self.handover = handover
        self.limit = limit
        self.waiting = 0           # the list's length, as last learnt
        self.closing = False
        self._pages: list[Deferred] = []   # items waiting for room
        self._look = None          # the next look, while full
        self._said = 0.0

    def pushed(self, length: int) -> None:
        self.waiting = length

    def full(self) -> bool:
        return 0 < self.limit < self.waiting and not self.closing

    def room(self) -> Deferred:
        """Fires once the list is at most `limit` long (or the crawl closes)."""
        d = Deferred()
        self._pages.append(d)
        if self._look is None:
            self._look = reactor.callLater(LOOK_EVERY, self._check)
        now = time.monotonic()
        if now - self._said >= SAY_EVERY:
            self._said = now
            logger.info("The indexer is %d documents behind (INDEX_MAX_WAITING %d): pages wait "
                        "for it before more are downloaded", self.waiting, self.limit)
        return d

    def _check(self) -> None:
        d = threads.deferToThread(self.handover.waiting)
        d.addCallbacks(self._looked, self._failed)

    def _looked(self, length: int) -> None:
        self.waiting = length
        self._next()

    def _failed(self, failure) -> None:
        # Redis out of reach: the stores' writes say so; look again
        self._next()

    def _next(self) -> None:
        if self.full():
            self._look = reactor.callLater(LOOK_EVERY, self._check)
            return
        self._look = None
        pages, self._pages = self._pages, []
        for d in pages:
            d.callback(None)

    def close(self) -> None:
        """The crawl is closing: no page waits any more."""
        self.closing = True
        if self._look is not None and self._look.active():
            self._look.cancel()
        self._next()
