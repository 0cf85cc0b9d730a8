"""The ranker at work: PageRank on the graph the crawl has gathered, pushed
back into the frontier as the priorities of every queued URL.

Cho, Garcia-Molina & Page (1998) §3-4 order the frontier by IR'(P), PageRank
computed on the pages seen so far, recomputed as the crawl grows; Najork &
Wiener (2001) §4 count only links between different hosts
(PRIORITIZER_CROSS_HOST_ONLY). Between two runs, newly found URLs get the
estimate of crawlproj.prioritizers.links.PageRankEstimate on the same scale
(Cho's: the average page has rank 1).

One run: read the link store (Parquet segments + the Redis working set), map
URL fingerprints to dense ids, power-iterate warm-started from the previous
run's vector (crawlproj.ranker.pagerank), then rewrite queued scores with
Frontier.rescore. Only one process of a crawl ranks at a time: the holder of
a Redis lock, renewed while it lives and taken over by another worker when it
dies (its TTL runs out).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from crawlproj.errors import CrawlprojError
from crawlproj.ranker.pagerank import (
    CHO_DAMPING,
    TransitionMatrix,
    build_adjacency,
    pagerank,
)
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)

# Renew if still ours; take if free. Returns 1 when the caller holds the lock.
_TAKE = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0
"""
_DROP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RankerLock:
    """At most one ranker per crawl (the key lives in the crawl's meta slot)."""

    def __init__(self, redis, keyspace, ttl: float = 60.0):
        self.redis = redis
        self.key = keyspace.ranker_lock
        self.ttl_ms = int(ttl * 1000)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    def hold(self) -> bool:
        """Take the lock if free, renew it if ours; True if we hold it now."""
        return bool(self.redis.eval(_TAKE, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> None:
        self.redis.eval(_DROP, 1, self.key, self.token)

    def holder(self) -> str | None:
        v = self.redis.get(self.key)
        return v.decode() if v else None


@dataclass
class RankRun:
    nodes: int
    edges: int
    iterations: int
    converged: bool
    queued: int          # queued URLs looked at
    changed: int         # ... whose score was rewritten
    seconds: dict        # graph, rank, rescore

    def __str__(self):
        t = self.seconds
        return (f"{self.nodes:,} nodes, {self.edges:,} links, {self.iterations} iterations"
                f"{'' if self.converged else ' (not converged)'}; {self.changed:,} of "
                f"{self.queued:,} queued URLs rescored; graph {t['graph']:.2f} s, "
                f"rank {t['rank']:.2f} s, rescore {t['rescore']:.2f} s")


class Ranker:
    def __init__(self, frontier, links, damping: float = CHO_DAMPING,
                 cross_host_only: bool = False, tol: float = 1e-6):
        self.frontier = frontier
        self.links = links
        self.damping = damping
        self.cross_host_only = cross_host_only
        self.tol = tol
        self._nodes: np.ndarray | None = None   # sorted fingerprints of the last run
        self._scores: np.ndarray | None = None
        self._factor = 1.0
        self._check_fingerprints()

    def _check_fingerprints(self):
        """The queues hold the DUE's fingerprints; the link store's node ids are
        64-bit ones. Read, not fixed: the crawl's workers fix the DUE's
        configuration, and one may do so after the ranker started."""
        agreed = self.frontier.due.agreed()
        if agreed is not None and agreed.bits != 64:
            raise CrawlprojError("the ranker needs 64-bit URL fingerprints "
                                 "(DUE_FINGERPRINT_BITS = 64): the link store's node ids")

    def gather(self):
        """(src, dst) int64 fingerprints of every link stored so far that the
        crawl follows (a nofollow link gives its target no credit, as the
        backlink and OPIC orders, which count followed links, give none;
        crawlproj/robots/meta.py), and {fingerprint: host} when links are
        counted across hosts only."""
        src, dst, hosts = [], [], {} if self.cross_host_only else None
        for p in range(self.frontier.partitions):
            for seg in self.links.segments(p):
                path = seg["files"]["edges"]
                marked = "nofollow" in pq.read_schema(path).names
                t = pq.read_table(path, columns=["src", "dst", "nofollow"] if marked else ["src", "dst"])
                if marked:
                    t = t.filter(pc.invert(t["nofollow"]))
                src.append(t["src"].to_numpy())
                dst.append(t["dst"].to_numpy())
                if hosts is not None:
                    u = pq.read_table(seg["files"]["urls"])
                    for fp, url in zip(u["id"].to_pylist(), u["url"].to_pylist()):
                        hosts.setdefault(fp, host_of(url))
            for page in self.links.working_set(p, with_text=hosts is not None):
                d = np.frombuffer(page.dsts, dtype=np.int64)
                if page.marks:
                    d = d[~page.nofollow()]
                src.append(np.full(len(d), page.src, dtype=np.int64))
                dst.append(d)
                if hosts is not None:
                    hosts.setdefault(page.src, host_of(page.src_url))
                    for fp, url in zip(page.dsts, page.urls):
                        hosts.setdefault(fp, host_of(url))
        def cat(xs):
            return np.concatenate(xs) if xs else np.zeros(0, np.int64)
        return cat(src), cat(dst), hosts

    def run_once(self) -> RankRun:
        self._check_fingerprints()
        t0 = time.perf_counter()
        src, dst, hosts = self.gather()
        nodes, ids = np.unique(np.concatenate([src, dst]), return_inverse=True)
        n, m = len(nodes), len(src)
        adj = build_adjacency(ids[:m], ids[m:], n=n)
        host_ids = None
        if hosts is not None:
            index: dict[str, int] = {}
            host_ids = np.array([index.setdefault(hosts.get(int(fp), ""), len(index))
                                 for fp in nodes], dtype=np.int64)
        tm = TransitionMatrix(adj, hosts=host_ids)
        t1 = time.perf_counter()
        result = pagerank(tm, self.damping, x0=self._warm_start(nodes), tol=self.tol)
        self._nodes, self._scores = nodes, result.scores
        # Every page gets the same share of the dangling pages' rank (Cho §2),
        # while the estimate for a URL found between two runs,
        # (1 - d) + d IR(T)/c(T) (PageRankEstimate), has none. Scaling the
        # vector so that its constant term is (1 - d) alone gives the solution
        # of exactly that equation, so estimates and rewritten scores agree.
        dangling = float(result.scores[tm.dangling].sum()) / n if n else 0.0
        d = self.damping
        self._factor = (1.0 - d) / ((1.0 - d) + d * dangling) if n else 1.0
        t2 = time.perf_counter()
        totals = self.frontier.rescore(self.scores_of) if n else {"urls": 0, "changed": 0}
        t3 = time.perf_counter()
        return RankRun(n, m, result.iterations, result.converged, totals["urls"],
                       totals["changed"], {"graph": t1 - t0, "rank": t2 - t1, "rescore": t3 - t2})

    def save(self, path) -> None:
        """Keep the last run's vector for the next run's warm start (the next
        run is another process: crawlproj/ranker/process.py)."""
        if self._nodes is None:
            return
        tmp = f"{path}.{os.getpid()}.npz"
        np.savez(tmp, nodes=self._nodes, scores=self._scores)
        os.replace(tmp, path)

    def load(self, path) -> None:
        """The vector a previous run kept, if any (a missing or unreadable
        file: the run starts cold, at the average)."""
        try:
            with np.load(path) as kept:
                self._nodes, self._scores = kept["nodes"], kept["scores"]
        except Exception:  # missing, empty, cut short: np.load has many ways to say so
            self._nodes = self._scores = None

    def _warm_start(self, nodes: np.ndarray):
        """The previous vector, aligned to the grown graph; new pages start at
        the average (1 on Cho's scale)."""
        if self._nodes is None or not len(self._nodes) or not len(nodes):
            return None
        idx = np.minimum(np.searchsorted(self._nodes, nodes), len(self._nodes) - 1)
        found = self._nodes[idx] == nodes
        return np.where(found, self._scores[idx], 1.0)

    def scores_of(self, fps) -> list:
        """Frontier scores (lower = sooner) for queued fingerprints: -IR; None
        for a URL the link store does not know (a seed), which keeps its own."""
        a = np.asarray(fps, dtype=np.int64)
        idx = np.minimum(np.searchsorted(self._nodes, a), len(self._nodes) - 1)
        found = self._nodes[idx] == a
        ranks = self._scores[idx] * self._factor
        return [-float(r) if f else None for r, f in zip(ranks, found)]
