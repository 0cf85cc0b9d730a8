"""The Redis keys of one crawl: the one place their names are made.

Every component that keeps state in Redis (the frontier, the DUE, the
content-seen test, the link store, page metadata, the ranker) names its keys
through a :class:`Keyspace`, so the layout below is written once.

A crawl (``CRAWL_ID``) is split into host partitions, Mercator's host
splitter (§3.1, §5): a host's partition is mmh3(host) mod the partition
count, so that all state of a host lives in one partition. The partition is
a Redis Cluster hash tag, ``{<crawl>/<p>}``: every key of a partition sits in
one hash slot, on one node, where one Lua script may touch them all
atomically. The crawl-wide keys carry the tag ``{<crawl>}``.

Crawl-wide (:attr:`Keyspace.meta`, :attr:`Keyspace.ranker_lock`,
:attr:`Keyspace.index_queue`, :attr:`Keyspace.indexer_lock`,
:attr:`Keyspace.similarity_df`, :attr:`Keyspace.recrawl_terms`)::

    cp:{<crawl>}:meta       HASH   the crawl's record: partitions, created; prioritizer
                                   (its FRONTIER_PRIORITIZER), due (the DUE's configuration)
    cp:{<crawl>}:ranker     STRING the ranker's lock (crawlproj/ranker/loop.py)
    cp:{<crawl>}:index      LIST   documents handed over to the indexer (crawlproj/search/handover.py)
    cp:{<crawl>}:indexer    STRING the indexer's lock (crawlproj/search/indexer.py)
    cp:{<crawl>}:totals     HASH   the crawl's Scrapy stats: every worker's counters summed
    cp:{<crawl>}:workers    ZSET   worker -> its last heartbeat (server ms)
    cp:{<crawl>}:w:<worker> HASH   a worker's own counters and its record (state, rate,
                                   leases held) as of its last heartbeat
    cp:{<crawl>}:control    HASH   the crawl's control as last set (pause, stop: server ms)
                                   (crawlproj/monitor/: heartbeat.lua, control.py)
    cp:{<crawl>}:hist       HASH   the crawl's history: first and last heartbeat, time run,
                                   and its rings (ring:<ms> -> samples kept)
    cp:{<crawl>}:hist:<ms>  HASH   a ring of samples, one per <ms> of the crawl: slot mod
                                   samples kept -> msgpack (crawlproj/monitor/history.py)
    cp:{<crawl>}:df         HASH   pages seen, and pages holding each word of the similarity
                                   prioritizer's query: its IDF (crawlproj/prioritizers/similarity.py)
    cp:{<crawl>}:recrawl    HASH   the recrawl plan's terms as the workers last planned
                                   (policy, budget, boost...: crawlproj/recrawl/schedule.py)

A crawl exists while its meta hash does: the first process of a crawl fixes
each field of the record, later ones read it (:meth:`Keyspace.agree`).

Per partition p, under :meth:`Keyspace.prefix` ``cp:{<crawl>/<p>}:``::

    heap ready leases idle  ZSETs  the frontier's host states  (frontier/lua/sync.lua)
    lease pending pend      the host and URL leases             (frontier/lua/sync.lua)
    q:<host> p:<host>       a host's back queue and payloads    (frontier/lua/sync.lua)
    d:<host> rready         a host's recrawl queue, hosts with a recrawl due (sync.lua)
    rbuckets budget         pages per change-rate bucket, the recrawl budget's tokens
    hosts fails stats       hosts seen, backoff counts, counters (frontier/lua/sync.lua)
    blocked delays          an operator's blocks and least delays of hosts (hostctl.lua)
    hs                      HASH   host -> its record for the operator: download ends by
                                   fate, last delay and backoff (sync.lua, monitor/hosts.py)
    hostpages               HASH   URLs leased per host: the trap guard's page budget
    control                 HASH   the crawl's control (pause, stop: server ms), which
                                   the lease hand-out honours (crawlproj/monitor/control.py)
    th:<host> trapped       the trap guard's recent simhashes of a host, and the
                            hosts it found trapped (crawlproj/traps/nearhost.py)
    due                     HASH   the DUE's configuration and state (due/lua/seen.lua)
    seen:<L>:<a>            SET    exact mode: a bucket of URL fingerprints
    bloom:<j>:<b>           STRING bloom mode: bitmap b of layer j
    cs:<fp> nd:<band> sk:<fp>      content-seen (crawlproj/due/contentseen.py), the
                                   partition being the fingerprint's, not a host's
    links links:segments links:lock  the link store (crawlproj/stores/linkstore.py)
    pm:<b>                  HASH   page metadata bucket b (crawlproj/stores/pagemeta.py)
    r:<origin>              STRING an origin's robots.txt rules, expiring (crawlproj/robots/cache.py)
    sitemaps                HASH   sitemap files taken per host: SITEMAP_MAX_FILES's count
                                   (crawlproj/sitemaps/budget.py)

Lua scripts get the partition prefix as KEYS[1] and name the keys under it
themselves; the methods here give Python the same names (tests/test_keyspace.py
checks that they agree).
"""

