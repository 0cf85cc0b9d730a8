"""The lease book: where each of this worker's leases is, and what its end sends.

The frontier leases a host to one worker at a time with its best URL
(Mercator §3.1: the thread that removed the host's queue from the heap).
This worker's leases live here, each in one state:

    QUEUED    leased, waiting for the engine to pull it (best first)
    FETCHING  handed to the engine, download not ended; the lease holds the
              URL's host (its download may be the host's robots.txt, fetched
              on the page's behalf: then the page goes back, see returned())
    ENDED     downloaded, its host released with its politeness wait; the
              URL stays leased, pending, until the engine is done with its page

Each lease also has a deadline on this worker's clock: the frontier's own
(FRONTIER_LEASE_TTL from when the sync that granted or last renewed it was
sent, so never later than the server's). Past it the frontier may have given
the URL and its host to another worker: a lease known to be past its
deadline is not downloaded, but forgotten (docs/frontier.md, "When Redis
fails").

Every decision about a lease's end is here, as the Release tuples
(frontier.Release) that sync.lua applies: a URL's lease ends only when its
page is done, so a worker that dies mid-page loses nothing; its host's lease
ends at the download's end, so the host's politeness wait runs from there.

No Scrapy and no Redis: tests/test_leases.py drives it directly.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from crawlproj.frontier.frontier import URL, Host, Leased, Release
from crawlproj.frontier.politeness import Download

QUEUED, FETCHING, ENDED = "queued", "fetching", "ended"


@dataclass(frozen=True)
class Schedule:
    """What becomes of a page in a continuous crawl when it is done: due again
    in `due` seconds with `payload` (its request and recrawl state), or, with
    no payload, out of the schedule (gone); its change-rate bucket before and
    after (-1: none), for the schedule's population."""
    due: float
    payload: bytes
    old_bucket: int = -1
    new_bucket: int = -1


@dataclass(eq=False)
class Lease:
    host: str
    token: str
    partition: int
    score: float
    payload: bytes
    state: str = QUEUED
    download: Download = field(default_factory=Download)
    deadline: float = math.inf  # time.monotonic() by which the frontier may take it back
    recrawl: bool = False  # from the host's recrawl queue: the page was fetched before


