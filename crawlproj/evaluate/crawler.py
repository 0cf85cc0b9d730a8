"""Cho's virtual crawler (Cho, Garcia-Molina & Page 1998, §4, Fig. 1) and its orders.

The crawler starts from one page and keeps three things: the queue of URLs seen
but not crawled (url_queue), the crawled pages, and the links seen so far (those
of crawled pages). Each step takes the best URL of the queue by the *ordering
metric*, "crawls" it (reads its out-links from the graph), enqueues the links to
pages neither queued nor crawled, and lets the order update its priorities
(reorder_queue, Fig. 2). The orders only use what the crawler has seen.

Orders (``ORDERS``):
  bfs        FIFO: pages in the order they were discovered (Cho Fig. 2 (1)).
  random     a uniformly random URL of the queue (seeded): the baseline of
             Cho §3 and Najork & Wiener §1.
  backlinks  IB'(P), links to P seen so far (Cho Fig. 2 (2)), kept exactly,
             updated per crawled page.
  pagerank   IR'(P), PageRank of the graph seen so far (Cho Fig. 2 (3)). Cho
             re-solves it after every page; here it is re-solved on a schedule
             (see ``PageRankOrder``) and updated between solves by Cho's
             equation applied to the new links.
  opic       OPIC cash (Abiteboul, Preda & Cobena 2003): the page with the most
             cash is crawled next, its cash is split among its links.
  hostfirst  the first URL of a host not yet represented goes first, otherwise
             breadth-first (the WebCrawler's indexing mode). Needs URLs.

Ties are broken by discovery order everywhere (a stable sort of Cho's queue,
which is kept in discovery order, would do the same), so every order is
deterministic for a given graph, start page and seed.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable

import numpy as np

from crawlproj.prioritizers.importance import (
    CHO_DAMPING,
    hostfirst_class,
    opic_share,
    pagerank_base,
    pagerank_contribution,
)
from crawlproj.ranker.pagerank import TransitionMatrix, cross_host_edges, pagerank

ORDERS = ("bfs", "random", "backlinks", "pagerank", "opic", "hostfirst")


class Order:
    """An ordering metric: the url_queue plus reorder_queue() of Cho's Fig. 1."""

    needs_hosts = False

    def __init__(self, graph, crawled: np.ndarray, discovered: np.ndarray):
        self.graph = graph
        self.crawled = crawled        # shared with the crawler loop
        self.discovered = discovered  # queued or crawled

    def add(self, pages: np.ndarray, parent: int | None) -> None:
        raise NotImplementedError

    def pop(self) -> int | None:
        raise NotImplementedError

    def visited(self, page: int, successors: np.ndarray, new: np.ndarray) -> None:
        """``page`` was crawled; ``new`` are its links to pages never seen before."""
        self.add(new, page)


class BreadthFirst(Order):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.queue: deque[int] = deque()

    def add(self, pages, parent):
        self.queue.extend(pages.tolist())

    def pop(self):
        return self.queue.popleft() if self.queue else None


class RandomOrder(Order):
    def __init__(self, *a, seed: int = 0, **kw):
        super().__init__(*a, **kw)
        self.queue: list[int] = []
        self.random = random.Random(seed)

    def add(self, pages, parent):
        self.queue.extend(pages.tolist())

    def pop(self):
        q = self.queue
        if not q:
            return None
        i = self.random.randrange(len(q))
        q[i], q[-1] = q[-1], q[i]  # O(1) removal; the queue's order is irrelevant
        return q.pop()


class HostFirst(Order):
    needs_hosts = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        hosts = self.graph.hosts
        self.hosts = hosts
        self.represented = np.zeros(int(hosts.max()) + 1 if len(hosts) else 0, dtype=bool)
        self.queues = (deque(), deque())  # class 0: first URL of a new host; class 1: the rest

    def add(self, pages, parent):
        for u in pages.tolist():
            h = self.hosts[u]
            self.queues[hostfirst_class(bool(self.represented[h]))].append(u)
            self.represented[h] = True

    def pop(self):
        for q in self.queues:
            if q:
                return q.popleft()
        return None