from __future__ import annotations

import time
from collections import Counter

import mmh3
from redis.cluster import RedisCluster

from crawlproj.addon import require_table
from crawlproj.errors import CrawlprojError
from crawlproj.urls import host_of

__all__ = ["CrawlIdError", "Keyspace", "NoSuchCrawl", "host_of"]

_ROOT = "cp:"
_GLOB_SPECIAL = "\\*?[]"


class CrawlIdError(CrawlprojError, ValueError):
    """A crawl id (or partition count) that cannot name a crawl's keys."""


class NoSuchCrawl(CrawlprojError):
    """A tool was given a crawl id that names no crawl on the server."""

    def __init__(self, crawl_id: str):
        super().__init__(f"no crawl {crawl_id!r} on this server "
                         "(`scrapy crawls list` shows the crawls there are)")


def _decoded(hash_: dict) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in hash_.items()}


def _glob_literal(text: str) -> str:
    """text as a SCAN pattern that matches itself only."""
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text)


def _key(name: str, doc: str):
    """The method naming a partition's key `name`."""
    def key(self, partition: int) -> str:
        return self._prefixes[partition] + name
    key.__doc__ = doc
    return key


def _member_key(name: str, doc: str):
    """The method naming a partition's key `name` + member (a host, a bucket)."""
    def key(self, partition: int, member) -> str:
        return f"{self._prefixes[partition]}{name}{member}"
    key.__doc__ = doc
    return key


def _pattern(name: str):
    """The method giving the SCAN pattern of a partition's keys that start with `name`."""
    def pattern(self, partition: int) -> str:
        return _glob_literal(self._prefixes[partition] + name) + "*"
    pattern.__doc__ = f"SCAN pattern of a partition's {name or 'keys'}* keys."
    return pattern


