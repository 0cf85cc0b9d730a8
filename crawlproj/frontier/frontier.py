"""The shared frontier in Redis: the one round trip per sync.

Every change to the frontier is one call of lua/sync.lua on one partition;
a worker sends the calls for all partitions it needs in one pipeline, so one
network round trip carries a batch of pages' links, the releases of the hosts
those pages came from, lease renewals and the next leases.

The keys, their partitions and hash tags are crawlproj.redis.keyspace's (the layout
is listed there; lua/sync.lua says what each key holds). Frontier is the one
way to them: the scheduler, the middlewares, the monitor and the commands ask
it, and nothing outside this package names a frontier key.

Frontier's calls, in the terms of URLFrontier's service API
(crawler-commons/url-frontier, urlfrontier.proto):

    Frontier                  URLFrontier      what it does here
    sync(Batch.enqueue)       PutURLs          new URLs: DUE test, host back queues
    put_urls(entries)         PutURLs          the same, alone (`scrapy seed`)
    sync(Batch.lease)         GetURLs          a host's lease with its best URL (Leased)
    sync(Batch.release)       PutURLs(known)   a lease's end: the URL done, due again
                                               or returned, its host's next contact
    Release.delay_ms          SetDelay         a host's politeness wait, per release
    Release.wait_ms (BUSY)    BlockQueueUntil  a host blocked until its Retry-After
    block(host, ms)           BlockQueueUntil  an operator's block of a host
    set_delay(host, ms)       SetDelay         an operator's least delay of a host
    status(), counters()      GetStats         counts over all partitions
    list_queues()             ListQueues       hosts with work, failures or a record
    host(name)                (GetStats of one queue) one host's state and counts
    queued_urls(host, n)      (GetURLs, peeking) a host's next URLs, not leased
    rescore(score)            (PutURLs, known) every queued URL's score rewritten
    revise(host, pages)       (PutURLs, known) scheduled pages known to have changed
    scheduled(host, fps)      (none)           scheduled pages' payloads and due times
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import NamedTuple

import msgpack
from redis.exceptions import NoScriptError

from crawlproj.addon import require_table
from crawlproj.due.urlseen import DueConfig, URLSeen
from crawlproj.errors import CrawlprojError
from crawlproj.prioritizers import prioritizer_name
from crawlproj.redis.client import lua_script
from crawlproj.redis.keyspace import Keyspace

# The sync script's parts, composed in this order (lua/sync.lua, the main
# part, lists what each holds; a part uses only the parts before it) and
# loaded as one script: one EVALSHA per partition per sync.
SYNC_PARTS = (
    ("crawlproj.due", "seen.lua"),              # the DUE's URL-seen test
    ("crawlproj.monitor", "sync_control.lua"),  # CRAWLLOST, pause and stop
    ("crawlproj.traps", "sync_budgets.lua"),    # the trap guard's per-host budgets
    ("crawlproj.recrawl", "sync_recrawl.lua"),  # recrawl queues, budget, new share
    ("crawlproj.frontier", "frontier.lua"),     # host states, queues, leases, releases
    ("crawlproj.frontier", "sync.lua"),         # the arguments, the sections in order
)
SYNC_LUA = "".join(lua_script(package, name) for package, name in SYNC_PARTS)
RESCORE_LUA = lua_script("crawlproj.frontier", "rescore.lua")
REVISE_LUA = lua_script("crawlproj.frontier", "revise.lua")
QUEUES_LUA = lua_script("crawlproj.frontier", "queues.lua")
HOSTCTL_LUA = lua_script("crawlproj.frontier", "hostctl.lua")
# Host queues whose lengths one queues.lua call reads.
QUEUES_PER_CALL = 5000


class CrawlMismatch(CrawlprojError):
    """A process that adds URLs to a crawl has settings other than the crawl's."""