class _HeapOrder(Order):
    """Max-priority queue with lazy deletion: a page is pushed again whenever its
    priority changes and stale entries are skipped on pop. Ties: discovery order."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        n = self.graph.n
        self.prio = np.zeros(n, dtype=np.float64)
        self.seq = np.zeros(n, dtype=np.int64)
        self.next_seq = 0
        self.heap: list[tuple[float, int, int]] = []

    def _number(self, pages):
        k = len(pages)
        self.seq[pages] = np.arange(self.next_seq, self.next_seq + k)
        self.next_seq += k

    def _push(self, pages):
        push, heap = heapq.heappush, self.heap
        for p, s, u in zip((-self.prio[pages]).tolist(), self.seq[pages].tolist(), pages.tolist()):
            push(heap, (p, s, u))

    def _rebuild(self, queued):
        self.heap = list(zip((-self.prio[queued]).tolist(), self.seq[queued].tolist(), queued.tolist()))
        heapq.heapify(self.heap)

    def pop(self):
        heap, prio, crawled = self.heap, self.prio, self.crawled
        while heap:
            negp, _, u = heapq.heappop(heap)
            if not crawled[u] and -negp == prio[u]:
                return u
        return None


class Backlinks(_HeapOrder):
    """IB'(P): the number of links to P among the crawled pages (Cho §2)."""

    def add(self, pages, parent):
        self._number(pages)
        if parent is None:
            self._push(pages)

    def visited(self, page, successors, new):
        self._number(new)
        targets = successors[~self.crawled[successors]]
        # Rows of the graph are deduplicated, so each target appears once.
        self.prio[targets] += 1.0
        self._push(targets)


class OPIC(_HeapOrder):
    """On-line Page Importance Computation (Abiteboul, Preda & Cobena 2003, §3).

    Every page holds cash; the crawler reads the page with the most cash (their
    greedy policy), adds its cash to its history and splits it equally among
    the pages it links to. All the cash starts at the start page (a crawl knows
    no other page yet; new pages start with none). A page without links gives
    its cash to the virtual page that links to every page, i.e. spreads it
    evenly over the pages known then; an offset common to all pages keeps that
    O(1). Cash sent to pages already crawled stays there: in a single pass they
    are not read again (a continuous crawl would re-read them).
    """

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.history = np.zeros(self.graph.n, dtype=np.float64)
        self.bonus = 0.0      # cash per known page handed out by dangling pages so far
        self.known = 0

    def add(self, pages, parent):
        self._number(pages)
        self.known += len(pages)
        # prio holds cash minus the bonus handed out before the page was known.
        self.prio[pages] = -self.bonus
        if parent is None:
            self.prio[pages] += 1.0 / len(pages)  # the initial cash
            self._push(pages)

    def visited(self, page, successors, new):
        self.add(new, page)
        cash = self.prio[page] + self.bonus
        self.history[page] += cash
        self.prio[page] = -self.bonus
        if len(successors):
            self.prio[successors] += opic_share(cash, len(successors))
            self._push(successors[~self.crawled[successors]])
        else:
            self.bonus += cash / self.known