class Keyspace:
    """The key names of one crawl with a given partition count.

    Building one talks to no server; :meth:`open` and :meth:`from_settings`
    agree the partition count with the crawl first.
    """

    __slots__ = ("crawl_id", "partitions", "meta", "ranker_lock", "index_queue", "indexer_lock",
                 "totals", "workers", "crawl_control", "similarity_df", "recrawl_terms",
                 "history", "_prefixes")

    def __init__(self, crawl_id: str, partitions: int):
        if not isinstance(crawl_id, str) or not crawl_id:
            raise CrawlIdError(f"CRAWL_ID must be a non-empty string, not {crawl_id!r}")
        if "{" in crawl_id or "}" in crawl_id:
            # the id sits inside the keys' hash tag, which a brace would end
            raise CrawlIdError(f"CRAWL_ID must not contain {{ or }}: {crawl_id!r}")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise CrawlIdError(f"the partition count must be a positive integer, "
                               f"not {partitions!r}")
        self.crawl_id = crawl_id
        self.partitions = partitions
        self.meta = f"{_ROOT}{{{crawl_id}}}:meta"
        self.ranker_lock = f"{_ROOT}{{{crawl_id}}}:ranker"
        self.index_queue = f"{_ROOT}{{{crawl_id}}}:index"
        self.indexer_lock = f"{_ROOT}{{{crawl_id}}}:indexer"
        self.totals = f"{_ROOT}{{{crawl_id}}}:totals"
        self.workers = f"{_ROOT}{{{crawl_id}}}:workers"
        self.crawl_control = f"{_ROOT}{{{crawl_id}}}:control"
        self.similarity_df = f"{_ROOT}{{{crawl_id}}}:df"
        self.recrawl_terms = f"{_ROOT}{{{crawl_id}}}:recrawl"
        self.history = f"{_ROOT}{{{crawl_id}}}:hist"
        self._prefixes = [f"{_ROOT}{{{crawl_id}/{p}}}:" for p in range(partitions)]

    def __repr__(self):
        return f"Keyspace({self.crawl_id!r}, {self.partitions})"

    def __eq__(self, other):
        return isinstance(other, Keyspace) and (self.crawl_id, self.partitions) == \
            (other.crawl_id, other.partitions)

    def __hash__(self):
        return hash((self.crawl_id, self.partitions))

    # -- agreement with the crawl ---------------------------------------------

    @classmethod
    def open(cls, redis, crawl_id: str = "default", partitions: int = 1) -> Keyspace:
        """The crawl's keyspace. The first process of a crawl fixes its
        partition count in the meta hash; every later one adopts it, whatever
        it asked for: a host must fall in the same partition for every worker."""
        return cls.agree(redis, crawl_id, partitions)[0]

    @classmethod
    def agree(cls, redis, crawl_id: str, partitions: int,
              **fields: str) -> tuple[Keyspace, dict[str, str]]:
        """:meth:`open`, fixing ``fields`` of the crawl's record too, each
        unless a process fixed it before; returns the keyspace of the agreed
        partition count and the whole record, as the crawl has it.

        Each field is fixed on its own (HSETNX): two processes that start
        together may each fix some, but both then read the same record."""
        wanted = cls(crawl_id, partitions)
        pipe = redis.pipeline(transaction=False)
        pipe.hsetnx(wanted.meta, "partitions", partitions)
        pipe.hsetnx(wanted.meta, "created", f"{time.time():.3f}")
        for name, value in fields.items():
            pipe.hsetnx(wanted.meta, name, value)
        pipe.hgetall(wanted.meta)
        record = _decoded(pipe.execute()[-1])
        agreed = int(record["partitions"])
        return (wanted if agreed == partitions else cls(crawl_id, agreed)), record

    @classmethod
    def from_settings(cls, settings, redis) -> Keyspace:
        """:meth:`open` for CRAWL_ID with FRONTIER_PARTITIONS; None: the
        crawl's count, or for a new crawl :meth:`fitted_partitions`."""
        require_table(settings)
        crawl_id = settings.get("CRAWL_ID")
        if settings.get("FRONTIER_PARTITIONS") is not None:
            partitions = settings.getint("FRONTIER_PARTITIONS")
        else:
            crawl = cls.existing(redis, crawl_id)
            partitions = crawl.partitions if crawl else cls.fitted_partitions(redis, crawl_id)
        return cls.open(redis, crawl_id, partitions)

    @classmethod
    def of_index(cls, settings, redis) -> Keyspace:
        """The keyspace whose hand-over list and indexer lock this worker's
        pages go to: INDEX_CRAWL_ID's (a real-time search session hands its
        pages to the crawl it searches), else CRAWL_ID's. Those keys are the
        crawl's, in no partition, so the other crawl's partition count does
        not matter."""
        other = settings.get("INDEX_CRAWL_ID")
        return cls(other, 1) if other else cls.from_settings(settings, redis)

    @classmethod
    def fitted_partitions(cls, redis, crawl_id: str) -> int:
        """The partition count a new crawl gets from the server it starts on.

        A single server (or a cluster of one primary): 1. A sync sends one
        script call per partition it asks, and on one server more partitions
        spread nothing. A Redis Cluster of n primaries: a partition's keys sit
        in the hash slot of its tag, so where each partition lives is known
        beforehand; of the counts from 2n to 4n - 1, the one whose busiest
        primary holds the smallest share of the partitions (the fewest
        partitions on a tie). More per primary evens the load out only slowly,
        and every one costs script calls.
        """
        if not isinstance(redis, RedisCluster):
            return 1
        return cls.fitted_count(crawl_id, {node.name for node in redis.get_primaries()},
                                lambda key: redis.get_node_from_key(key).name)

    @classmethod
    def fitted_count(cls, crawl_id: str, primaries: set, primary_of) -> int:
        """fitted_partitions' rule for primaries, primary_of(key) naming the
        one that holds a key (so that it is computed, too, for a slot map no
        cluster serves: bench/scale_bench.py)."""
        n = len(primaries)
        if n < 2:
            return 1
        best, best_share = 2 * n, None
        for count in range(2 * n, 4 * n):
            keyspace = cls(crawl_id, count)
            held = Counter(primary_of(keyspace.prefix(p)) for p in range(count))
            share = max(held.values()) / count if set(held) == primaries else 1.0
            if best_share is None or share < best_share:
                best, best_share = count, share
        return best

    @classmethod
    def existing(cls, redis, crawl_id: str) -> Keyspace | None:
        """The keyspace of a crawl already on this server, or None; fixes nothing."""
        n = redis.hget(cls(crawl_id, 1).meta, "partitions")
        return None if n is None else cls(crawl_id, int(n))

    @classmethod
    def found(cls, redis, crawl_id: str) -> Keyspace:
        """:meth:`existing` for a tool that works on one crawl: NoSuchCrawl
        when there is none, rather than a new, empty crawl of a mistyped id."""
        keyspace = cls.existing(redis, crawl_id)
        if keyspace is None:
            raise NoSuchCrawl(crawl_id)
        return keyspace

    @classmethod
    def record(cls, redis, crawl_id: str) -> dict[str, str] | None:
        """The crawl's record (its meta hash), or None if there is no such crawl."""
        return _decoded(redis.hgetall(cls(crawl_id, 1).meta)) or None

    def delete(self, redis, batch: int = 1000) -> int:
        """Delete every key of the crawl, its record last; returns how many.
        Keys are found with SCAN (on each node of a cluster) and unlinked in
        batches as they come, one command per key, which a cluster routes by
        its slot."""
        deleted = 0
        keys: list = []

        def unlink():
            pipe = redis.pipeline(transaction=False)
            for key in keys:
                pipe.unlink(key)
            keys.clear()
            return sum(pipe.execute())

        for key in redis.scan_iter(match=self.partitions_pattern(), count=batch):
            keys.append(key)
            if len(keys) >= batch:
                deleted += unlink()
        for pattern in ("w:", "hist:"):
            for key in redis.scan_iter(match=_glob_literal(self.monitor_prefix + pattern) + "*",
                                       count=batch):
                keys.append(key)
        keys += [self.ranker_lock, self.index_queue, self.indexer_lock, self.totals,
                 self.workers, self.crawl_control, self.similarity_df,
                 self.recrawl_terms, self.history, self.meta]
        return deleted + unlink()

    @staticmethod
    def crawl_ids(redis) -> list[str]:
        """The ids of every crawl on this server (those with a meta hash)."""
        ids = set()
        for key in redis.scan_iter(match=_ROOT + "{*}:meta", count=1000):
            key = key.decode()
            ids.add(key[key.index("{") + 1:key.rindex("}")])
        return sorted(ids)

    # -- the crawl's monitor (crawlproj/monitor/) ----------------------------------

    @property
    def monitor_prefix(self) -> str:
        """KEYS[1] of heartbeat.lua: the crawl-wide keys' prefix."""
        return f"{_ROOT}{{{self.crawl_id}}}:"

    def worker(self, worker_id: str) -> str:
        """A worker's counters and record as of its last heartbeat."""
        return f"{self.monitor_prefix}w:{worker_id}"

    def history_ring(self, slot_ms: int) -> str:
        """The crawl's ring of history samples one slot_ms apart."""
        return f"{self.history}:{slot_ms}"

    # -- partitions --------------------------------------------------------------

    def partition_of(self, host: str) -> int:
        """Mercator's host splitter: all URLs of a host live in one partition."""
        return mmh3.hash(host, signed=False) % self.partitions

    def prefix(self, partition: int) -> str:
        """Every key of partition p starts with this (KEYS[1] of the Lua scripts)."""
        return self._prefixes[partition]

    def partitions_pattern(self) -> str:
        """SCAN pattern of every partition key of the crawl."""
        return _glob_literal(f"{_ROOT}{{{self.crawl_id}/") + "*"

    # -- the frontier (frontier/lua/sync.lua) -----------------------------------

    heap = _key("heap", "Hosts with queued URLs, by the time each may next be contacted.")
    ready = _key("ready", "Hosts whose time has come, by the score of their best URL.")
    leases = _key("leases", "Leased hosts, by lease deadline.")
    idle = _key("idle", "Hosts with no URL queued, by the time they may next be contacted.")
    pending = _key("pending", "Leased URLs that do not hold their host's lease (a page "
                              "not done yet, a run's next URLs), by deadline.")
    stats = _key("stats", "The partition's counters.")
    fails = _key("fails", "Hosts backed off: host -> failures in a row (errors, 429/503).")
    host_records = _key("hs", "Hosts' records for the operator: host -> msgpack of how "
                              "their downloads ended and why they wait (sync.lua).")
    blocked = _key("blocked", "Hosts an operator blocked: host -> the block's end (ms).")
    delays = _key("delays", "Hosts' least politeness delays an operator set: host -> ms.")
    queue = _member_key("q:", "A host's back queue: fingerprint -> score.")
    payloads = _member_key("p:", "A host's queued requests: fingerprint -> payload.")
    control = _key("control", "The crawl's control, which the lease hand-out honours: "
                              "pause, stop -> server ms.")
    host_pages = _key("hostpages", "URLs leased per host, while the trap guard's page "
                                   "budget is on: host -> count.")
    queues_pattern = _pattern("q:")
    payloads_pattern = _pattern("p:")
    # continuous crawling (docs/recrawl.md, "The live crawl")
    recrawl_queue = _member_key("d:", "A host's recrawl queue: fingerprint -> due time (ms); "
                                      "the payloads are in p:<host>.")
    recrawl_ready = _key("rready", "Hosts with a recrawl due, politeness allowing, by due time.")
    rate_buckets = _key("rbuckets", "Pages in the recrawl schedule per change-rate bucket: "
                                    "bucket -> count.")
    budget = _key("budget", "The recrawl budget's token bucket: t (tokens), at (ms); the "
                            "recent leases of never-crawled URLs and recrawls: sn, so.")
    recrawl_queues_pattern = _pattern("d:")

    # -- the DUE (due/lua/seen.lua) ---------------------------------------------

    due = _key("due", "The partition's copy of the DUE's configuration, and its state.")
    seen_pattern = _pattern("seen:")  # the exact mode's buckets

    def bloom_pattern(self, partition: int, layer: int) -> str:
        """SCAN pattern of the bloom mode's bitmaps of one layer."""
        return _glob_literal(f"{self.prefix(partition)}bloom:{layer}:") + "*"

    # -- the trap guard's near-duplicate pages (crawlproj/traps/middleware.py) -----------

    trap_hashes = _member_key("th:", "A host's recent pages' simhashes, newest first, "
                                     "each with its near-duplicate flag.")
    trapped = _key("trapped", "Hosts whose recent pages are near duplicates past the "
                              "budget: host -> their count.")

    # -- the content-seen test (due/contentseen.py) --------------------------------

    def _by_hash(self, kind: str, h: int) -> str:
        # spread over the partitions (and a cluster's nodes) by the hash itself
        h &= 0xFFFFFFFFFFFFFFFF
        return f"{self.prefix(h % self.partitions)}{kind}:{h:016x}"

    def content(self, fp: int) -> str:
        """The first URL seen with the document of fingerprint fp."""
        return self._by_hash("cs", fp)

    def near_band(self, band: int) -> str:
        """The first document whose sketch had this band."""
        return self._by_hash("nd", band)

    def sketch(self, fp: int) -> str:
        """The sketch and URL of document fp."""
        return self._by_hash("sk", fp)

    content_pattern = _pattern("cs:")

    # -- the link store (stores/linkstore.py) and page metadata (stores/pagemeta.py)

    links = _key("links", "The link store's working set: one element per parsed page.")
    link_segments = _key("links:segments", "The link store's segment descriptors.")
    links_lock = _key("links:lock", "The link store's compaction lock.")
    pagemeta = _member_key("pm:", "A bucket of page metadata: fingerprint -> history.")
    pagemeta_pattern = _pattern("pm:")

    # -- the robots cache (robots.py) ---------------------------------------------

    robots = _member_key("r:", "An origin's robots.txt rules (in its host's partition).")
    robots_pattern = _pattern("r:")

    # -- sitemaps (crawlproj/sitemaps) ------------------------------------------------

    sitemap_files = _key("sitemaps", "Sitemap files taken per host, crawl-wide: host -> count.")
    partition_pattern = _pattern("")  # every key of one partition