def join(settings, redis) -> Keyspace:
    """The keyspace of crawl CRAWL_ID for a process that adds URLs to it (a
    worker, `scrapy seed`). The first such process fixes the crawl's record:
    partitions, prioritizer and DUE configuration; a later one must ask for
    the same partitions, prioritizer and DUE mode, else CrawlMismatch names
    each difference. Its hosts would fall in other partitions, its scores
    would not be comparable with the crawl's, and its DUE would not be the
    one its memory was planned for. (The DUE's other settings are adopted,
    with a warning: see URLSeen.)"""
    require_table(settings)
    crawl_id = settings.get("CRAWL_ID")
    asked = settings.get("FRONTIER_PARTITIONS")  # None: the crawl's, or fitted to the server
    if asked is not None:
        partitions = settings.getint("FRONTIER_PARTITIONS")
    else:
        crawl = Keyspace.existing(redis, crawl_id)
        partitions = crawl.partitions if crawl else Keyspace.fitted_partitions(redis, crawl_id)
    prioritizer = prioritizer_name(settings.get("FRONTIER_PRIORITIZER"))
    due = DueConfig.from_settings(settings)
    keyspace, record = Keyspace.agree(redis, crawl_id, partitions,
                                      prioritizer=prioritizer, due=due.to_json())
    differences = [f"{name} {theirs} (not {ours})" for name, theirs, ours in (
        ("FRONTIER_PARTITIONS", keyspace.partitions, partitions if asked is not None else None),
        ("FRONTIER_PRIORITIZER", record["prioritizer"], prioritizer),
        ("DUE_MODE", DueConfig.from_json(record["due"]).mode, due.mode),
    ) if ours is not None and str(theirs) != str(ours)]
    if differences:
        raise CrawlMismatch(f"crawl {keyspace.crawl_id!r} runs with {' and '.join(differences)}: "
                            "give this process the crawl's settings, or another CRAWL_ID")
    return keyspace


class Host:
    """What a release does to its host (lua/sync.lua, section 2). The host's
    lease is touched only if the release's token holds it."""

    NONE = ""      # nothing: the token does not hold the host
    OK = "ok"      # downloaded: contact again after delay_ms; failures forgotten
    FAIL = "fail"  # connection failure: counted; blocked with backoff after a few
    BUSY = "busy"  # 429/503: counted; blocked for wait_ms (Retry-After) or backoff
    FREE = "free"  # nothing was downloaded (given back, unreadable): after delay_ms


class URL:
    """What a release does to the URL of its token."""

    NONE = ""
    PENDING = "pending"  # stays leased by itself until its page is done
    DONE = "done"        # its page is done: the lease ends
    RETURN = "return"    # back to its host's queue, unfetched
    RECRAWL = "recrawl"  # its page is done, and due again (continuous crawling)


class Release(NamedTuple):
    host: str
    token: str
    host_fate: str = Host.NONE
    url_fate: str = URL.NONE
    delay_ms: int = 0    # the host's politeness wait
    wait_ms: int = -1    # BUSY: the server's Retry-After; -1: none, back off
    due_ms: int = 0      # RECRAWL: due again this long from now
    payload: bytes = b""  # RECRAWL: the request and its recrawl state
    old_bucket: int = -1  # the page's change-rate bucket before (-1: not scheduled) ...
    new_bucket: int = -1  # ... and after (rbuckets counts the schedule's pages per bucket)


@dataclass
class Batch:
    """What one worker sends to one partition in one sync."""

    enqueue: list = field(default_factory=list)   # Frontier.entry() tuples
    release: list = field(default_factory=list)   # Release tuples
    renew: list = field(default_factory=list)     # (host, token)
    lease: int = 0

    def args(self, frontier: Frontier) -> list:
        # The new links go as one msgpack array, not as script arguments: a
        # page's links are most of a call, and one blob costs the client one
        # C call and the server one unpack, where eight arguments per link
        # would be packed and parsed one by one (bench/args_bench.py;
        # docs/benchmarks.md).
        t = frontier.limits
        out = [t.lease_ttl_ms, t.backoff_base_ms, t.backoff_max_ms, t.backoff_after,
               t.host_max_queued, t.host_max_pages,
               repr(t.budget_per_partition), repr(t.budget_burst),
               repr(frontier.new_share),
               msgpack.packb([x for e in self.enqueue for x in e], use_bin_type=False)
               if self.enqueue else ""]
        out.append(len(self.release))
        for r in self.release:
            out.extend(r)
        out.append(len(self.renew))
        for r in self.renew:
            out.extend(r)
        out.append(self.lease)
        return out

    def __bool__(self):
        return bool(self.enqueue or self.release or self.renew or self.lease)


@dataclass
class Leased:
    host: str
    token: str
    score: float
    payload: bytes
    partition: int
    recrawl: bool = False  # from the host's recrawl queue (fetched before)


