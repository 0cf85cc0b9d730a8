"""The lease book: where each of this worker's leases is, and what its end sends.

The frontier leases a host to one worker at a time with its best URL
(Mercator §3.1: the thread that removed the host's queue from the heap).
This worker's leases live here, each in one state:

    QUEUED    leased, waiting for the engine to pull it (best first)
    RUN       a further URL of a run (docs/frontier.md "Runs"), waiting for
              its host's download to end
    FETCHING  handed to the engine, download not ended
    ENDED     downloaded, its host released (or kept for the run); the URL
              stays leased, pending, until the engine is done with its page
    DONE      page done, kept only because its token still holds its host
              for a run that goes on

and the lease whose token holds its host's lease says so (holds_host): a
host's first URL, until the host goes back. Every decision about a lease's
end is here, as the Release tuples (frontier.Release) that sync.lua applies:
a URL's lease ends only when its page is done, so a worker that dies
mid-page loses nothing; its host's lease ends at the download's end, so the
host's politeness wait runs from there.

No Scrapy and no Redis: tests/test_leases.py drives it directly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from crawlproj.frontier.frontier import URL, Host, Leased, Release
from crawlproj.frontier.politeness import Download

QUEUED, RUN, FETCHING, ENDED, DONE = "queued", "run", "fetching", "ended", "done"

# A host that may be contacted again within this many ms is served its run's
# next URL here, without a round trip to the frontier (its lease kept).
SOON_MS = 20
# Runs are asked for while most of about this many recent downloads left
# their host free again within SOON_MS (an exponential average).
RUN_MEMORY = 10


@dataclass(eq=False)
class Lease:
    host: str
    token: str
    partition: int
    score: float
    payload: bytes
    holder: Lease | None = None  # the lease holding the host's (None: this one)
    state: str = QUEUED
    holds_host: bool = False
    download: Download = field(default_factory=Download)


class LeaseBook:
    def __init__(self, max_backlog: int):
        self.max_backlog = max_backlog
        self.closing = False
        self.fetching = 0                          # leases in FETCHING
        self.backlog = 0                           # leases in ENDED
        self._short = 0.0  # share of recent downloads whose host could be contacted again at once
        # (partition, token) -> every lease held here (tokens are per partition)
        self._leases: dict[tuple[int, str], Lease] = {}
        self._queue: deque[Lease] = deque()        # QUEUED, in the order to hand out
        self._runs: dict[str, deque[Lease]] = {}   # host -> its run's RUN leases

    # -- what is held ------------------------------------------------------

    def __iter__(self) -> Iterator[Lease]:
        return iter(self._leases.values())

    def __len__(self) -> int:
        return len(self._leases)

    @property
    def holding(self) -> int:
        """URLs held, done ones left out: what counts against the prefetch."""
        return sum(1 for lease in self._leases.values() if lease.state != DONE)

    @property
    def queued(self) -> int:
        return len(self._queue)

    def behind(self) -> bool:
        """This worker has more downloaded pages waiting for its CPU than it
        should: it leases no more hosts and ends its runs, so that hosts it
        could not serve soon go to another worker."""
        return self.backlog >= self.max_backlog

    def runs_pay(self) -> bool:
        """Whether to ask for runs: most recent downloads left their host free
        again at once (no politeness wait, or one shorter than SOON_MS), an
        average over the last ~10. With waits longer than that a run would
        only hold URLs that another worker could fetch meanwhile."""
        return self._short > 0.5

    # -- leases arrive -----------------------------------------------------

    def add(self, leased: list[Leased]) -> list[Release]:
        """The leases of one sync's answer, in the frontier's order: a host's
        first URL holds its lease; its further URLs are the host's run. A
        book that is closing gives them back at once (the releases)."""
        if self.closing:
            return [Release(x.host, x.token, Host.FREE, URL.RETURN) for x in leased]
        holders: dict[str, Lease] = {}
        for x in leased:
            holder = holders.get(x.host)
            if holder is None:
                lease = holders[x.host] = Lease(x.host, x.token, x.partition, x.score,
                                                x.payload, holds_host=True)
                self._queue.append(lease)
            else:
                lease = Lease(x.host, x.token, x.partition, x.score, x.payload, holder,
                              state=RUN)
                self._runs.setdefault(x.host, deque()).append(lease)
            self._leases[x.partition, x.token] = lease
        return []

    def next(self) -> Lease | None:
        """The next lease to hand to the engine, now FETCHING."""
        if not self._queue:
            return None
        lease = self._queue.popleft()
        lease.state = FETCHING
        self.fetching += 1
        return lease

    # -- a download ends, a page is done -----------------------------------

    def ended(self, lease: Lease, fate: str, delay: float, wait_ms: int = -1
              ) -> tuple[list[Release], float | None]:
        """The lease's download ended with fate (frontier.Host) and its host
        may be contacted again after delay seconds. Returns the releases to
        send and, when the host's run goes on, the seconds after which
        continue_run(host) must be called."""
        lease.state = ENDED
        self.fetching -= 1
        self.backlog += 1
        self._short += ((delay * 1000 <= SOON_MS) - self._short) / RUN_MEMORY
        if self._runs.get(lease.host) and fate == Host.OK and delay * 1000 <= SOON_MS \
                and not self.behind() and not self.closing:
            if lease.holds_host:  # the URL pending by itself; the host stays ours
                return [Release(lease.host, lease.token, Host.KEEP, URL.PENDING)], delay
            return [], delay      # a run's further URL: pending since it was leased
        holder = lease.holder or lease
        return self._end_host(holder, fate, delay, wait_ms,
                              URL.PENDING if holder is lease else URL.NONE), None

    def continue_run(self, host: str) -> bool:
        """The host's wait is over: its run's next URL goes first in line."""
        run = self._runs.get(host)
        if not run:
            return False  # the run was given back meanwhile
        lease = run.popleft()
        if not run:
            del self._runs[host]
        lease.state = QUEUED
        self._queue.appendleft(lease)
        return True

    def done(self, lease: Lease, fate: str = Host.FREE, delay: float = 0.0
             ) -> list[Release]:
        """The engine is done with the lease's page (its links are sent): the
        URL's lease ends. A lease whose download never ended (dropped before
        the downloader, or a payload no worker can read) ends its host's
        turn too, with fate and delay."""
        releases = []
        if lease.state == FETCHING:
            releases, _ = self.ended(lease, fate, delay)
        if lease.state == ENDED:
            self.backlog -= 1
        lease.state = DONE
        if not lease.holds_host:
            self._leases.pop((lease.partition, lease.token), None)
        releases.append(Release(lease.host, lease.token, Host.NONE, URL.DONE))
        return releases

    def _end_host(self, holder: Lease, fate: str, delay: float, wait_ms: int,
                  url_fate: str) -> list[Release]:
        """The host goes back, after delay; what is left of its run with it."""
        holder.holds_host = False
        if holder.state == DONE or url_fate == URL.DONE:
            self._leases.pop((holder.partition, holder.token), None)
        releases = [Release(holder.host, holder.token, fate, url_fate, int(delay * 1000), wait_ms)]
        for extra in self._runs.pop(holder.host, ()):
            del self._leases[extra.partition, extra.token]
            releases.append(Release(extra.host, extra.token, Host.NONE, URL.RETURN))
        return releases

    # -- the worker stops --------------------------------------------------

    def give_back(self) -> list[Release]:
        """Everything held goes back: URLs not done to their queues (a page
        downloaded but not processed is fetched again), hosts at once."""
        self.closing = True
        releases = [Release(lease.host, lease.token,
                            Host.FREE if lease.holds_host else Host.NONE,
                            URL.NONE if lease.state == DONE else URL.RETURN)
                    for lease in self._leases.values()]
        self._leases.clear()
        self._queue.clear()
        self._runs.clear()
        self.fetching = self.backlog = 0
        return releases