class PageRankOrder(_HeapOrder):
    """IR'(P): PageRank of the graph seen so far (Cho §2, Fig. 2 (3)), d = 0.9.

    Cho's reorder_queue re-solves the PageRank equations after every crawled
    page; on 325,000 pages that is 325,000 solves, so the equations are solved
    (sparse power iteration, warm-started from the previous solution) when the
    crawl has fetched 1, 2, 4, 8, ... pages and then every ``every`` pages
    (default: 1% of the graph, so at most ~100 late solves plus ~log2 early
    ones, when the seen graph changes fastest). Between two solves a URL's
    priority is Cho's equation evaluated with its parents' ranks held fixed:
    (1 - d) + d * sum IR'(T)/c(T) over the crawled pages T linking to it
    (``crawlproj.prioritizers.importance``), which is also how a live crawler
    can set a priority at enqueue time.

    The seen graph has every known page (crawled or queued) and the links of
    the crawled pages; queued pages have no known links, so they are dangling
    and, as Cho does, spread their rank evenly over all pages. That even spread
    adds the same amount to every page, so the order of the queue is the order
    of the solution of z = (1 - d) + d * P^T z; priorities are kept on that
    scale (z = IR' minus the common dangling term, times a constant).

    ``cross_host``: only links between different hosts count (Najork & Wiener §4).
    """

    def __init__(self, *a, damping: float = CHO_DAMPING, every: int | None = None,
                 cross_host: bool = False, tol: float = 1e-9, **kw):
        super().__init__(*a, **kw)
        g = self.graph
        self.damping = damping
        self.every = max(1, every or math.ceil(g.n / 100))
        self.tol = tol
        adj = cross_host_edges(g.adjacency, g.hosts) if cross_host else g.adjacency
        self.adj = adj
        self.cross_host = cross_host
        self.outdeg = np.diff(adj.indptr)
        self.full = TransitionMatrix(adj)
        self.x = None  # last solution (probability scale), the next warm start
        self.n_crawled = 0
        self.next_solve = 1
        self.solves = 0
        self.iterations = 0
        self.base = pagerank_base(damping)

    def add(self, pages, parent):
        self._number(pages)
        self.prio[pages] = self.base
        if parent is None:
            self._push(pages)

    def visited(self, page, successors, new):
        self.add(new, page)
        a = self.adj
        targets = a.indices[a.indptr[page]:a.indptr[page + 1]]
        targets = targets[~self.crawled[targets]]
        if len(targets):
            self.prio[targets] += pagerank_contribution(self.prio[page], self.outdeg[page], self.damping)
            self._push(targets)
        if self.cross_host and len(new):
            self._push(new)  # also those reached only through links within a host
        self.n_crawled += 1
        if self.n_crawled >= self.next_solve:
            self._solve()
            self.next_solve = (self.next_solve * 2 if self.next_solve * 2 < self.every
                               else (self.n_crawled // self.every + 1) * self.every)

    def _solve(self):
        tm = self.full.restricted_to_sources(self.crawled)
        res = pagerank(tm, self.damping, x0=self.x, tol=self.tol, max_iter=1000,
                       scale="probability")
        x = res.scores
        self.x = x
        self.solves += 1
        self.iterations += res.iterations
        d, n = self.damping, tm.n
        # Remove the common dangling and teleport terms: z = (1-d) * x / beta
        # with beta = ((1-d) + d * dangling mass) / n (see the class docstring).
        beta = ((1.0 - d) + d * x[tm.dangling].sum()) / n
        z = x * ((1.0 - d) / beta)
        known = self.discovered
        self.prio[known] = z[known]
        self._rebuild(np.flatnonzero(known & ~self.crawled))


def make_order(name: str, graph, crawled, discovered, *, seed: int = 0,
               damping: float = CHO_DAMPING, pagerank_every: int | None = None,
               cross_host: bool = False) -> Order:
    if name == "bfs":
        return BreadthFirst(graph, crawled, discovered)
    if name == "random":
        return RandomOrder(graph, crawled, discovered, seed=seed)
    if name == "backlinks":
        return Backlinks(graph, crawled, discovered)
    if name == "opic":
        return OPIC(graph, crawled, discovered)
    if name == "pagerank":
        return PageRankOrder(graph, crawled, discovered, damping=damping,
                             every=pagerank_every, cross_host=cross_host)
    if name == "hostfirst":
        return HostFirst(graph, crawled, discovered)
    raise ValueError(f"unknown order {name!r}; use one of {', '.join(ORDERS)}")


def virtual_crawl(graph, order: str, start: int, *, seed: int = 0,
                  damping: float = CHO_DAMPING, pagerank_every: int | None = None,
                  cross_host: bool = False, limit: int | None = None,
                  progress: Callable[[int], None] | None = None,
                  stats: dict | None = None) -> np.ndarray:
    """Crawl ``graph`` from ``start`` in the given order (Cho Fig. 1).

    Returns the pages in the order crawled: every page reachable from
    ``start``, or the first ``limit`` of them. ``progress(k)`` is called with
    the number of pages crawled since the previous call. ``stats``, if given,
    receives the PageRank order's number of solves and iterations.
    """
    n = graph.n
    if not 0 <= start < n:
        raise ValueError(f"start page {start} is not in the graph (ids 0..{n - 1})")
    if (order == "hostfirst" or cross_host) and graph.hosts is None:
        raise ValueError(f"order {order!r}{' with cross-host links' if cross_host else ''} "
                         "needs page URLs, and this graph has none")
    crawled = np.zeros(n, dtype=bool)
    discovered = np.zeros(n, dtype=bool)
    policy = make_order(order, graph, crawled, discovered, seed=seed, damping=damping,
                        pagerank_every=pagerank_every, cross_host=cross_host)
    indptr, indices = graph.adjacency.indptr, graph.adjacency.indices
    out = np.empty(n if limit is None else min(limit, n), dtype=np.int64)
    discovered[start] = True
    policy.add(np.array([start], dtype=np.int64), None)
    k = last_report = 0
    while k < len(out):
        page = policy.pop()
        if page is None:
            break
        crawled[page] = True
        out[k] = page
        k += 1
        succ = indices[indptr[page]:indptr[page + 1]]
        new = succ[~discovered[succ]]
        discovered[new] = True
        policy.visited(page, succ, new)
        if progress is not None and k - last_report >= 4096:
            progress(k - last_report)
            last_report = k
    if progress is not None and k > last_report:
        progress(k - last_report)
    if stats is not None and isinstance(policy, PageRankOrder):
        stats.update(solves=policy.solves, iterations=policy.iterations, every=policy.every)
    return out[:k]