@dataclass
class Result:
    """A partition's answer to one sync (lua/sync.lua returns the counts by name)."""

    now_ms: int
    leased: list
    added: int = 0
    duplicates: int = 0
    bumped: int = 0      # queued URLs whose score a duplicate link changed
    stale: int = 0       # releases of leases that had expired
    expired: int = 0     # expired leases put back in their queues
    refused_host_queued: int = 0  # new URLs refused by the trap guard's budgets
    refused_host_pages: int = 0
    refused_suspects: int = 0  # queued suspects of trapped hosts dropped (traps/nearhost.py)
    next_ready_ms: int = -1  # earliest time a host may be ready here; -1 = nothing queued
    heap: int = 0
    ready: int = 0
    leases: int = 0
    queued: int = 0
    pending: int = 0     # URLs downloaded, host released, page not yet done
    paused: int = 0      # server ms the crawl was paused at; 0: not paused
    stopped: int = 0     # server ms of the crawl's last stop; 0: none
    scheduled: int = 0   # URLs in recrawl queues (continuous crawling)
    rready: int = 0      # hosts with a recrawl due, politeness allowing
    leased_recrawl: int = 0  # of the leases of this answer, recrawls
    budget_waits: int = 0    # 1: ready hosts waited for the recrawl budget
    backed_off: int = 0      # hosts with failures in a row (errors, 429/503)
    lost: list = field(default_factory=list)  # tokens whose renewal found no lease


@dataclass
class Status:
    """The frontier's counts over all partitions (Frontier.status)."""

    crawl_id: str
    partitions: int
    queued: int
    hosts_ready: int
    hosts_waiting: int
    hosts_leased: int
    pages_pending: int
    recrawls_scheduled: int
    oldest_lease_age_s: float | None
    counters: dict[str, int]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Queue:
    """One host's queue as ListQueues finds it (Frontier.list_queues)."""

    host: str
    partition: int
    state: str                  # waiting, ready, leased or idle
    until_ms: int | None        # waiting: its next-contact time; leased: the lease's deadline
    fails: int = 0              # failures in a row (errors, 429/503)
    record: bytes | None = None  # sync.lua's record of the host (msgpack), if any


class HostTimes(NamedTuple):
    """A host's next-contact time (on the heap), lease deadline and record."""

    next_contact_ms: int | None
    lease_deadline_ms: int | None
    record: bytes | None


@dataclass
class HostView:
    """Everything the frontier holds of one host (Frontier.host)."""

    host: str
    partition: int
    next_contact_ms: int | None    # on the heap, waiting
    ready: bool                    # its turn has come (new URLs)
    recrawl_ready: bool            # a recrawl is due, politeness allowing
    lease_deadline_ms: int | None  # leased
    idle_until_ms: int | None      # no URL queued: may next be contacted then
    fails: int | None              # failures in a row; None: none recorded
    record: bytes | None           # sync.lua's record of the host (msgpack)
    queued: int                    # URLs in its back queue
    scheduled: int                 # URLs in its recrawl queue
    pages_leased: int | None       # the trap guard's page count; None: none
    trapped: int | None            # the trap guard found it trapped (traps/nearhost.py)
    blocked_until_ms: int | None = None  # an operator's block (Frontier.block)
    least_delay_ms: int | None = None    # an operator's least delay (Frontier.set_delay)

    def known(self) -> bool:
        """Does the frontier hold anything of this host?"""
        return bool(self.queued or self.scheduled or self.ready or self.recrawl_ready) \
            or any(x is not None for x in (
                self.next_contact_ms, self.lease_deadline_ms, self.idle_until_ms, self.fails,
                self.record, self.pages_leased, self.trapped, self.blocked_until_ms,
                self.least_delay_ms))


class Overview(NamedTuple):
    """Host counts over all partitions and a sample of hosts with work
    (Frontier.overview); due: hosts on the heap whose time has come."""

    waiting: int
    due: int
    ready: int
    leased: int
    pending: int
    backed_off: int
    sample: list         # (partition, host): ready, waiting
    leased_sample: list  # (partition, host): leased


@dataclass(frozen=True)
class Limits:
    """The frontier's settings that every sync sends (milliseconds, counts)."""

    lease_ttl_ms: int
    backoff_base_ms: int
    backoff_max_ms: int
    backoff_after: int
    # the trap guard's per-host budgets, counted here for the whole crawl
    host_max_queued: int
    host_max_pages: int
    # the recrawl budget (fetches per second, whole crawl; 0 = none): each
    # partition spends its share through its own token bucket, a second's
    # worth deep (at least one fetch)
    budget_per_partition: float
    budget_burst: float


