"""The live crawler orders as the virtual one does (issue #5, item 5).

    .venv/bin/python bench/live_orders.py [--graph FILE | --web hosts=500,pages=20000,seed=1]
        [--orders bfs,random,backlinks,pagerank,opic[,ORDER+NAME=VALUE...]]
        [--configs 1x1x0[,1x16x0,2x8x10] | --concurrency 1[,8]] [--hot-share 0.01]
        [--latency-ms 0 | LO-HI] [--start NODE] [--ranker-every N] [--ranker-tick S]
        [--random-seeds 200] [--tie-seeds 10] [--tol-pst 10] [--tol-avg 0.25]
        [--page-bytes 2000] [--timeout 900] [--out docs/img/ordering/live] [--keep DIR [--reuse]]

For one link-graph file (default: the Hollins University site, 6,012 pages with
their real URLs; see docs/ordering.md, "Live crawler vs virtual crawler"):

1. The virtual crawler (crawlproj.evaluate: the same graph reader, start rule,
   importance, hot pages and orders as `scrapy evaluate`) crawls the graph once
   per order.
2. The same graph, read by the same reader (crawlproj.graphfile), is served by
   the simulated web (SimWeb.from_graph in its own process, latency 0, no
   Crawl-delay, no robots rules) and checked against the
   virtual crawler's graph: pages the simulated web cannot serve, link sets that
   differ, what the pages answer (HTML or binary), the reachable set.
3. Per order, a live crawl: a fresh Redis-protocol server
   (crawlproj.redis.embedded.spawn_server on a free loopback port), a fresh simulated
   web with its own request log, and ONE real `scrapy crawl web` worker with
   CONCURRENT_REQUESTS=1, FRONTIER_PREFETCH=1 and FRONTIER_DELAY_FACTOR=0: the
   worker holds one lease at a time and every host is ready again as soon as
   its page is done, so each request is the frontier's best URL at that moment
   and the order is the prioritizer's, not politeness's nor the downloader's.
   The pagerank order runs its ranker in the worker every RANKER_EVERY_PAGES
   pages (default: 1% of the graph, the virtual crawler's recompute cadence),
   checked every RANKER_TICK seconds (RANKER_INTERVAL is set out of reach, so
   only the page count triggers it). --concurrency 1,8 adds runs with 8
   concurrent requests (and 8 prefetched leases) to show what that changes.
4. The live order is the simulated web's request log in order of arrival
   (robots.txt left out), mapped back to the virtual crawler's page ids; the
   same metric code (crawlproj.evaluate.metrics) gives PST (% of hot pages
   crawled) at each tenth of the crawl, for Cho's two hot sets (IB >= 100,
   IR >= 13), and the average PageRank of each tenth (Najork & Wiener Fig. 1).
5. Comparison, per order, at each of the 10 tenths: |PST live - PST virtual|
   <= --tol-pst points (both hot sets) and |avg live - avg virtual| <=
   --tol-avg x avg virtual. Random order can only agree in distribution (its
   seeds differ): the live crawl passes if it could be one of --random-seeds
   virtual random crawls, by a global envelope test over its 30 numbers at
   level 0.05 (class Law), which by construction fails 5% of those crawls.

Live, polite crawls (docs/ordering.md, "Live, polite crawls"): --web generates a
simulated web with Zipf host sizes (SimWeb.generate) and writes it as a graph
file, so both sides read one graph; --configs runs each order under each set-up
WORKERSxCONCURRENCYxDELAY_FACTOR (prefetch 1 with one request at a time, else
the default), the orders of one set-up one after another so that the machine's
load hits them alike; an order written ORDER+NAME=VALUE is a variant with
those worker settings (an A/B of a knob in one run); --ranker-every 0 leaves
the ranker's cadence at the settings' defaults; --hot-share 0.01 makes the hot
pages the top 1% by in-degree (IB) and by PageRank (IR). Then, per set-up, the
races: pagerank not below bfs at any tenth for the top pages by PageRank, and
ahead at the first tenth where the virtual crawler is ahead; backlinks likewise
by in-degree (OUT/races.csv); and per crawl why hot pages came after the first
tenth: discovered late, or discovered and then waiting behind their own host's
other URLs (how many, how many of them less important), the largest hosts'
fetches in the first tenth and time between fetches, the ranker's runs; and
each backlinks crawl judged by its own key (backlink_waits: the fetches a late
hot page's host made while it waited that IB' would not have made, with the
virtual backlinks and bfs crawls judged alike as calibration).

Diagnostics (they explain a difference, they do not change a verdict):
sequence agreement (identical order? Spearman rho of positions, mean position
shift, overlap of the first 10%), the virtual crawler's own sensitivity to
its tie rule (ties broken as the live frontier breaks them: host name, then
URL fingerprint, and by random permutations), and "live-rule replicas": the
virtual crawler run with the rule the live prioritizer documents where it
differs from the virtual order's (OPIC without the virtual page that
redistributes dangling pages' cash; PageRank recomputed on the ranker's scale
and cadence; random priorities drawn once per URL), to show whether the live
crawl is exactly that rule.

--tie-seeds 0 leaves out the virtual-side diagnostics below (they replay each
order several times, which on 20,000 pages takes minutes).

Writes OUT/live_orders.csv (one row per order, run, measure and tenth),
OUT/summary.txt (what is printed) and OUT/live_orders.png (virtual solid,
live dashed, per order). Servers and workers are stopped in `finally`; work
files go to a temporary directory (kept with --keep DIR; --reuse measures the
crawls kept there again without crawling). Exit status: 0 when every crawl gave
an order (a FAIL verdict is a finding, not an error), 1 if a crawl failed, 2 on
bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scipy.stats import spearmanr

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.evaluate import crawler as vc
from crawlproj.evaluate import metrics
from crawlproj.evaluate.graph import GraphFormatError, read_graph
from crawlproj.evaluate.run import CHO_G_IB, CHO_G_IR, evaluate
from crawlproj.ranker.pagerank import pagerank
from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.simweb import SimWeb, checks
from crawlproj.simweb.model import K_BINARY, K_OK
from crawlproj.simweb.testing import SimWebServer
from crawlproj.urls import host_of as frontier_host

DEFAULT_GRAPH = ROOT.parent / "shared" / "data" / "graphs" / "with_urls" / "hollins" / "hollins.dat.gz"
ORDERS = ("bfs", "random", "backlinks", "pagerank", "opic")
TENTHS = np.arange(1, 11) / 10.0


class BenchError(Exception):
    """A problem that stops the bench, printed as one line."""


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- The graph, twice: the virtual crawler's and the simulated web's ---------------------

class Pairing:
    """The virtual crawler's graph (read_graph) and the simulated web over the same
    file, with the page mapping between them and the checks that they agree. Both
    read the file with crawlproj.graphfile, so a page's URL is the same on both
    sides and the mapping is by URL; the checks guard that."""

    def __init__(self, path: str, spec: dict, graph):
        self.graph = graph
        self.web = SimWeb.from_spec(spec)
        g, w = graph, self.web
        n = g.n
        self.to_web = np.full(n, -1, dtype=np.int64)
        if g.urls is not None:
            if getattr(w, "_urls", None) is None:
                raise BenchError(f"{path}: the evaluator read URLs but the simulated web has "
                                 "synthetic hosts; give a graph both read the same way")
            for i, u in enumerate(g.urls):
                node = w.node_of(u)
                if node is not None:
                    self.to_web[i] = node
        else:
            k = min(n, w.n_nodes)
            self.to_web[:k] = np.arange(k)
        self.from_web = np.full(w.n_nodes, -1, dtype=np.int64)
        mapped = np.flatnonzero(self.to_web >= 0)
        if len(np.unique(self.to_web[mapped])) != len(mapped):
            raise BenchError("two virtual pages map to one page of the simulated web "
                             "(merged URLs); the orders could not be compared page by page")
        self.from_web[self.to_web[mapped]] = mapped
        self.servable = self.to_web >= 0

    def check(self, start: int, universe: np.ndarray) -> dict:
        """What the simulated web serves against what the virtual crawler crawls."""
        g, w = self.graph, self.web
        off, dst = w.edges()
        differ = []
        for i in np.flatnonzero(self.servable):
            mine = set(self.to_web[g.successors(i)].tolist()) - {-1}
            node = int(self.to_web[i])
            theirs = {int(t) for t in dst[off[node]:off[node + 1]]} - {node}
            mine.discard(node)
            if mine != theirs:
                differ.append(int(i))
        kinds = {K_OK: 0, K_BINARY: 0}
        other = 0
        for v in range(w.n_nodes):
            k = w._kind(v)
            if k in kinds:
                kinds[k] += 1
            else:
                other += 1
        binary_with_links = sum(1 for v in range(w.n_nodes)
                                if w._kind(v) == K_BINARY and off[v + 1] > off[v])
        start_url = w.url(int(self.to_web[start]))
        reach_urls = w.reachable([start_url], obey_robots=True)
        reach_web = {w.node_of(u) for u in reach_urls}
        extra_urls = sum(1 for x in reach_web if x is None)
        reach_mapped = np.zeros(g.n, dtype=bool)
        ids = [int(self.from_web[x]) for x in reach_web if x is not None]
        reach_mapped[[i for i in ids if i >= 0]] = True
        unservable = np.flatnonzero(~self.servable)
        return {
            "virtual_pages": g.n, "virtual_links": g.m, "web_pages": w.n_nodes,
            "web_hosts": len(w.hosts), "web_load_stats": dict(getattr(w, "load_stats", {})),
            "unservable": [(int(i), g.urls[i] if g.urls else str(i), bool(universe[i]))
                           for i in unservable],
            "link_sets_differ": differ,
            "html_pages": kinds[K_OK], "binary_pages": kinds[K_BINARY], "other_kinds": other,
            "binary_reachable": int(sum(1 for i in np.flatnonzero(universe & self.servable)
                                        if w._kind(int(self.to_web[i])) == K_BINARY)),
            "binary_with_links": binary_with_links,
            "start_url": start_url,
            "web_reachable": len(reach_urls), "web_reachable_not_pages": extra_urls,
            "reachable_equal": bool(np.array_equal(reach_mapped, universe & self.servable)),
        }


def write_generated(options: str, path: Path) -> dict:
    """A generated simulated web (SimWeb.generate: Zipf host sizes) written as a
    graph file in hollins.dat's format, so that the virtual crawler and the
    simulated web read one graph: every page and its links to pages (links to
    missing pages and binary resources, statuses and robots rules are the
    generated web's own and are left out)."""
    opts: dict = {}
    for part in options.split(","):
        if not part.strip():
            continue
        k, sep, v = part.partition("=")
        if not sep:
            raise BenchError(f"--web: KEY=VALUE,... of SimWeb.generate options (got {part!r})")
        try:
            opts[k.strip()] = int(v)
        except ValueError:
            try:
                opts[k.strip()] = float(v)
            except ValueError:
                opts[k.strip()] = v
    try:
        web = SimWeb.generate(**opts)
    except (TypeError, ValueError) as exc:
        raise BenchError(f"--web: {exc}") from None
    off, dst = web.edges()
    n = web.n_nodes
    links = sorted({(v, int(t)) for v in range(n) for t in dst[off[v]:off[v + 1]] if t != v})
    with open(path, "w") as fh:
        fh.write(f"{n} {len(links)}\n")
        fh.writelines(f"{v} {web.url(v)}\n" for v in range(n))
        fh.writelines(f"{a} {b}\n" for a, b in links)
    sizes = sorted((web.host_size(h) for h in web.hosts), reverse=True)
    return {"options": opts, "pages": n, "links": len(links), "hosts": len(web.hosts),
            "largest_hosts": sizes[:5]}


# -- Live-rule replicas of the virtual orders (diagnostics) ---------------------------------

def tie_ranks(pair: Pairing) -> np.ndarray:
    """Each page's place in the live frontier's tie order: among equal scores, the
    ready hosts' ZSET serves the lower host name first and a host's back queue the
    lower fingerprint member (its decimal string, compared as bytes)."""
    g, w = pair.graph, pair.web
    keys = []
    for i in range(g.n):
        node = int(pair.to_web[i])
        if node < 0:
            keys.append(("\x7f", b"\x7f"))  # never served live: last
            continue
        url = w.url(node)
        keys.append((frontier_host(url), str(url_fingerprint(url)).encode()))
    rank = np.empty(g.n, dtype=np.int64)
    rank[sorted(range(g.n), key=keys.__getitem__)] = np.arange(g.n)
    return rank


def _with_ties(cls, rank: np.ndarray):
    """A heap order whose ties go by ``rank`` instead of discovery order."""
    class Tied(cls):
        def _number(self, pages):
            self.seq[pages] = rank[pages]
    Tied.__name__ = f"{cls.__name__}Tied"
    return Tied


def _opic_live(rank):
    class OPICLive(_with_ties(vc.OPIC, rank)):
        """crawlproj.prioritizers.links.OPIC as its docstring says: a fetched page
        passes its cash to its links in equal shares; a page without links keeps
        nothing and gives nothing (no virtual page spreading it, unlike the
        virtual OPIC); cash for pages already fetched is lost."""

        def visited(self, page, successors, new):
            self.add(new, page)
            cash = self.prio[page]
            self.prio[page] = 0.0
            if len(successors):
                self.prio[successors] += vc.opic_share(cash, len(successors))
                self._push(successors[~self.crawled[successors]])
    return OPICLive


def _pagerank_live(rank, every: int, cadence: str = "ranker", scale: str = "ranker"):
    """The virtual PageRank order with the live rules (frontier ties always); the
    cadence and the scale can each be the ranker's or the virtual crawler's, to
    tell which of the two makes a difference."""

    class PageRankLive(_with_ties(vc.PageRankOrder, rank)):
        """The live pagerank order's rules: a seed scores 1 (the average page); a
        new URL gets (1 - d) + d IR(T)/c(T) and each further link adds d IR(T)/c(T)
        (PageRankEstimate); every `every` crawled pages (no early solves) the
        ranker replaces every queued score by PageRank of the graph seen so far on
        Cho's mean-1 scale (crawlproj.ranker.loop: nodes = pages known, links of
        crawled pages, tol 1e-6), which includes the dangling pages' share."""

        def add(self, pages, parent):
            self._number(pages)
            self.prio[pages] = 1.0 if parent is None else self.base
            if parent is None:
                self._push(pages)

        def visited(self, page, successors, new):
            if cadence != "ranker":
                return super().visited(page, successors, new)  # after 1, 2, 4, ... pages too
            self.add(new, page)
            a = self.adj
            targets = a.indices[a.indptr[page]:a.indptr[page + 1]]
            targets = targets[~self.crawled[targets]]
            if len(targets):
                self.prio[targets] += vc.pagerank_contribution(self.prio[page], self.outdeg[page],
                                                               self.damping)
                self._push(targets)
            self.n_crawled += 1
            if self.n_crawled % every == 0:
                self._solve()

        def _solve(self):
            if scale != "ranker":
                return super()._solve()  # the common dangling term taken out
            known = np.flatnonzero(self.discovered)
            sub = self.adj[known][:, known].tocsr()
            keep = self.crawled[known].astype(np.float64)
            sub = (sp.diags(keep, format="csr") @ sub).tocsr()
            sub.eliminate_zeros()
            res = pagerank(sub, self.damping, x0=None, tol=1e-6)
            self.solves += 1
            self.iterations += res.iterations
            self.prio[known] = res.scores
            self._rebuild(np.flatnonzero(self.discovered & ~self.crawled))
    return PageRankLive


class RandomKeys(vc.Order):
    """crawlproj.prioritizers.basic.RandomOrder's rule: a uniform random priority
    drawn once, when a URL is enqueued; the lowest is served first. Not the same
    law as a uniform choice from the queue (the virtual random order): a URL that
    has waited long has, given that it was passed over, a high key, so newer URLs
    are likelier to go next."""

    def __init__(self, *a, seed: int = 0, **kw):
        super().__init__(*a, **kw)
        import heapq
        import random
        self._heapq = heapq
        self.random = random.Random(seed)
        self.heap: list = []

    def add(self, pages, parent):
        for u in pages.tolist():
            self._heapq.heappush(self.heap, (self.random.random(), u))

    def pop(self):
        return self._heapq.heappop(self.heap)[1] if self.heap else None


def replay(graph, policy_factory, start: int) -> np.ndarray:
    """Cho's Fig. 1 loop (crawlproj.evaluate.crawler.virtual_crawl) with a given order."""
    n = graph.n
    crawled = np.zeros(n, dtype=bool)
    discovered = np.zeros(n, dtype=bool)
    policy = policy_factory(graph, crawled, discovered)
    indptr, indices = graph.adjacency.indptr, graph.adjacency.indices
    out = []
    discovered[start] = True
    policy.add(np.array([start], dtype=np.int64), None)
    while True:
        page = policy.pop()
        if page is None:
            break
        crawled[page] = True
        out.append(page)
        succ = indices[indptr[page]:indptr[page + 1]]
        new = succ[~discovered[succ]]
        discovered[new] = True
        policy.visited(page, succ, new)
    return np.array(out, dtype=np.int64)


# -- Measures -----------------------------------------------------------------------------

def at_tenths(curve: np.ndarray) -> np.ndarray:
    n = len(curve)
    return np.array([curve[min(n, max(1, int(round(f * n)))) - 1] for f in TENTHS])


def measures(order: np.ndarray, ev) -> dict:
    return {"pst_ib": at_tenths(metrics.pst_curve(order, ev.hot_ib)),
            "pst_ir": at_tenths(metrics.pst_curve(order, ev.hot_ir)),
            "avg_pagerank": metrics.tenth_averages(order, ev.ir)}


def agreement(a: np.ndarray, b: np.ndarray, n: int) -> dict:
    """How alike two crawl orders are, over the pages both crawled."""
    common = np.intersect1d(a, b)
    keep = np.zeros(n, dtype=bool)
    keep[common] = True
    a2, b2 = a[keep[a]], b[keep[b]]
    pa = np.full(n, -1)
    pb = np.full(n, -1)
    pa[a2] = np.arange(len(a2))
    pb[b2] = np.arange(len(b2))
    k = 0
    while k < len(a2) and a2[k] == b2[k]:
        k += 1
    tenth = max(1, len(a2) // 10)
    rho = float(spearmanr(pa[common], pb[common]).statistic) if len(common) > 2 else float("nan")
    return {"identical": bool(np.array_equal(a2, b2)), "prefix": k, "rho": rho,
            "mean_shift": float(np.abs(pa[common] - pb[common]).mean()) if len(common) else 0.0,
            "first_tenth_overlap": len(np.intersect1d(a2[:tenth], b2[:tenth])) / tenth,
            "common": len(common)}


def compare(live: dict, ref: dict, tol_pst: float, tol_avg: float) -> dict:
    d_ib = np.abs(live["pst_ib"] - ref["pst_ib"])
    d_ir = np.abs(live["pst_ir"] - ref["pst_ir"])
    rel = np.abs(live["avg_pagerank"] - ref["avg_pagerank"]) / ref["avg_pagerank"]
    ok = bool((d_ib <= tol_pst + 1e-9).all() and (d_ir <= tol_pst + 1e-9).all()
              and (rel <= tol_avg + 1e-9).all())
    return {"d_pst_ib": d_ib, "d_pst_ir": d_ir, "rel_avg": rel, "pass": ok,
            "max_d_pst_ib": float(d_ib.max()), "max_d_pst_ir": float(d_ir.max()),
            "max_rel_avg": float(rel.max())}


def _lex_le(rows: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each row, whether it is lexicographically <= x."""
    diff = rows != x
    first = np.where(diff.any(axis=1), diff.argmax(axis=1), -1)
    idx = np.arange(len(rows))
    return (first < 0) | (rows[idx, first] < x[first])


class Law:
    """What many crawls of one random order look like, and a test of whether one more
    crawl could be one of them: the global envelope test with extreme rank lengths
    (Myllymaki, Mrkvicka, Grabarnik, Seijo & Hahn 2017, "Global envelope tests for
    spatial processes", JRSS B 79: 381-404).

    Each crawl gives 30 numbers (PST by IB and by IR and the average PageRank, at
    each tenth). At each point a crawl's two-sided rank p-value among the others is
    2 x min(share <= it, share >= it), capped at 1 (ties count on both sides, so
    where every crawl agrees, e.g. 100% of the hot pages at the end, only that
    value scores 1). A crawl is the more extreme the lexicographically smaller its
    sorted 30 p-values (its most extreme point first, ties broken by the next).
    The global p-value of x is the share of the N crawls (each ranked among the
    other N - 1) at least as extreme as x; x passes at level 0.05 when it is above
    0.05, which fails about 1 crawl in 20 of the same law, whatever the shape of
    the 30 distributions. The 95% global envelope (min and max over the crawls not
    among the 5% most extreme) is what the plot and the band rows show."""

    KEYS = ("pst_ib", "pst_ir", "avg_pagerank")

    def __init__(self, many: list[dict], alpha: float = 0.05):
        self.n = len(many)
        self.alpha = alpha
        self.arr = np.hstack([np.array([m[k] for m in many]) for k in self.KEYS])  # N x 30
        self.center = {k: np.median(np.array([m[k] for m in many]), axis=0) for k in self.KEYS}
        a = self.arr
        le = (a[None, :, :] <= a[:, None, :]).sum(axis=1) - 1   # others <= crawl i
        ge = (a[None, :, :] >= a[:, None, :]).sum(axis=1) - 1
        p = np.minimum(1.0, 2.0 * np.minimum(le, ge) / (self.n - 1))
        self.sorted_p = np.sort(p, axis=1)
        # each crawl's global p-value (leave-one-out), then the envelope of the rest
        self.p_global = np.array([_lex_le(self.sorted_p, r).mean() for r in self.sorted_p])
        keep = self.p_global > alpha
        self.lo, self.hi = a[keep].min(axis=0), a[keep].max(axis=0)

    def test(self, m: dict) -> dict:
        x = np.concatenate([m[k] for k in self.KEYS])
        le = (self.arr <= x + 1e-12).mean(axis=0)
        ge = (self.arr >= x - 1e-12).mean(axis=0)
        p = np.sort(np.minimum(1.0, 2.0 * np.minimum(le, ge)))
        p_global = float((1 + _lex_le(self.sorted_p, p).sum()) / (self.n + 1))
        bad = (x < self.lo - 1e-12) | (x > self.hi + 1e-12)
        return {"T": float(p[0]), "p_global": p_global, "pass": p_global > self.alpha,
                "false_fail": float((self.p_global <= self.alpha).mean()),
                "outside": {k: bad[10 * i:10 * i + 10] for i, k in enumerate(self.KEYS)}}

    def band(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        i = self.KEYS.index(key)
        return self.lo[10 * i:10 * i + 10], self.hi[10 * i:10 * i + 10]


def base_order(label: str) -> str:
    """'pagerank+RANKER_GROWTH=0' -> 'pagerank': a live variant's order."""
    return label.split("+")[0]


def variant_settings(label: str) -> dict:
    """'pagerank+RANKER_GROWTH=0+RANKER_TICK=1' -> the worker settings it adds."""
    out = {}
    for part in label.split("+")[1:]:
        k, sep, v = part.partition("=")
        if not sep or not k:
            raise BenchError(f"--orders: ORDER+NAME=VALUE+... (got {label!r})")
        out[k] = v
    return out


def race(live: dict, virtual: dict) -> list[tuple]:
    """The issue's targets for one set-up: pagerank not below bfs at any tenth for
    the top pages by PageRank, and ahead at the first tenth where the virtual
    crawler puts it ahead; backlinks likewise for the top pages by in-degree.
    Rows: (order, hot set, live curve, bfs live curve, virtual ahead at 1st tenth,
    verdict)."""
    rows = []
    bfs = next((label for label in live if base_order(label) == "bfs"), None)
    if bfs is None:
        return rows
    for label in live:
        o = base_order(label)
        key = {"pagerank": "pst_ir", "backlinks": "pst_ib"}.get(o)
        if key is None:
            continue
        mine, base = live[label][key], live[bfs][key]
        ahead_virtual = bool(virtual[o][key][0] > virtual["bfs"][key][0])
        ok = bool((mine >= base - 1e-9).all()) and (not ahead_virtual or mine[0] > base[0])
        rows.append((label, key, mine, base, ahead_virtual, "PASS" if ok else "FAIL"))
    return rows


def diagnose(seq: np.ndarray, times: np.ndarray, graph, ev, hot: np.ndarray) -> dict:
    """Why hot pages come late, from the request log and the graph: per hot page,
    when it was discovered (the fetch of the first page linking to it) and when it
    was fetched, and what its host fetched in between (Mercator: a host's back
    queue should serve its best URLs first)."""
    n = len(seq)
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[seq] = np.arange(n)
    inv = graph.adjacency.T.tocsr()
    hosts = graph.hosts if graph.hosts is not None else np.zeros(graph.n, dtype=np.int32)
    tenth = max(1, n // 10)
    host_seq: dict[int, np.ndarray] = {}
    fetched_hosts = hosts[seq]
    for h in np.unique(fetched_hosts):
        host_seq[int(h)] = np.flatnonzero(fetched_hosts == h)  # crawl positions of its fetches
    late, order_bound, disc_bound, waits, worse_share, host_size = [], 0, 0, [], [], []
    size = np.bincount(hosts, minlength=int(hosts.max()) + 1 if len(hosts) else 1)
    for v in np.flatnonzero(hot & (pos >= 0)):
        parents = inv.indices[inv.indptr[v]:inv.indptr[v + 1]]
        pp = pos[parents]
        pp = pp[pp >= 0]
        disc = int(pp.min()) if len(pp) else -1
        if pos[v] < tenth:
            continue
        late.append(int(v))
        host_size.append(int(size[hosts[v]]))
        if disc >= tenth:
            disc_bound += 1
            continue
        order_bound += 1
        hs = host_seq[int(hosts[v])]
        between = hs[(hs > disc) & (hs < pos[v])]
        waits.append(len(between))
        if len(between):
            worse_share.append(float((ev.ir[seq[between]] < ev.ir[v]).mean()))
    big = np.argsort(-size)[:3]
    cycles = []
    for h in big:
        hs = host_seq.get(int(h), np.zeros(0, dtype=np.int64))
        gaps = np.diff(times[hs]) if len(hs) > 1 else np.zeros(0)
        cycles.append((int(size[h]), int((hs < tenth).sum()),
                       float(np.median(gaps)) if len(gaps) else float("nan")))
    return {"hot": int(hot.sum()), "late": len(late), "discovered_late": disc_bound,
            "waited_in_host": order_bound,
            "median_host_fetches_between": float(np.median(waits)) if waits else float("nan"),
            "share_less_important_between": float(np.mean(worse_share)) if worse_share else float("nan"),
            "late_on_hosts_over_5pct": int(sum(1 for z in host_size if z > 0.05 * graph.n)),
            "big_hosts": cycles, "crawl_seconds": float(times[-1]) if len(times) else 0.0}


def backlink_waits(seq: np.ndarray, graph, hot: np.ndarray) -> list[dict]:
    """Judge a backlinks crawl by its own key: for each hot page fetched after the
    first tenth, every fetch of its host while it waited (found, not yet fetched),
    with both pages' IB' (links from pages fetched earlier in the log) at that
    fetch. 'ahead' = more links seen, or as many and found earlier (the order's tie
    rule, Cho §3 with discovery ties); 'tie_later' = as many and found later;
    'fewer' = fewer links seen. tie_later and fewer are fetches the order would not
    have made: a defect of the order or the frontier, unless the links that decide
    were found within the last few fetches (the worker parses a page after its
    fetch ends, and leases up to FRONTIER_PREFETCH ahead)."""
    n = len(seq)
    tenth = max(1, n // 10)
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[seq] = np.arange(n)
    hosts = graph.hosts if graph.hosts is not None else np.zeros(graph.n, dtype=np.int32)
    adj = graph.adjacency
    late = [int(v) for v in np.flatnonzero(hot & (pos >= tenth))]
    out = {v: {"page": v, "pos": int(pos[v]), "found": -1, "seen_found": 0, "seen_fetched": 0,
               "ahead": 0, "tie_later": 0, "fewer": 0, "fewer_by_1": 0} for v in late}
    seen = np.zeros(graph.n, dtype=np.int64)
    found = np.full(graph.n, -1, dtype=np.int64)
    by_host: dict[int, list[int]] = {}
    for v in late:
        by_host.setdefault(int(hosts[v]), []).append(v)
    for i, u in enumerate(seq):
        for v in by_host.get(int(hosts[u]), ()):
            if v == u:
                out[v]["seen_fetched"] = int(seen[v])
            elif 0 <= found[v] and i < pos[v]:
                if seen[u] > seen[v] or (seen[u] == seen[v] and found[u] <= found[v]):
                    out[v]["ahead"] += 1
                elif seen[u] == seen[v]:
                    out[v]["tie_later"] += 1
                else:
                    out[v]["fewer"] += 1
                    out[v]["fewer_by_1"] += int(seen[v] - seen[u] == 1)
        kids = np.unique(adj.indices[adj.indptr[u]:adj.indptr[u + 1]])
        kids = kids[kids != u]
        seen[kids] += 1
        new = kids[found[kids] < 0]
        found[new] = i
        for v in new:
            if int(v) in out:
                out[int(v)]["found"] = i
                out[int(v)]["seen_found"] = 1
    return [out[v] for v in late]


def backlink_wait_lines(waits: list[dict], graph, ev, limit: int = 8) -> list[str]:
    if not waits:
        return ["no hot page (top by in-degree) after the first tenth"]
    tot = {k: sum(w[k] for w in waits) for k in ("ahead", "tie_later", "fewer", "fewer_by_1")}
    out = [f"{len(waits)} hot pages (top by in-degree) after the first tenth; while they waited "
           f"their hosts made {tot['ahead']:,} fetches the order puts ahead of them (more links "
           f"seen, or as many and found earlier), {tot['tie_later']:,} of as many links found "
           f"later, {tot['fewer']:,} of fewer links ({tot['fewer_by_1']:,} of them by one link)"]
    worst = sorted(waits, key=lambda w: (-(w["tie_later"] + w["fewer"]), -w["pos"]))[:limit]
    for w in sorted(worst, key=lambda w: w["pos"]):
        v = w["page"]
        name = graph.urls[v] if graph.urls else str(v)
        out.append(f"  {name} (IB {int(ev.ib[v])}): found at fetch {w['found']}, fetched at "
                   f"{w['pos']}, links seen {w['seen_found']} -> {w['seen_fetched']}; its host "
                   f"meanwhile {w['ahead']} ahead / {w['tie_later']} tie found later / "
                   f"{w['fewer']} fewer")
    return out


def diagnosis_lines(d: dict, ranker: list) -> list[str]:
    out = [f"hot {d['hot']}, fetched after the first tenth {d['late']} "
           f"({d['late_on_hosts_over_5pct']} on hosts of over 5% of the web): "
           f"{d['discovered_late']} discovered only after the first tenth, {d['waited_in_host']} "
           f"discovered in it but waited; those waited for a median "
           f"{d['median_host_fetches_between']:.0f} fetches of their own host, "
           f"{100 * d['share_less_important_between']:.0f}% of them of less important pages"]
    out.append("largest hosts (pages, fetched in the first tenth, median s between its fetches): "
               + "; ".join(f"{z} / {k} / {g:.2f}" for z, k, g in d["big_hosts"]))
    if ranker:
        out.append(f"ranker runs at s {', '.join(f'{t:.0f}' for t, _ in ranker)} of a "
                   f"{d['crawl_seconds']:.0f} s crawl (nodes {', '.join(str(k) for _, k in ranker)})")
    return out


# -- One live crawl ----------------------------------------------------------------------------

def scrapy_stats(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("'") and "':" in s:
            k, _, v = s[1:].partition("':")
            v = v.strip().rstrip(",")
            try:
                out[k] = float(v) if "." in v else int(v)
            except ValueError:
                out[k] = v.strip("'")
    return out


class Config(tuple):
    """One live set-up: (workers, CONCURRENT_REQUESTS per worker, FRONTIER_DELAY_FACTOR)."""

    def __new__(cls, workers: int, concurrency: int, factor: float):
        return super().__new__(cls, (int(workers), int(concurrency), float(factor)))

    workers = property(lambda self: self[0])
    concurrency = property(lambda self: self[1])
    factor = property(lambda self: self[2])

    @property
    def serial(self) -> bool:
        """One request at a time, nothing leased ahead: the prioritizer's order alone."""
        return self.workers == 1 and self.concurrency == 1

    def __str__(self):
        return f"w{self.workers} c{self.concurrency} f{self.factor:g}"

    def settings(self) -> dict:
        s = {"CONCURRENT_REQUESTS": self.concurrency, "FRONTIER_DELAY_FACTOR": self.factor,
             "FRONTIER_MIN_DELAY": 0}
        if self.concurrency == 1:
            s["FRONTIER_PREFETCH"] = 1  # else the default, CONCURRENT_REQUESTS + 8
        return s


def parse_configs(text: str) -> list[Config]:
    """'1x1x0,1x16x0,2x8x10' -> Configs (workers x concurrency x delay factor)."""
    out = []
    for part in text.split(","):
        if not part.strip():
            continue
        bits = part.strip().lower().split("x")
        try:
            w, c, f = int(bits[0]), int(bits[1]), float(bits[2])
        except (IndexError, ValueError):
            raise BenchError(f"--configs: WORKERSxCONCURRENCYxFACTOR, e.g. 1x1x0,2x8x10 "
                             f"(got {part!r})") from None
        if w < 1 or c < 1 or f < 0 or len(bits) != 3:
            raise BenchError(f"--configs: workers and concurrency >= 1, factor >= 0 (got {part!r})")
        out.append(Config(w, c, f))
    if not out:
        raise BenchError("--configs: at least one set-up")
    return out


def _stop(proc, term: bool = False) -> None:
    if proc is None or proc.poll() is not None:
        return
    if term:
        proc.terminate()
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            pass
    os.killpg(proc.pid, signal.SIGKILL)  # its own session: that process and nothing else
    proc.wait()


def _crawl(spec: dict, start_url: str, run: Path, s: dict, info: dict, timeout: float,
           spargs: dict | None = None, workers: int = 1) -> list:
    """Fresh Redis-protocol server + fresh simulated web + the workers; the request log.
    spargs: more spider arguments (-a name=value) beside the seeds."""
    seeds = run / "seeds.txt"
    seeds.write_text(start_url + "\n")
    redis_proc = None
    procs: list = []
    records: list = []
    port = free_port()
    info["load_before"] = loadavg()
    try:
        redis_proc = spawn_server(port, run / "redis", appendonly=False)
        with SimWebServer(spec, log_path=str(run / "web.jsonl")) as sw:
            cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}"]
            for k, v in (spargs or {}).items():
                cmd += ["-a", f"{k}={v}"]
            for k, v in s.items():
                cmd += ["-s", f"{k}={v}"]
            env = sw.env()
            env.update(REDIS_URL=f"redis://127.0.0.1:{port}/0",
                       CRAWL_ID=f"live-{s['FRONTIER_PRIORITIZER']}-c{s['CONCURRENT_REQUESTS']}",
                       CRAWL_DATA_DIR=str(run / "data"), PYTHONUNBUFFERED="1")
            t0 = time.monotonic()
            logs = []
            try:
                for w in range(workers):
                    name = "worker.log" if w == 0 else f"worker{w + 1}.log"
                    logs.append(open(run / name, "wb"))
                    procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=logs[-1],
                                                  stderr=subprocess.STDOUT, start_new_session=True))
                rcs = []
                for proc in procs:
                    try:
                        rcs.append(proc.wait(max(1.0, timeout - (time.monotonic() - t0))))
                    except subprocess.TimeoutExpired:
                        rcs.append(None)
            finally:
                for fh in logs:
                    fh.close()
            info["seconds"] = time.monotonic() - t0
            info["rc"] = None if None in rcs else max(rcs)
            sw.stop()  # flushes the request log
            records = sw.read_log()
    finally:
        for proc in procs:
            _stop(proc)
        _stop(redis_proc, term=True)
        info["load_after"] = loadavg()
    return records


def ranker_log(run: Path) -> list[tuple[float, int]]:
    """(seconds since the first log line, nodes) of every ranker run in the workers' logs."""
    import re
    from datetime import datetime
    pat = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d).*Ranker: ([\d,]+) nodes")
    t_first, out = None, []
    for log in sorted(run.glob("worker*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", line)
            if not m:
                continue
            t = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").timestamp()
            t_first = t if t_first is None else min(t_first, t)
            r = pat.match(line)
            if r:
                out.append((t, int(r[2].replace(",", ""))))
    return sorted((t - (t_first or 0), n) for t, n in out)


def live_crawl(pair: Pairing, spec: dict, order: str, cfg: Config, start_url: str,
               work: Path, settings: dict, timeout: float, reuse: bool = False) -> dict:
    """The workers of cfg crawl the simulated web from start_url; returns the
    request log's arrival order as virtual page ids, with what went on."""
    run = work / f"{order.replace('=', '').replace('+', '-')}-w{cfg.workers}-c{cfg.concurrency}-f{cfg.factor:g}"
    s = {"LOG_LEVEL": "INFO", **cfg.settings(),
         "FRONTIER_PRIORITIZER": base_order(order), "FRONTIER_RANDOM_SEED": 0,
         "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0, **settings}
    info = {"order": order, "config": cfg, "settings": s, "dir": str(run)}
    saved = run / "run.json"
    if reuse and saved.exists() and (run / "web.jsonl").exists():
        # --reuse: measure an earlier crawl of this work directory again
        info.update(json.loads(saved.read_text()))
        records = checks.read_log(str(run / "web.jsonl"))
        info["reused"] = True
    else:
        if run.exists():
            shutil.rmtree(run)
        run.mkdir(parents=True)
        records = _crawl(spec, start_url, run, s, info, timeout, workers=cfg.workers)
        saved.write_text(json.dumps({k: info[k] for k in ("seconds", "rc", "load_before",
                                                            "load_after") if k in info}))
    log = run / "worker.log"
    info["stats"] = scrapy_stats(log.read_text(errors="replace") if log.exists() else "")
    if info.get("rc", -1) is None:
        info["error"] = f"a worker did not finish in {timeout:.0f} s (killed); log in {run}"
    elif info.get("rc", -1) != 0:
        info["error"] = f"a worker exited with status {info['rc']}; log in {run}"
    counts = checks.fetch_counts(records)
    statuses = {}
    for r in records:
        if r["path"] != "/robots.txt":
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    info["statuses"] = statuses
    info["repeated"] = sum(1 for c in counts.values() if c > 1)
    w = pair.web
    ids, unknown, times = [], [], []
    first = {}
    for r in sorted(records, key=lambda r: r["t0"]):
        if r["path"] != "/robots.txt":
            first.setdefault(checks.url_of(r), r["t0"])
    for url, t in first.items():
        node = w.node_of(url)
        vid = int(pair.from_web[node]) if node is not None else -1
        if vid < 0:
            unknown.append(url)
        else:
            ids.append(vid)
            times.append(t)
    info["order_ids"] = np.array(ids, dtype=np.int64)
    info["times"] = np.array(times, dtype=np.float64) - (times[0] if times else 0.0)
    info["unknown_urls"] = unknown
    if records:
        arrivals = [r["t0"] for r in records if r["path"] != "/robots.txt"]
        span = max(r["t1"] for r in records) - min(arrivals)
        info["pages_per_s"] = len(ids) / span if span > 0 else float("nan")
    info["ranker_runs"] = sum(int(scrapy_stats(p.read_text(errors="replace")).get("ranker/runs", 0))
                              for p in run.glob("worker*.log"))
    info["ranker_log"] = ranker_log(run)
    return info


# -- Report -------------------------------------------------------------------------------------

def fmt_row(label: str, values, fmt: str) -> str:
    return f"  {label:<22}" + "".join(f"{v:>7{fmt}}" for v in values)


def git_state() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.split("\n")
        changed = [line[3:] for line in dirty if line.strip()]
        return f"{head}" + (f" + uncommitted changes in {len(changed)} files of the work tree"
                            if changed else "")
    except Exception:  # not a git checkout
        return "unknown"


def plot(path: Path, ev, orders, virt, live_runs, replicas, random_law, keys_law,
         concurrencies):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"bfs": "tab:green", "random": "tab:gray", "backlinks": "tab:blue",
              "pagerank": "tab:red", "opic": "tab:purple"}
    styles = {c: ls for c, ls in zip(concurrencies, ["--", "-.", ":"] * 4)}
    fig, axes = plt.subplots(3, len(orders), figsize=(3.6 * len(orders), 10.5), squeeze=False)
    reach = ev.reach
    top = ev.hot_rule.startswith("top")
    rows = [("pst_ib", f"PST, {'top' if top else f'hot by IB >= {CHO_G_IB:g}'} "
                       f"({int(ev.hot_ib.sum())} pages{' by IB' if top else ''}), %"),
            ("pst_ir", f"PST, {'top' if top else f'hot by IR >= {CHO_G_IR:g}'} "
                       f"({int(ev.hot_ir.sum())} pages{' by IR' if top else ''}), %"),
            ("avg_pagerank", "average PageRank of the tenth")]
    for j, order in enumerate(orders):
        color = colors.get(order, "black")
        for i, (key, ylabel) in enumerate(rows):
            ax = axes[i, j]

            def draw(seq, **kw):
                if key == "avg_pagerank":
                    ax.plot(range(1, 11), metrics.tenth_averages(seq, ev.ir), marker="o", ms=3, **kw)
                else:
                    hot = ev.hot_ib if key == "pst_ib" else ev.hot_ir
                    curve = metrics.pst_curve(seq, hot)
                    ks = metrics.checkpoints(len(seq), 200)
                    ax.plot(100.0 * ks / len(seq), curve[ks - 1], **kw)

            if order == "random" and random_law:
                x = range(1, 11) if key == "avg_pagerank" else 100 * TENTHS
                lo, hi = random_law.band(key)
                ax.fill_between(x, lo, hi, color=color, alpha=0.3,
                                label=f"virtual, {random_law.n} seeds: 95% envelope")
                if keys_law:
                    lo, hi = keys_law.band(key)
                    ax.fill_between(x, lo, hi, facecolor="none", edgecolor="black", hatch="///",
                                    lw=0.0, alpha=0.5, label="virtual, live rule: 95% envelope")
            draw(virt[order], color=color, ls="-", lw=1.6,
                 label="virtual" + (", seed 0" if order == "random" else ""))
            if order in replicas:
                draw(replicas[order][0], color="black", ls=":", lw=1.0,
                     label="virtual with the live rule")
            for (o, c), run in live_runs.items():
                if base_order(o) == order and len(run.get("order_ids", [])):
                    draw(run["order_ids"], color=color if c.serial else None,
                         ls=styles.get(c, "--"), lw=1.4, label=f"live {o[len(order) + 1:]}, {c}")
            if key == "avg_pagerank":
                ax.set_xticks(range(1, 11))
                ax.set_xlabel("tenth of the crawl")
            else:
                ax.set_ylim(0, 101)
                ax.set_xlim(0, 100)
                ax.set_xlabel("pages crawled, % of the crawl")
            if j == 0:
                ax.set_ylabel(ylabel, fontsize=9)
            if i == 0:
                ax.set_title(order, fontsize=11)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6.5, loc="lower right" if key != "avg_pagerank" else "best")
    fig.suptitle(f"{ev.graph_name}: live crawler (dashed) vs virtual crawler (solid); "
                 f"start {ev.start_why.split(':')[0]}, {reach:,} pages reachable", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default=str(DEFAULT_GRAPH))
    ap.add_argument("--orders", default=",".join(ORDERS))
    ap.add_argument("--start", type=int, default=None, help="start page id (default: the evaluator's rule)")
    ap.add_argument("--web", default=None,
                    help="instead of --graph: a generated web, KEY=VALUE,... of SimWeb.generate "
                         "(e.g. hosts=500,pages=20000,seed=1: Zipf host sizes), written as a graph file")
    ap.add_argument("--configs", default="1x1x0",
                    help="live set-ups WORKERSxCONCURRENCYxDELAY_FACTOR, comma-separated "
                         "(e.g. 1x1x0,1x16x0,2x8x10); prefetch 1 with concurrency 1, else the default")
    ap.add_argument("--concurrency", default=None,
                    help="shorthand: one worker, factor 0, these CONCURRENT_REQUESTS values")
    ap.add_argument("--hot-share", type=float, default=None,
                    help="hot pages: this share of the reachable pages by IB and by IR "
                         "(e.g. 0.01 for the top 1%%) instead of Cho's thresholds")
    ap.add_argument("--ranker-every", type=int, default=None,
                    help="RANKER_EVERY_PAGES (default: 1%% of the graph, the virtual cadence; "
                         "0: the settings' own cadence, RANKER_* not set)")
    ap.add_argument("--ranker-tick", type=float, default=0.1)
    ap.add_argument("--random-seeds", type=int, default=200,
                    help="virtual random crawls that give the random order's law")
    ap.add_argument("--tie-seeds", type=int, default=10,
                    help="random tie permutations for the virtual tie-sensitivity diagnostic")
    ap.add_argument("--tol-pst", type=float, default=10.0, help="points of PST, at each tenth")
    ap.add_argument("--tol-avg", type=float, default=0.25,
                    help="relative band for the average PageRank of each tenth")
    ap.add_argument("--page-bytes", type=int, default=2000)
    ap.add_argument("--latency-ms", default="0",
                    help="the simulated web's response delay per host: MS or LO-HI drawn per host")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per live crawl")
    ap.add_argument("--out", default=str(ROOT / "docs" / "img" / "ordering" / "live"))
    ap.add_argument("--keep", default=None, help="keep work files (logs, request logs) here")
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: measure the crawls already in that directory again")
    args = ap.parse_args(argv)

    labels = [o.strip() for o in args.orders.split(",") if o.strip()]
    for label in labels:
        variant_settings(label)
    orders = list(dict.fromkeys(base_order(o) for o in labels))
    bad = [o for o in orders if o not in ORDERS]
    if bad or not orders:
        raise BenchError(f"--orders: use some of {','.join(ORDERS)} (got {args.orders!r})")
    if args.concurrency:
        try:
            concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
        except ValueError:
            raise BenchError(f"--concurrency: integers, e.g. 1,8 (got {args.concurrency!r})") from None
        if not concurrencies or min(concurrencies) < 1:
            raise BenchError("--concurrency: at least one value, each >= 1")
        configs = [Config(1, c, 0) for c in concurrencies]
    else:
        configs = parse_configs(args.configs)
    if args.reuse and not args.keep:
        raise BenchError("--reuse needs --keep DIR (the directory of the earlier crawls)")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="live-orders-"))
    work.mkdir(parents=True, exist_ok=True)

    t_all = time.monotonic()
    lines: list[str] = []

    def say(msg=""):
        print(msg, flush=True)
        lines.append(msg)

    say(f"# live_orders: {' '.join(sys.argv[1:]) or '(defaults)'}")
    say(f"machine: {os.cpu_count()} cores, {platform.python_version()}, load average at start "
        f"{loadavg()}; code: {git_state()}")

    # 1. The virtual crawler ------------------------------------------------------------
    if args.web:
        args.graph = str(work / "generated.dat")
        made = write_generated(args.web, Path(args.graph))
        say(f"generated web {made['options']}: {made['pages']:,} pages, {made['links']:,} links "
            f"between pages, {made['hosts']} hosts, the largest of {made['largest_hosts']} pages; "
            f"written to {args.graph}")
    try:
        graph = read_graph(args.graph)
    except GraphFormatError as exc:
        raise BenchError(str(exc)) from None
    t = time.monotonic()
    hot_top = None
    if args.hot_share:
        hot_top = max(1, round(args.hot_share * int(metrics.reachable(
            graph, args.start if args.start is not None else metrics.choose_start(graph)[0]).sum())))
    try:
        ev = evaluate(graph, orders, start=args.start, hot_top=hot_top)
    except ValueError as exc:  # a start page not in the graph, ...
        raise BenchError(str(exc)) from None
    virt = dict(ev.crawls)
    every = math.ceil(graph.n / 100)
    ranker_every = args.ranker_every or every
    say(f"graph {args.graph}: {graph.n:,} pages, {graph.m:,} links; start {ev.start_why}; "
        f"{ev.reach:,} reachable; hot: {int(ev.hot_ib.sum())} by IB, {int(ev.hot_ir.sum())} by IR "
        f"({ev.hot_rule}); virtual crawls {time.monotonic() - t:.1f} s "
        f"(pagerank recomputed after 1, 2, 4, ... pages, then every {every} pages)")

    # 2. The simulated web over the same graph ---------------------------------------------
    lat = [float(x) for x in args.latency_ms.split("-")]
    spec = {"graph": os.path.abspath(args.graph), "page_bytes": args.page_bytes,
            "latency_ms": lat[0] if len(lat) == 1 else lat,
            "crawl_delay_fraction": 0.0}
    try:
        pair = Pairing(args.graph, spec, graph)
    except (OSError, ValueError) as exc:
        raise BenchError(f"the simulated web cannot serve {args.graph}: {exc}") from None
    if not pair.servable[ev.start]:
        raise BenchError(f"the start page {ev.start} has no page on the simulated web "
                         f"(URL {graph.urls[ev.start] if graph.urls else ev.start!r})")
    spec = dict(pair.web.spec)
    chk = pair.check(ev.start, ev.universe)
    say(f"simulated web: {chk['web_pages']:,} pages on {chk['web_hosts']} hosts "
        f"(load stats {chk['web_load_stats']}); {chk['html_pages']:,} answer HTML, "
        f"{chk['binary_pages']:,} binary ({chk['binary_reachable']:,} of them reachable; "
        f"{chk['binary_with_links']} binary pages with links), {chk['other_kinds']} errors or "
        f"redirects; no robots rules, no Crawl-delay, latency {args.latency_ms} ms per host")
    for i, url, reach in chk["unservable"]:
        why = ("reachable from the start, so the virtual crawl has it and the live one cannot"
               if reach else "not reachable")
        say(f"  virtual page {i} ({url!r}) has no page on the simulated web {why}")
    differ = chk["link_sets_differ"]
    say(f"  link sets of the {int(pair.servable.sum()):,} paired pages: "
        f"{f'{len(differ)} differ' if differ else 'all equal'}; "
        f"reachable from {chk['start_url']}: {chk['web_reachable']:,} URLs "
        f"({chk['web_reachable_not_pages']} not pages), "
        + ("the same pages as the virtual crawler reaches (less the unservable ones)"
           if chk["reachable_equal"] else "NOT the set the virtual crawler reaches"))
    if not chk["reachable_equal"] or chk["link_sets_differ"]:
        say("  WARNING: the two graphs differ beyond unservable pages; see above")
    virt_served = {o: s[pair.servable[s]] for o, s in virt.items()}

    # Diagnostics on the virtual side -----------------------------------------------------
    rank = tie_ranks(pair)
    replicas: dict[str, tuple[np.ndarray, str]] = {}
    tie_sens: dict[str, dict] = {}
    rng = np.random.default_rng(0)
    heap_orders = {"backlinks": vc.Backlinks, "opic": vc.OPIC, "pagerank": vc.PageRankOrder}
    for o in orders:
        if o not in heap_orders or args.tie_seeds <= 0:
            continue
        base = measures(virt[o], ev)["avg_pagerank"]
        fp = replay(graph, _with_ties(heap_orders[o], rank), ev.start)
        fp_rel = np.abs(measures(fp, ev)["avg_pagerank"] - base) / base
        rand_rel = []
        for _ in range(args.tie_seeds):
            perm = rng.permutation(graph.n)
            seq = replay(graph, _with_ties(heap_orders[o], perm), ev.start)
            rand_rel.append(np.abs(measures(seq, ev)["avg_pagerank"] - base) / base)
        tie_sens[o] = {"fp": float(fp_rel.max()),
                       "random": float(np.max(rand_rel)) if rand_rel else float("nan")}
    if "opic" in orders and args.tie_seeds > 0:
        replicas["opic"] = (replay(graph, _opic_live(rank), ev.start),
                            "live rule (no dangling redistribution, frontier ties)")
    if "pagerank" in orders and args.tie_seeds > 0:
        replicas["pagerank"] = (replay(graph, _pagerank_live(rank, ranker_every), ev.start),
                                f"live rule (ranker scale, every {ranker_every} pages, frontier ties)")
    random_virtual, random_keys = [], []
    if "random" in orders:
        for s in range(args.random_seeds):
            random_virtual.append(measures(vc.virtual_crawl(graph, "random", ev.start, seed=s), ev))
            random_keys.append(measures(replay(graph, lambda *a, s=s: RandomKeys(*a, seed=s),
                                               ev.start), ev))
    if tie_sens:
        say(f"virtual tie sensitivity (max relative change of a tenth's average PageRank when ties go "
            f"by the live frontier's host+fingerprint order / by {args.tie_seeds} random permutations "
            f"instead of discovery order): " + "; ".join(
                f"{o} {v['fp']:.0%} / {v['random']:.0%}" for o, v in tie_sens.items()))

    # 3. Live crawls -----------------------------------------------------------------------
    settings = {"RANKER_EVERY_PAGES": ranker_every, "RANKER_TICK": args.ranker_tick,
                "RANKER_INTERVAL": 86400} if args.ranker_every != 0 else {}
    live_runs: dict[tuple[str, int], dict] = {}
    if args.reuse:
        say(f"(--reuse: crawls found in {work} are measured again, not made again; their times and "
            f"load averages are those recorded when they ran)")
    say(f"live crawls, set-ups (workers x CONCURRENT_REQUESTS x FRONTIER_DELAY_FACTOR) "
        f"{', '.join(str(c) for c in configs)}, FRONTIER_MIN_DELAY=0, FRONTIER_PREFETCH=1 with one "
        f"request at a time, else its default; ranker: "
        + (f"RANKER_EVERY_PAGES={ranker_every}, RANKER_TICK={args.ranker_tick:g}, "
           f"RANKER_INTERVAL=86400" if settings else "the settings' defaults")
        + f"; random: FRONTIER_RANDOM_SEED=0; page_bytes {args.page_bytes}; work dir {work}")
    try:
        for c in configs:
            for o in labels:  # the orders of one set-up one after another, so load hits them alike
                try:
                    run = live_crawl(pair, spec, o, c, chk["start_url"], work,
                                     {**settings, **variant_settings(o)}, args.timeout,
                                     reuse=args.reuse)
                except Exception as exc:  # a server that would not start, ...
                    run = {"order": o, "config": c, "error": f"{type(exc).__name__}: {exc}",
                           "order_ids": np.zeros(0, dtype=np.int64)}
                live_runs[(o, c)] = run
                n = len(run.get("order_ids", []))
                say(f"  {o:<9} {c}: {n:,} pages in {run.get('seconds', float('nan')):.0f} s "
                    f"({run.get('pages_per_s', float('nan')):.0f} pages/s), statuses "
                    f"{run.get('statuses')}, {run.get('repeated', 0)} URLs fetched twice, "
                    f"{len(run.get('unknown_urls', []))} URLs not in the graph"
                    + (f", {run['ranker_runs']} ranker runs" if base_order(o) == "pagerank" else "")
                    + f"; load {run.get('load_before')} -> {run.get('load_after')}"
                    + (f"; ERROR {run['error']}" if run.get("error") else ""))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    # 4-5. Measures and comparison ---------------------------------------------------------------
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    verdicts = []
    race_rows: list[dict] = []
    say()
    say(f"Tolerance, at each tenth of the crawl: |PST live - PST virtual| <= {args.tol_pst:g} points "
        f"(hot by IB and by IR), |avg PageRank live - virtual| <= {args.tol_avg:.0%} of virtual. "
        f"Random: a test that the live crawl could be one of {args.random_seeds} virtual random "
        f"crawls (seeds 0-{args.random_seeds - 1}): a global rank envelope test over the 30 "
        f"points at level 0.05 (see Law).")
    random_law = Law(random_virtual) if random_virtual else None
    keys_law = Law(random_keys) if random_keys else None
    rand_ref = random_law.center if random_law else None
    for (variant, c), run in live_runs.items():
        o = base_order(variant)
        seq = run.get("order_ids", np.zeros(0, dtype=np.int64))
        say()
        if len(seq) == 0:
            say(f"{variant} ({c}): no live order ({run.get('error', 'nothing crawled')})")
            verdicts.append((variant, c, "NO RESULT", run.get("error", "")))
            continue
        lm = measures(seq, ev)
        vm = measures(virt[o], ev) if o != "random" else rand_ref
        cmp_ = compare(lm, vm, args.tol_pst, args.tol_avg)
        ref_label = "virtual" if o != "random" else "virtual median"
        head = (f"{variant} ({c}): live {len(seq):,} pages in {run.get('seconds', 0):.0f} s, load "
                f"{run.get('load_after')}")
        notes = []
        if o != "random":
            ag = agreement(virt_served[o], seq, graph.n)
            notes.append("sequence vs virtual: "
                         + ("IDENTICAL (but the unservable pages)" if ag["identical"] else
                            f"same first {ag['prefix']:,} pages, Spearman rho {ag['rho']:.4f}, "
                            f"mean position shift {ag['mean_shift']:.1f} pages, "
                            f"first-10% overlap {ag['first_tenth_overlap']:.0%}"))
            if o in replicas:
                rep = replicas[o][0]
                ar = agreement(rep[pair.servable[rep]], seq, graph.n)
                notes.append("sequence vs the virtual crawler with the " + replicas[o][1] + ": "
                             + ("IDENTICAL" if ar["identical"] else
                                f"same first {ar['prefix']:,}, rho {ar['rho']:.4f}, mean shift "
                                f"{ar['mean_shift']:.1f} pages"))
            if o == "pagerank" and args.tie_seeds > 0:
                parts = []
                for cad, sc in (("ranker", "virtual"), ("virtual", "ranker")):
                    rep = replay(graph, _pagerank_live(rank, ranker_every, cad, sc), ev.start)
                    ar = agreement(rep[pair.servable[rep]], seq, graph.n)
                    avg = measures(rep, ev)["avg_pagerank"]
                    parts.append(f"{cad} cadence + {sc} scale: mean shift {ar['mean_shift']:.1f} "
                                 f"pages, tenths 5-6 average {avg[4]:.2f} {avg[5]:.2f}")
                notes.append("which live rule matters (frontier ties in both): " + "; ".join(parts)
                             + f" (live {lm['avg_pagerank'][4]:.2f} {lm['avg_pagerank'][5]:.2f})")
        else:
            tv = random_law.test(lm)
            tk = keys_law.test(lm)
            notes.append(f"against {random_law.n} virtual random crawls (a URL of the queue chosen "
                         f"uniformly): global envelope test p = {tv['p_global']:.3f} (its most "
                         f"extreme point's rank p-value {tv['T']:.3f}; {tv['false_fail']:.1%} of "
                         f"those crawls fail the same test)")
            notes.append(f"against {keys_law.n} virtual crawls with the live rule (a random key "
                         f"drawn once per URL, lowest first): p = {tk['p_global']:.3f}: "
                         + ("could be one of them" if tk["pass"] else "unlikely to be one of them"))
            cmp_["pass"] = tv["pass"]
            cmp_["outside"] = tv["outside"]
            cmp_["T"] = tv
        say(head)
        for note in notes:
            say("  " + note)
        say(fmt_row("tenth", range(1, 11), "d"))
        for key, label, f in (("pst_ib", "PST IB", ".1f"), ("pst_ir", "PST IR", ".1f"),
                              ("avg_pagerank", "avg PageRank", ".2f")):
            say(fmt_row(f"{label} {ref_label[:7]}", vm[key], f))
            if o == "random":
                lo, hi = random_law.band(key)
                say(fmt_row(f"{label} virt env lo", lo, f))
                say(fmt_row(f"{label} virt env hi", hi, f))
                say(fmt_row(f"{label} live-rule med", keys_law.center[key], f))
            say(fmt_row(f"{label} live", lm[key], f))
            if o in replicas:
                say(fmt_row(f"{label} live rule", measures(replicas[o][0], ev)[key], f))
        say(fmt_row("rel diff avg PR %", 100 * cmp_["rel_avg"], ".0f"))
        verdict = "PASS" if cmp_["pass"] else "FAIL"
        if run.get("error"):
            verdict = "NO RESULT"  # an incomplete crawl: its measures are shown, not judged
        if o == "random":
            out_at = [f"{k} tenths {','.join(str(t + 1) for t in np.flatnonzero(v))}"
                      for k, v in cmp_["outside"].items() if v.any()]
            why = (f"global p = {cmp_['T']['p_global']:.3f}"
                   + ("" if not out_at else "; points outside the virtual 95% global envelope: "
                      + "; ".join(out_at)))
        else:
            why = (f"max |dPST IB| {cmp_['max_d_pst_ib']:.1f}, max |dPST IR| "
                   f"{cmp_['max_d_pst_ir']:.1f}, max rel d avg PageRank {cmp_['max_rel_avg']:.0%}")
        say(f"  => {verdict}: {why}" + (f" ({run['error']})" if run.get("error") else ""))
        verdicts.append((variant, c, verdict, why))
        for key in ("pst_ib", "pst_ir", "avg_pagerank"):
            rep_m = measures(replicas[o][0], ev)[key] if o in replicas else None
            for t in range(10):
                diff = (lm[key][t] - vm[key][t]) if key != "avg_pagerank" else \
                    (lm[key][t] - vm[key][t]) / vm[key][t]
                if o == "random":
                    tol = f"95% global envelope of {random_law.n} virtual crawls"
                    within = not bool(cmp_["outside"][key][t])
                else:
                    tol = args.tol_pst if key != "avg_pagerank" else args.tol_avg
                    within = abs(diff) <= tol + 1e-9
                row = {"graph": ev.graph_name, "order": variant, "config": str(c), "measure": key,
                       "tenth": t + 1, "virtual": round(float(vm[key][t]), 4),
                       "live": round(float(lm[key][t]), 4),
                       "difference": round(float(diff), 4),
                       "difference_kind": "points" if key != "avg_pagerank" else "relative",
                       "tolerance": tol, "within": within, "reference": ref_label}
                if o == "random":
                    lo, hi = random_law.band(key)
                    row["virtual_band_lo"], row["virtual_band_hi"] = round(float(lo[t]), 4), round(float(hi[t]), 4)
                    lo, hi = keys_law.band(key)
                    row["live_rule_band_lo"], row["live_rule_band_hi"] = round(float(lo[t]), 4), round(float(hi[t]), 4)
                if rep_m is not None:
                    row["live_rule_replica"] = round(float(rep_m[t]), 4)
                rows.append(row)

    # The races against breadth-first, per set-up, and why hot pages came late ------------
    say()
    say("Races (the issue's targets), per set-up: top pages by PageRank (PST IR) for pagerank, "
        "by in-degree (PST IB) for backlinks; live against live bfs at every tenth, and ahead at "
        "the first tenth where the virtual crawler is ahead:")
    virt_m = {o: measures(virt[o], ev) for o in orders if o != "random"}
    for c in configs:
        live_m = {o: measures(run["order_ids"], ev) for (o, cc), run in live_runs.items()
                  if cc == c and len(run.get("order_ids", []))}
        for o, key, mine, base, ahead, verdict in race(live_m, virt_m):
            say(f"  {c}: {o} {verdict} ({key}; virtual ahead at 1st tenth: {ahead})")
            say(fmt_row(f"{o[:17]} live", mine, ".1f"))
            say(fmt_row("bfs live", base, ".1f"))
            say(fmt_row(f"{base_order(o)} virtual", virt_m[base_order(o)][key], ".1f"))
            race_rows.append({"config": str(c), "order": o, "measure": key, "verdict": verdict,
                              "virtual_ahead_first_tenth": ahead,
                              **{f"live_{t + 1}": round(float(mine[t]), 2) for t in range(10)},
                              **{f"bfs_{t + 1}": round(float(base[t]), 2) for t in range(10)},
                              **{f"virtual_{t + 1}": round(float(virt_m[base_order(o)][key][t]), 2)
                                 for t in range(10)},
                              **{f"bfs_virtual_{t + 1}": round(float(virt_m["bfs"][key][t]), 2)
                                 for t in range(10)}})
            verdicts.append((o, f"{c} race", verdict, key))
    say()
    say("Why hot pages (top by PageRank) came after the first tenth, per live crawl:")
    for (o, c), run in live_runs.items():
        seq = run.get("order_ids", np.zeros(0, dtype=np.int64))
        if len(seq) and base_order(o) != "random":
            d = diagnose(seq, run["times"], graph, ev, ev.hot_ir)
            for i, line in enumerate(diagnosis_lines(d, run.get("ranker_log", []))):
                say(f"  {(o + ' ' + str(c)) if i == 0 else '':<22}{line}")
    backlink_runs = [(o, c, run) for (o, c), run in live_runs.items()
                     if base_order(o) == "backlinks" and len(run.get("order_ids", []))]
    if backlink_runs:
        say()
        say("backlinks judged by its own key, per live crawl (links seen = links from pages "
            "fetched earlier in the request log):")
        if "backlinks" in virt and "bfs" in virt:  # the judge's calibration: exact order, and not
            for o in ("backlinks", "bfs"):
                line = backlink_wait_lines(backlink_waits(virt[o], graph, ev.hot_ib), graph, ev)[0]
                say(f"  {o + ' virtual':<22}{line}")
        for o, c, run in backlink_runs:
            waits = backlink_waits(run["order_ids"], graph, ev.hot_ib)
            for i, line in enumerate(backlink_wait_lines(waits, graph, ev)):
                say(f"  {(o + ' ' + str(c)) if i == 0 else '':<22}{line}")

    # Which virtual order is each live crawl nearest to? (discrimination)
    say()
    det = [o for o in orders if o != "random"]
    if det:
        say("mean position shift (pages) between each live crawl (rows) and each virtual order (columns):")
        say("  " + " " * 14 + "".join(f"{o:>11}" for o in det))
        for (o, c), run in live_runs.items():
            seq = run.get("order_ids", np.zeros(0, dtype=np.int64))
            if len(seq):
                say(f"  {o + ' ' + str(c):<14}" + "".join(
                    f"{agreement(virt_served[v], seq, graph.n)['mean_shift']:>11.1f}" for v in det))

    fields = ["graph", "order", "config", "measure", "tenth", "virtual", "live", "difference",
              "difference_kind", "tolerance", "within", "reference", "virtual_band_lo",
              "virtual_band_hi", "live_rule_band_lo", "live_rule_band_hi", "live_rule_replica"]
    with open(out / "live_orders.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    plot(out / "live_orders.png", ev, orders, virt, live_runs, replicas, random_law, keys_law,
         configs)
    say()
    if race_rows:
        with open(out / "races.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(race_rows[0]))
            w.writeheader()
            w.writerows(race_rows)
    say("verdicts: " + "; ".join(f"{o} {c} {v}" for o, c, v, _ in verdicts))
    say(f"total {time.monotonic() - t_all:.0f} s; load average at end {loadavg()}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'live_orders.csv'}, {out / 'summary.txt'}, {out / 'live_orders.png'}")
    # Exit status: 0 when every crawl gave an order (a FAIL is a finding, not an error).
    return 1 if any(v == "NO RESULT" for _, _, v, _ in verdicts) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"live_orders: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
