"""Importance metrics and the performance measures of Cho, Garcia-Molina & Page (1998).

Importance, over the whole graph (Cho §2):
  IB(P)  backlink count: links to P from other pages.
  IR(P)  PageRank, d = 0.9, Cho's scale (average 1), dangling pages linking to
         every page (crawlproj.ranker.pagerank).
Hot pages (Cho §3): I(P) >= G (Crawl & Stop with Threshold), or the K most
important pages.
Measures, for a crawl order over the pages reachable from the start (Cho §6
counts only those: 179,000 of the 225,000 Stanford pages):
  PST  % of the hot pages crawled, after each page (Cho §3, Graphs 1, 3).
  PCS  Crawl & Stop: after K pages, 100 * M / K where M is the number of those
       K pages whose importance is >= that of the K-th most important page
       R_K (Cho §3, Graph 2).
  tenths  the average PageRank of the pages crawled in each tenth of the
       crawl: Najork & Wiener §4 (Fig. 1) plot it per day of their crawl.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import breadth_first_order, connected_components

from crawlproj.ranker.pagerank import CHO_DAMPING, pagerank


def backlinks(graph) -> np.ndarray:
    """IB(P): in-degree over the whole graph (self-links already dropped by the reader)."""
    return np.bincount(graph.adjacency.indices, minlength=graph.n).astype(np.int64)


def pagerank_importance(graph, damping: float = CHO_DAMPING, *, cross_host: bool = False,
                        tol: float = 1e-10) -> np.ndarray:
    """IR(P) over the whole graph, on Cho's scale (mean 1)."""
    res = pagerank(graph.adjacency, damping, tol=tol, max_iter=10_000,
                   hosts=graph.hosts if cross_host else None)
    return res.scores


def reachable(graph, start: int) -> np.ndarray:
    """Pages reachable from ``start`` by links (the virtual crawler's universe)."""
    order = breadth_first_order(graph.adjacency, start, directed=True, return_predecessors=False)
    mask = np.zeros(graph.n, dtype=bool)
    mask[order] = True
    return mask


def choose_start(graph) -> tuple[int, str]:
    """A stand-in for the site's home page when the file has no URLs.

    Cho started every crawl at the Stanford home page (§6). A home page is linked
    from most pages of its site and reaches the site's core, so: the page with the
    most backlinks IB(P) inside the largest strongly connected component (every
    page of which reaches the whole component and all it links to); ties go to
    the lowest id.
    """
    _, labels = connected_components(graph.adjacency, directed=True, connection="strong")
    sizes = np.bincount(labels)
    giant = int(sizes.argmax())
    ib = backlinks(graph)
    cand = np.flatnonzero(labels == giant)
    start = int(cand[np.argmax(ib[cand])])
    why = (f"page {start}: most backlinks (IB = {ib[start]:,}) in the largest strongly connected "
           f"component ({sizes[giant]:,} pages)")
    return start, why


def hot_threshold(importance: np.ndarray, g: float, universe: np.ndarray) -> np.ndarray:
    """Hot pages of the universe by threshold: I(P) >= G (Cho §3)."""
    return universe & (importance >= g)


def hot_top(importance: np.ndarray, k: int, universe: np.ndarray) -> np.ndarray:
    """Hot pages of the universe by rank: the K most important, ties at the K-th included."""
    vals = importance[universe]
    if k <= 0 or not len(vals):
        return np.zeros_like(universe)
    k = min(k, len(vals))
    kth = np.partition(vals, len(vals) - k)[len(vals) - k]
    return universe & (importance >= kth)


def pst_curve(order: np.ndarray, hot: np.ndarray) -> np.ndarray:
    """PST after each crawled page: % of the hot pages crawled so far (Cho §3)."""
    h = int(hot.sum())
    if h == 0:
        return np.zeros(len(order))
    return np.cumsum(hot[order]) * (100.0 / h)


def pcs_at(order: np.ndarray, importance: np.ndarray, universe: np.ndarray, ks) -> np.ndarray:
    """PCS after K crawled pages, for each K in ``ks`` (Cho §3, Crawl & Stop).

    R_K is the K-th most important page of the universe; M counts the crawled
    pages with importance >= I(R_K) ("rank higher than or equal to").
    """
    ranked = np.sort(importance[universe])[::-1]
    crawled_imp = importance[order]
    out = np.empty(len(ks))
    for i, k in enumerate(ks):
        k = int(k)
        if k <= 0:
            out[i] = np.nan
            continue
        kth = ranked[min(k, len(ranked)) - 1]
        out[i] = 100.0 * np.count_nonzero(crawled_imp[:k] >= kth) / k
    return out


def tenth_averages(order: np.ndarray, values: np.ndarray, parts: int = 10) -> np.ndarray:
    """Average of ``values`` over the pages crawled in each tenth of the crawl."""
    chunks = np.array_split(values[order], parts)
    return np.array([c.mean() if len(c) else np.nan for c in chunks])


def checkpoints(total: int, points: int = 200) -> np.ndarray:
    """Crawl sizes at which to sample the curves: ``points`` even steps, ending at ``total``."""
    ks = np.unique(np.ceil(np.linspace(0, total, points + 1)[1:]).astype(np.int64))
    return ks[ks > 0]


def area(curve: np.ndarray) -> float:
    """Mean of a per-page curve: the area under it over the whole crawl, in %."""
    return float(curve.mean()) if len(curve) else float("nan")