class Frontier:
    """One crawl's frontier on one Redis server or cluster."""

    def __init__(self, redis, keyspace: Keyspace, lease_ttl: float = 30.0,
                 backoff_base: float = 5.0, backoff_max: float = 3600.0,
                 backoff_after: int = 3, due: DueConfig | None = None,
                 host_max_queued: int = 0, host_max_pages: int = 0,
                 budget: float = 0.0, new_share: float = 0.0):
        self.redis = redis
        self.keyspace = keyspace
        share = float(budget) / keyspace.partitions
        self.limits = Limits(int(lease_ttl * 1000), int(backoff_base * 1000),
                             int(backoff_max * 1000), int(backoff_after), int(host_max_queued),
                             int(host_max_pages), share, max(1.0, share))
        # never-crawled URLs' share of the recrawl budget; the webfountain
        # policy revises it at each plan (recrawl.py)
        self.new_share = float(new_share)
        # the URL-seen test [Mercator §3.2], in the same partitions (docs/due.md)
        self.due = URLSeen(redis, keyspace, due)
        self._sha = None
        self._shas: dict[str, str] = {}  # script text -> its SHA1 on the server

    @property
    def crawl_id(self) -> str:
        return self.keyspace.crawl_id

    @property
    def partitions(self) -> int:
        return self.keyspace.partitions

    @property
    def lease_ttl_ms(self) -> int:
        return self.limits.lease_ttl_ms

    @lease_ttl_ms.setter
    def lease_ttl_ms(self, ms: int) -> None:
        self.limits = replace(self.limits, lease_ttl_ms=int(ms))

    def partition_of(self, host: str) -> int:
        return self.keyspace.partition_of(host)

    def prefix(self, partition: int) -> str:
        return self.keyspace.prefix(partition)

    @classmethod
    def from_settings(cls, settings, redis):
        """The frontier of a process that adds URLs to the crawl (see join)."""
        return cls(
            redis,
            join(settings, redis),
            lease_ttl=settings.getfloat("FRONTIER_LEASE_TTL"),
            backoff_base=settings.getfloat("FRONTIER_BACKOFF_BASE"),
            backoff_max=settings.getfloat("FRONTIER_BACKOFF_MAX"),
            backoff_after=settings.getint("FRONTIER_BACKOFF_AFTER"),
            due=DueConfig.from_settings(settings),
            host_max_queued=settings.getint("TRAPGUARD_HOST_MAX_QUEUED"),
            host_max_pages=settings.getint("TRAPGUARD_HOST_MAX_PAGES"),
            budget=settings.getfloat("RECRAWL_BUDGET") if settings.getbool("RECRAWL_ENABLED") else 0.0,
            new_share=settings.getfloat("RECRAWL_NEW_SHARE"),
        )

    # -- building entries -------------------------------------------------

    def entry(self, host: str, url: str, score: float, payload: bytes, force: bool = False,
              fp: int | None = None, bump: float = 0.0, first: float | None = None,
              best: bool = False):
        """An enqueue entry; bump is added to the URL's score if it is already
        queued (a prioritizer that counts links to a URL, see prioritizers),
        or with best the URL takes score if that is lower than its own (a
        prioritizer whose estimate of a URL is the best any link to it
        gives); first replaces the score if the URL is its host's first in
        the crawl."""
        if fp is None:
            fp = self.due.fingerprint(url)  # canonical URL, crawl's settings
        # fp as text: Lua reads msgpack integers as doubles (53 bits)
        return (host, str(fp), self.due.aux(fp), repr(float(score)), payload,
                "1" if force else "0",
                "<" + repr(float(score)) if best else repr(float(bump)) if bump else "0",
                "" if first is None else repr(float(first)))

    # -- the round trip ---------------------------------------------------

    def sync(self, batches: dict[int, Batch]) -> dict[int, Result]:
        """Send each partition's batch; all in one pipeline, one round trip."""
        return self.sync_with(batches)[0]

    def sync_with(self, batches: dict[int, Batch], extra: list[tuple] = ()) \
            -> tuple[dict[int, Result], list]:
        """sync(), and the commands of extra in the same round trip (a
        worker's heartbeat, crawlproj/monitor/heartbeat.py): their replies,
        an exception for one that failed."""
        if self._sha is None:
            self._sha = self.redis.script_load(SYNC_LUA)
            # the seen test needs the crawl's DUE set up, even when the entries
            # were built by another Frontier object (a bench, a tool)
            self.due.set_up()
        parts = list(batches)
        pipe = self.redis.pipeline(transaction=False)
        for p in parts:
            # execute_command: redis-py refuses pipe.evalsha() on a cluster, but
            # routes a raw EVALSHA by its key like any command
            pipe.execute_command("EVALSHA", self._sha, 1, self.prefix(p), *batches[p].args(self))
        for command in extra:
            pipe.execute_command(*command)
        replies = pipe.execute(raise_on_error=False) if parts or extra else []
        out = {}
        for p, reply in zip(parts, replies):
            if isinstance(reply, NoScriptError):
                # the server restarted or was flushed: load the script again and
                # redo this partition only (the others have been applied)
                self._sha = self.redis.script_load(SYNC_LUA)
                reply = self.redis.evalsha(self._sha, 1, self.prefix(p), *batches[p].args(self))
            elif isinstance(reply, Exception):
                raise reply
            out[p] = self._result(p, reply)
        return out, replies[len(parts):]

    @staticmethod
    def _result(p: int, reply) -> Result:
        now, flat, counts, lost = reply
        leased = [Leased(flat[i].decode(), flat[i + 1].decode(), float(flat[i + 2]),
                         flat[i + 3], p, flat[i + 4] == b"r") for i in range(0, len(flat), 5)]
        named = {counts[i].decode(): int(counts[i + 1]) for i in range(0, len(counts), 2)}
        return Result(int(now), leased, **named, lost=[t.decode() for t in lost])

    # -- bulk priority rewrite (the ranker) ---------------------------------

    def queued_hosts(self, partition: int) -> list[str]:
        """Hosts of a partition that may have queued URLs: on the heap, ready
        or leased (an idle host has an empty queue, see lua/sync.lua)."""
        pipe = self.redis.pipeline(transaction=False)
        for state in (self.keyspace.heap, self.keyspace.ready, self.keyspace.leases):
            pipe.zrange(state(partition), 0, -1)
        return sorted({h.decode() for members in pipe.execute() for h in members})

    def rescore(self, score, partitions=None, hosts_per_round: int = 512,
                max_args: int = 100_000) -> dict:
        """Give every queued URL the score `score` says, in bulk.

        score(fingerprints: list[int]) -> list of new scores (None keeps one);
        the fingerprints are the DUE's (crawlproj.due.fingerprint), the keys
        of the link store's URL table.
        Per round, one pipeline reads the queues of up to hosts_per_round
        hosts, and one script call per partition (lua/rescore.lua) writes back
        only the scores that changed. Members leased in between are skipped by
        ZADD XX there, so nothing is lost or queued twice; URLs enqueued in
        between keep the score their prioritizer gave them.
        """
        totals = {"hosts": 0, "urls": 0, "changed": 0}
        for p in (range(self.partitions) if partitions is None else partitions):
            hosts = self.queued_hosts(p)
            for start in range(0, len(hosts), hosts_per_round):
                chunk = hosts[start:start + hosts_per_round]
                pipe = self.redis.pipeline(transaction=False)
                for host in chunk:
                    pipe.zrange(self.keyspace.queue(p, host), 0, -1, withscores=True)
                queues = pipe.execute()
                fps = [int(m) for q in queues for m, _ in q]
                scores = list(score(fps)) if fps else []
                if len(scores) != len(fps):
                    raise ValueError(f"score() gave {len(scores)} scores for {len(fps)} URLs")
                args, k = [], 0
                for host, q in zip(chunk, queues):
                    group = []
                    for member, old in q:
                        new = scores[k]
                        k += 1
                        # a change below 1e-9 relative is noise of an iteration
                        if new is not None and math.isfinite(new) \
                                and abs(new - old) > 1e-9 * max(abs(old), 1e-300):
                            group += (repr(float(new)), member)
                    if group:
                        args += (host, len(group) // 2, *group)
                    if len(args) >= max_args:
                        totals["changed"] += self._rescore_call(p, args)
                        args = []
                if args:
                    totals["changed"] += self._rescore_call(p, args)
                totals["hosts"] += len(chunk)
                totals["urls"] += len(fps)
        return totals

    def _rescore_call(self, p: int, args: list) -> int:
        return self._eval(RESCORE_LUA, p, args)

    def _eval(self, script: str, p: int, args: list) -> int:
        """A script's call on partition p, loaded once (and again when the
        server lost it: a restart, a flush)."""
        sha = self._shas.get(script)
        if sha is not None:
            try:
                return int(self.redis.evalsha(sha, 1, self.prefix(p), *args))
            except NoScriptError:
                pass
        sha = self._shas[script] = self.redis.script_load(script)
        return int(self.redis.evalsha(sha, 1, self.prefix(p), *args))

    # -- scheduled pages known to have changed ----------------------------

    def revise(self, host: str, pages: list[tuple]) -> int:
        """Pages of host scheduled for recrawl that changed since their last
        fetch (a sitemap's lastmod says so): each (fingerprint, payload read,
        new payload, old bucket, new bucket, "1" to be due now or "0") gets
        its new payload, unless its payload is no longer the one read
        (lua/revise.lua). The number revised."""
        if not pages:
            return 0
        args = [host] + [x for page in pages for x in page]
        return self._eval(REVISE_LUA, self.partition_of(host), args)

    # -- operator views ---------------------------------------------------

    def status(self) -> Status:
        """Counts over all partitions, for `scrapy frontier` and stats
        (URLFrontier's GetStats; it syncs every partition, leasing nothing)."""
        results = self.sync({p: Batch() for p in range(self.partitions)})
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.partitions):
            pipe.zrange(self.keyspace.leases(p), 0, 0, withscores=True)
            pipe.zrange(self.keyspace.pending(p), 0, 0, withscores=True)
            pipe.hgetall(self.keyspace.stats(p))
        replies = pipe.execute()
        now = max(r.now_ms for r in results.values())
        oldest = None
        totals: dict[str, int] = {}
        for i in range(self.partitions):
            stats = replies[3 * i + 2]
            for first in replies[3 * i:3 * i + 2]:
                if first:
                    deadline = first[0][1]
                    oldest = deadline if oldest is None else min(oldest, deadline)
            for k, v in stats.items():
                totals[k.decode()] = totals.get(k.decode(), 0) + int(v)
        ready = sum(r.ready for r in results.values())
        waiting = sum(r.heap for r in results.values())
        # a host on the heap whose time has passed is ready too
        return Status(
            crawl_id=self.crawl_id,
            partitions=self.partitions,
            queued=sum(r.queued for r in results.values()),
            hosts_ready=ready,
            hosts_waiting=waiting,
            hosts_leased=sum(r.leases for r in results.values()),
            pages_pending=sum(r.pending for r in results.values()),
            recrawls_scheduled=sum(r.scheduled for r in results.values()),
            oldest_lease_age_s=None if oldest is None
            else max(0.0, (now - (oldest - self.lease_ttl_ms)) / 1000.0),
            counters=totals,
        )

    def counters(self) -> dict:
        """The partitions' counters summed (queued, enqueued, leased, ...) and
        the leases live now (hosts and pending URLs whose deadline has not
        passed); reads only, unlike status(), which syncs."""
        now_ms = int(self.redis.time()[0]) * 1000
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.partitions):
            pipe.hgetall(self.keyspace.stats(p))
            pipe.zcount(self.keyspace.leases(p), now_ms, "+inf")
            pipe.zcount(self.keyspace.pending(p), now_ms, "+inf")
        replies = pipe.execute()
        totals = {"live_leases": 0}
        for i in range(self.partitions):
            for k, v in replies[3 * i].items():
                totals[k.decode()] = totals.get(k.decode(), 0) + int(v)
            totals["live_leases"] += replies[3 * i + 1] + replies[3 * i + 2]
        return totals

    def is_empty(self, results: dict[int, Result]) -> bool:
        """No host holds a queued URL (none waiting on the heap, ready or
        leased), no URL is pending, no recrawl is scheduled. Judged by the
        structures, not the queued counter, which entries written past the
        frontier's script would put off (lua/sync.lua)."""
        return all(r.heap == 0 and r.ready == 0 and r.rready == 0 and r.leases == 0
                   and r.pending == 0 and r.scheduled == 0 for r in results.values())

    # -- the frontier's hosts, read only (ListQueues and the like) ----------

    def now_ms(self) -> int:
        """The server's clock, in ms."""
        t = self.redis.time()
        return int(t[0]) * 1000 + int(t[1]) // 1000

    def list_queues(self, limit: int) -> dict[str, Queue]:
        """host -> its Queue, for the hosts with work, failures or a record:
        at most limit of each state and of the records per partition (the
        heap's longest waits and the ready set's best first)."""
        ks = self.keyspace
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.partitions):
            pipe.zrange(ks.heap(p), 0, limit - 1, desc=True, withscores=True)
            pipe.zrange(ks.ready(p), 0, limit - 1)
            pipe.zrange(ks.recrawl_ready(p), 0, limit - 1)
            pipe.zrange(ks.leases(p), 0, limit - 1, withscores=True)
            pipe.hscan(ks.fails(p), 0, count=limit)
        replies = pipe.execute()
        out: dict[str, Queue] = {}
        for p in range(self.partitions):
            heap, ready, rready, leases, (_, fails) = replies[5 * p:5 * p + 5]
            for h, score in heap:
                out[h.decode()] = Queue(h.decode(), p, "waiting", int(score))
            for h in ready + rready:
                out[h.decode()] = Queue(h.decode(), p, "ready", None)
            for h, score in leases:
                out[h.decode()] = Queue(h.decode(), p, "leased", int(score))
            for h, n in fails.items():
                q = out.get(h.decode())
                if q is None:
                    q = out[h.decode()] = Queue(h.decode(), p, "idle", None)
                q.fails = int(n)
        # every host's record, and so the hosts done with (idle): pages fetched, errors
        for p in range(self.partitions):
            key = ks.host_records(p)
            if self.redis.hlen(key) <= limit:
                records = self.redis.hgetall(key).items()
            else:
                records = itertools.islice(self.redis.hscan_iter(key, count=1000), limit)
            for h, raw in records:
                q = out.get(h.decode())
                if q is None:
                    q = out[h.decode()] = Queue(h.decode(), p, "idle", None)
                q.record = raw
        return out

    def queue_lengths(self, partition: int, hosts: list[str]) -> list[int]:
        """The back queue length of each host of one partition: a script call
        per QUEUES_PER_CALL hosts, where a command each would cost the client
        more than the server (bench/operator_bench.py)."""
        out: list[int] = []
        for i in range(0, len(hosts), QUEUES_PER_CALL):
            keys = [self.keyspace.queue(partition, h) for h in hosts[i:i + QUEUES_PER_CALL]]
            out += [int(n) for n in self.redis.execute_command("EVAL", QUEUES_LUA, len(keys),
                                                                *keys)]
        return out

    def queue_sizes(self, hosts: list[tuple[int, str]]) -> list[int]:
        """The back queue length of each (partition, host), in one pipeline."""
        pipe = self.redis.pipeline(transaction=False)
        for p, h in hosts:
            pipe.zcard(self.keyspace.queue(p, h))
        return pipe.execute() if hosts else []

    def host(self, host: str) -> HostView:
        """What the frontier holds of host (its key, crawlproj.urls.host_of),
        in one round trip."""
        ks, p, h = self.keyspace, self.partition_of(host), host
        pipe = self.redis.pipeline(transaction=False)
        pipe.zscore(ks.heap(p), h)
        pipe.zscore(ks.ready(p), h)
        pipe.zscore(ks.recrawl_ready(p), h)
        pipe.zscore(ks.leases(p), h)
        pipe.zscore(ks.idle(p), h)
        pipe.hget(ks.fails(p), h)
        pipe.hget(ks.host_records(p), h)
        pipe.zcard(ks.queue(p, h))
        pipe.zcard(ks.recrawl_queue(p, h))
        pipe.hget(ks.host_pages(p), h)
        pipe.hget(ks.trapped(p), h)
        pipe.zscore(ks.blocked(p), h)
        pipe.hget(ks.delays(p), h)
        (heap, ready, rready, lease, idle, fails, rec, queued, scheduled, pages, trapped,
         blocked, delay) = pipe.execute()

        def ms(score):
            return None if score is None else int(score)

        def count(value):
            return None if value is None else int(value)

        return HostView(h, p, ms(heap), ready is not None, rready is not None, ms(lease),
                        ms(idle), count(fails), rec, int(queued), int(scheduled), count(pages),
                        count(trapped), ms(blocked), count(delay))

    def block(self, host: str, ms: int) -> int:
        """No lease of host for the next ms milliseconds, whatever its state
        (an operator's word; 0 lifts it); the block's end, server ms (0:
        lifted). A lease running now runs on."""
        return self._hostctl("block", host, ms)

    def set_delay(self, host: str, ms: int) -> int:
        """At least ms between the end of a download from host and the next
        contact, whatever the worker's politeness asks (0 lifts it)."""
        return self._hostctl("delay", host, ms)

    def _hostctl(self, op: str, host: str, ms: int) -> int:
        return int(self.redis.execute_command("EVAL", HOSTCTL_LUA, 1,
                                              self.prefix(self.partition_of(host)),
                                              op, host, max(0, int(ms))))

    def queued_urls(self, host: str, n: int) -> list[bytes]:
        """The payloads of host's next n queued URLs, best first, not leased
        (a URL leased meanwhile is left out)."""
        ks, p = self.keyspace, self.partition_of(host)
        head = self.redis.zrange(ks.queue(p, host), 0, n - 1)
        if not head:
            return []
        return [x for x in self.redis.hmget(ks.payloads(p, host), head) if x is not None]

    def host_times(self, hosts: list[tuple[int, str]]) -> list[HostTimes]:
        """Each (partition, host)'s next-contact time, lease deadline and record."""
        ks = self.keyspace
        pipe = self.redis.pipeline(transaction=False)
        for p, h in hosts:
            pipe.zscore(ks.heap(p), h)
            pipe.zscore(ks.leases(p), h)
            pipe.hget(ks.host_records(p), h)
        replies = pipe.execute() if hosts else []
        return [HostTimes(None if heap is None else int(heap),
                          None if lease is None else int(lease), rec)
                for heap, lease, rec in zip(replies[::3], replies[1::3], replies[2::3])]

    def overview(self, now_ms: int, sample: int) -> Overview:
        """Host counts over all partitions, and up to sample hosts with work
        of each partition: half ready and waiting, half leased."""
        ks, half = self.keyspace, sample // 2
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.partitions):
            pipe.zcard(ks.heap(p))
            pipe.zcount(ks.heap(p), "-inf", now_ms)
            pipe.zcard(ks.ready(p))
            pipe.zcard(ks.leases(p))
            pipe.zcard(ks.pending(p))
            pipe.hlen(ks.fails(p))
            pipe.zrange(ks.ready(p), 0, half - 1)
            pipe.zrange(ks.heap(p), 0, half - 1)
            pipe.zrange(ks.leases(p), 0, half - 1)
        replies = pipe.execute()
        parts = [replies[9 * p:9 * p + 9] for p in range(self.partitions)]
        counts = [sum(part[i] for part in parts) for i in range(6)]
        sample = [(p, x.decode()) for p, part in enumerate(parts) for x in part[6] + part[7]]
        leased = [(p, x.decode()) for p, part in enumerate(parts) for x in part[8]]
        return Overview(*counts, sample, leased)

    def pages_leased(self, limit: int) -> list[int] | None:
        """URLs leased per host so far (the trap guard's page budget counts
        them), every host's; None when a partition holds more than limit hosts."""
        values: list[int] = []
        for p in range(self.partitions):
            key = self.keyspace.host_pages(p)
            if self.redis.hlen(key) > limit:
                return None
            values += [int(v) for v in self.redis.hvals(key)]
        return values

    def put_urls(self, entries: list[tuple[int, tuple]]) -> Result:
        """Add (partition, entry()) URLs in one round trip, leasing nothing:
        the counts of every partition's answer summed (added, duplicates)."""
        batches: dict[int, Batch] = {}
        for p, entry in entries:
            batches.setdefault(p, Batch()).enqueue.append(entry)
        results = self.sync(batches) if batches else {}
        return Result(max((r.now_ms for r in results.values()), default=0), [],
                      added=sum(r.added for r in results.values()),
                      duplicates=sum(r.duplicates for r in results.values()))

    # -- the recrawl schedule, read only (recrawl.py, crawlproj/sitemaps) ---

    def scheduled(self, host: str, fingerprints: list[str]) -> list[tuple]:
        """(payload, due ms) of each of host's pages given by fingerprint in
        its recrawl queue; (None, None) for one not scheduled (never crawled,
        or leased now)."""
        if not fingerprints:
            return []
        ks, p = self.keyspace, self.partition_of(host)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(ks.payloads(p, host), fingerprints)
        pipe.zmscore(ks.recrawl_queue(p, host), fingerprints)
        payloads, dues = pipe.execute()
        return [(payload if due is not None else None, due if payload is not None else None)
                for payload, due in zip(payloads, dues)]

    def scheduled_payloads(self, batch: int = 500) -> Iterator[tuple[str, bytes]]:
        """(host, payload) of every page in the crawl's recrawl schedule (a
        scan: for a command or a benchmark, not a worker's loop)."""
        ks = self.keyspace
        for p in range(self.partitions):
            for key in self.redis.scan_iter(match=ks.recrawl_queues_pattern(p), count=1000):
                host = key.decode().rsplit("d:", 1)[1]
                fps = self.redis.zrange(key, 0, -1)
                for i in range(0, len(fps), batch):
                    for payload in self.redis.hmget(ks.payloads(p, host), fps[i:i + batch]):
                        if payload is not None:     # leased meanwhile
                            yield host, payload

    def schedule_population(self) -> tuple[dict[int, int], int]:
        """(pages in the recrawl schedule per change-rate bucket, URLs never
        crawled) of the whole crawl."""
        ks = self.keyspace
        pipe = self.redis.pipeline(transaction=False)
        for p in range(self.partitions):
            pipe.hgetall(ks.rate_buckets(p))
            pipe.hget(ks.stats(p), "queued")
        replies = pipe.execute()
        counts: dict[int, int] = {}
        new = 0
        for i in range(self.partitions):
            for k, v in replies[2 * i].items():
                if int(v) > 0:
                    counts[int(k)] = counts.get(int(k), 0) + int(v)
            new += int(replies[2 * i + 1] or 0)
        return counts, max(0, new)

    def recrawl_progress(self) -> tuple[int, float]:
        """(leases of the whole crawl so far, wall seconds the longest-waiting
        host with a recrawl due has waited for a lease: 0 when none waits)."""
        ks = self.keyspace
        pipe = self.redis.pipeline(transaction=False)
        pipe.time()
        for p in range(self.partitions):
            pipe.hget(ks.stats(p), "leased")
            pipe.zrange(ks.recrawl_ready(p), 0, 0, withscores=True)
        replies = pipe.execute()
        now_ms = replies[0][0] * 1000 + replies[0][1] / 1000
        oldest = min((r[0][1] for r in replies[2::2] if r), default=now_ms)
        return sum(int(x or 0) for x in replies[1::2]), max(0.0, now_ms - oldest) / 1000