class LeaseBook:
    def __init__(self):
        self.closing = False
        self.fetching = 0   # leases in FETCHING
        # (partition, token) -> every lease held here (tokens are per partition)
        self._leases: dict[tuple[int, str], Lease] = {}
        self._queue: deque[Lease] = deque()  # QUEUED, in the order to hand out

    def __iter__(self) -> Iterator[Lease]:
        return iter(self._leases.values())

    def __len__(self) -> int:
        """Leases held, pages still being processed included: they count
        against the prefetch, so that new leases are chosen knowing their links."""
        return len(self._leases)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def add(self, leased: list[Leased], deadline: float = math.inf) -> list[Release]:
        """The leases of one sync's answer, in the frontier's order. A book
        that is closing gives them back at once (the releases)."""
        if self.closing:
            return [Release(x.host, x.token, Host.FREE, URL.RETURN) for x in leased]
        for x in leased:
            lease = self._leases[x.partition, x.token] = Lease(
                x.host, x.token, x.partition, x.score, x.payload, deadline=deadline,
                recrawl=x.recrawl)
            self._queue.append(lease)
        return []

    def holds(self, lease: Lease) -> bool:
        """Is lease still in this book (not done, given back or forgotten)?"""
        return self._leases.get((lease.partition, lease.token)) is lease

    def renewed(self, partition: int, token: str, deadline: float) -> None:
        lease = self._leases.get((partition, token))
        if lease is not None and lease.deadline != -math.inf:
            lease.deadline = max(lease.deadline, deadline)

    def lost(self, partition: int, token: str) -> Lease | None:
        """The frontier says the lease is no longer this worker's: it is past
        its deadline, whatever the clock says."""
        lease = self._leases.get((partition, token))
        if lease is not None:
            lease.deadline = -math.inf
        return lease

    @staticmethod
    def expired(lease: Lease, now: float, margin: float = 0.0) -> bool:
        """Past its deadline (less margin) at monotonic time now."""
        return lease.deadline - margin <= now

    def forget(self, lease: Lease) -> None:
        """Drop a lease that is no longer this worker's, sending nothing: the
        frontier has taken it back (or will, at its deadline) and gives its
        URL and host to another worker."""
        if self._leases.pop((lease.partition, lease.token), None) is None:
            return
        if lease.state == QUEUED:
            self._queue.remove(lease)
        elif lease.state == FETCHING:
            self.fetching -= 1

    def next(self) -> Lease | None:
        """The next lease to hand to the engine, now FETCHING."""
        if not self._queue:
            return None
        lease = self._queue.popleft()
        lease.state = FETCHING
        self.fetching += 1
        return lease

    def ended(self, lease: Lease, fate: str, delay: float, wait_ms: int = -1) -> list[Release]:
        """The lease's download ended with fate (frontier.Host): its host may
        be contacted again after delay seconds; the URL stays pending."""
        lease.state = ENDED
        self.fetching -= 1
        return [Release(lease.host, lease.token, fate, URL.PENDING, int(delay * 1000), wait_ms)]

    def done(self, lease: Lease, fate: str = Host.FREE, delay: float = 0.0,
             schedule: Schedule | None = None) -> list[Release]:
        """The engine is done with the lease's page (its links are sent): the
        URL's lease ends, or, in a continuous crawl, the URL goes to its
        host's recrawl queue as schedule says. A lease whose download never
        ended (dropped before the downloader, or a payload no worker can
        read) ends its host's turn too, with fate and delay."""
        del self._leases[lease.partition, lease.token]
        url_fate, tail = URL.DONE, ()
        if schedule is not None:
            url_fate = URL.RECRAWL if schedule.payload else URL.DONE
            tail = (int(schedule.due * 1000), schedule.payload, schedule.old_bucket,
                    schedule.new_bucket)
        if lease.state == FETCHING:
            self.fetching -= 1
            return [Release(lease.host, lease.token, fate, url_fate, int(delay * 1000), -1, *tail)]
        return [Release(lease.host, lease.token, Host.NONE, url_fate, 0, -1, *tail)]

    def returned(self, lease: Lease, fate: str, delay: float, wait_ms: int = -1) -> list[Release]:
        """The lease's turn with its host went to another download (its
        host's robots.txt, Mercator §3.3): the URL goes back to its host's
        queue unfetched, and the host waits delay seconds from that download
        (fate and wait_ms as for ended()), whichever worker leases it next."""
        del self._leases[lease.partition, lease.token]
        if lease.state == FETCHING:
            self.fetching -= 1
            return [Release(lease.host, lease.token, fate, URL.RETURN, int(delay * 1000), wait_ms)]
        return [Release(lease.host, lease.token, Host.NONE, URL.RETURN)]

    def give_back_queued(self) -> list[Release]:
        """The leases not handed to the engine yet go back, their hosts at
        once (the crawl is paused: this worker starts no download)."""
        releases = [Release(lease.host, lease.token, Host.FREE, URL.RETURN)
                    for lease in self._queue]
        for lease in self._queue:
            del self._leases[lease.partition, lease.token]
        self._queue.clear()
        return releases

    def give_back(self) -> list[Release]:
        """Everything held goes back: every URL to its queue (a page
        downloaded but not processed is fetched again), hosts at once."""
        self.closing = True
        releases = [Release(lease.host, lease.token,
                            Host.NONE if lease.state == ENDED else Host.FREE, URL.RETURN)
                    for lease in self._leases.values()]
        self._leases.clear()
        self._queue.clear()
        self.fetching = 0
        return releases
