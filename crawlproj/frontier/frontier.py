"""The shared frontier in Redis: the one round trip per sync.

Every change to the frontier is one call of lua/sync.lua on one partition;
a worker sends the calls for all partitions it needs in one pipeline, so one
network round trip carries a batch of pages' links, the releases of the hosts
those pages came from, lease renewals and the next leases.

The keys, their partitions and hash tags are crawlproj.redis.keyspace's (the layout
is listed there; lua/sync.lua says what each key holds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
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
        out = [frontier.lease_ttl_ms, frontier.backoff_base_ms, frontier.backoff_max_ms,
               frontier.backoff_after, frontier.host_max_queued, frontier.host_max_pages,
               repr(frontier.budget_per_partition), repr(frontier.budget_burst),
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


class Frontier:
    """One crawl's frontier on one Redis server or cluster."""

    def __init__(self, redis, keyspace: Keyspace, lease_ttl: float = 30.0,
                 backoff_base: float = 5.0, backoff_max: float = 3600.0,
                 backoff_after: int = 3, due: DueConfig | None = None,
                 host_max_queued: int = 0, host_max_pages: int = 0,
                 budget: float = 0.0, new_share: float = 0.0):
        self.redis = redis
        self.keyspace = keyspace
        self.crawl_id = keyspace.crawl_id
        self.partitions = keyspace.partitions
        self.partition_of = keyspace.partition_of
        self.prefix = keyspace.prefix
        self.lease_ttl_ms = int(lease_ttl * 1000)
        self.backoff_base_ms = int(backoff_base * 1000)
        self.backoff_max_ms = int(backoff_max * 1000)
        self.backoff_after = int(backoff_after)
        # the trap guard's per-host budgets, counted here for the whole crawl
        self.host_max_queued = int(host_max_queued)
        self.host_max_pages = int(host_max_pages)
        # the recrawl budget (fetches per second, whole crawl; 0 = none): each
        # partition spends its share through its own token bucket, a second's
        # worth deep (at least one fetch)
        self.budget_per_partition = float(budget) / self.partitions
        self.budget_burst = max(1.0, self.budget_per_partition)
        self.new_share = float(new_share)
        # the URL-seen test [Mercator §3.2], in the same partitions (docs/due.md)
        self.due = URLSeen(redis, keyspace, due)
        self._sha = None
        self._shas: dict[str, str] = {}  # script text -> its SHA1 on the server

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

    def status(self) -> dict:
        """Counts over all partitions, for `scrapy frontier` and stats."""
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
        return {
            "crawl_id": self.crawl_id,
            "partitions": self.partitions,
            "queued": sum(r.queued for r in results.values()),
            "hosts_ready": ready,
            "hosts_waiting": waiting,
            "hosts_leased": sum(r.leases for r in results.values()),
            "pages_pending": sum(r.pending for r in results.values()),
            "recrawls_scheduled": sum(r.scheduled for r in results.values()),
            "oldest_lease_age_s": None if oldest is None
            else max(0.0, (now - (oldest - self.lease_ttl_ms)) / 1000.0),
            "counters": totals,
        }

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
