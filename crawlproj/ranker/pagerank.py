"""PageRank by sparse power iteration, as the ranker and the virtual crawler use it.

The equation is Cho, Garcia-Molina & Page (1998) §2 (IR(P)):

    IR(P) = (1 - d) + d * (IR(T1)/c1 + ... + IR(Tn)/cn)

with d = 0.9, the value Cho used for both IR(P) and IR'(P) (§6). Scores are
returned on Cho's scale, where they average 1 over the graph (they start at 1
and the iteration keeps their sum at N); Najork & Wiener (2001) §4 normalise the
same way "so that the average page has a PageRank of 1". ``scale="probability"``
gives the random-surfer distribution (sum 1) instead, which is what networkx
returns.

Dangling pages (no out-links) are handled as Cho does: "if a page has no
outgoing link, we assume that it has outgoing links to every single Web page"
(§2), i.e. its score is spread evenly over all N pages, itself included. Najork
& Wiener made the same choice ("pages with no outgoing links contribute their
weight equally to all pages", §2). With cross-host links only (Najork & Wiener
§4, "a variant of PageRank that only propagates weight along links between
different hosts"), a page whose links all stay on its host is dangling in that
graph and is treated the same way, which is exactly what made their
www.yahoo.com example spread its weight over the whole graph.

Memory: the link matrix is kept once, transposed (in-links per row) with int32
indices and float64 weights 1/c; vectors are float64. A 10-million-edge graph is
about 120 MB of matrix plus a few 8-byte-per-node vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

CHO_DAMPING = 0.9  # Cho et al. §6: "we use a damping factor d of 0.9"


def _index_dtype(n: int, nnz: int):
    return np.int32 if max(n, nnz) < 2**31 - 1 else np.int64


def build_adjacency(src, dst, n: int | None = None, *, dedupe: bool = True,
                    drop_self_loops: bool = False) -> sp.csr_matrix:
    """The link graph as an n x n CSR matrix: row = source page, column = target.

    ``dedupe`` collapses repeated links between the same two pages into one (a
    link store may record a link each time a page is fetched); otherwise the
    entry counts links and PageRank splits a page's score per link, as Cho's
    "number of links going out of page Ti" reads. ``drop_self_loops`` removes
    links from a page to itself.
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.shape != dst.shape:
        raise ValueError("src and dst must have the same length")
    if n is None:
        n = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError(f"node ids must lie in [0, {n})")
    if drop_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    itype = _index_dtype(n, len(src))
    data = np.ones(len(src), dtype=np.float64)
    adj = sp.csr_matrix((data, (src.astype(itype, copy=False), dst.astype(itype, copy=False))),
                        shape=(n, n))
    adj.sum_duplicates()  # also sorts the column indices of each row
    if dedupe:
        adj.data[:] = 1.0
    return adj


def cross_host_edges(adjacency: sp.csr_matrix, hosts) -> sp.csr_matrix:
    """Keep only links whose two ends are on different hosts (Najork & Wiener §4).

    ``hosts`` gives a host id (any integer) per page.
    """
    adj = sp.csr_matrix(adjacency)
    hosts = np.asarray(hosts)
    if hosts.shape != (adj.shape[0],):
        raise ValueError(f"hosts must have one id per page ({adj.shape[0]}), got {hosts.shape}")
    rows = np.repeat(np.arange(adj.shape[0], dtype=adj.indices.dtype), np.diff(adj.indptr))
    keep = hosts[rows] != hosts[adj.indices]
    out = sp.csr_matrix((adj.data[keep], (rows[keep], adj.indices[keep])), shape=adj.shape)
    out.sum_duplicates()
    return out


class TransitionMatrix:
    """The link graph prepared for power iteration, built once per graph.

    ``inlinks`` is the transposed graph (row p lists the pages linking to p)
    whose entries are 1/c(src): one sparse product then applies every
    IR(Ti)/ci term of Cho's equation. ``dangling`` lists the pages without
    out-links, whose score is spread over all pages.
    """

    def __init__(self, adjacency: sp.spmatrix, hosts=None):
        adj = sp.csr_matrix(adjacency, dtype=np.float64)
        if adj.shape[0] != adj.shape[1]:
            raise ValueError(f"adjacency must be square, got {adj.shape}")
        if hosts is not None:
            adj = cross_host_edges(adj, hosts)
        self.n = adj.shape[0]
        outweight = np.asarray(adj.sum(axis=1)).ravel()
        if (outweight < 0).any():
            raise ValueError("link weights must be non-negative")
        self.dangling = np.flatnonzero(outweight == 0)
        inl = adj.T.tocsr()  # CSC -> CSR of the transpose: rows are in-links
        itype = _index_dtype(self.n, inl.nnz)
        inl.indices = inl.indices.astype(itype, copy=False)
        inl.indptr = inl.indptr.astype(itype, copy=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            inl.data = inl.data / outweight[inl.indices]
        self.inlinks = inl
        self.nnz = inl.nnz
        self.outweight = outweight

    def restricted_to_sources(self, keep) -> TransitionMatrix:
        """The same graph with only the links *from* pages where ``keep`` is true.

        The other pages keep their ids but become dangling: what the crawl knows
        when only the ``keep`` pages have been fetched (a page's links are known
        once it is crawled, Cho §4 Fig. 1). Costs one pass over the links, no
        sort: the virtual crawler calls it at every PageRank recompute.
        """
        keep = np.asarray(keep, dtype=bool)
        inl = self.inlinks
        mask = keep[inl.indices]
        # Kept entries before each row start = the new row pointers.
        kept_before = np.zeros(inl.nnz + 1, dtype=inl.indptr.dtype)
        np.cumsum(mask, out=kept_before[1:])
        indptr = kept_before[inl.indptr]
        sub = sp.csr_matrix((inl.data[mask], inl.indices[mask], indptr), shape=inl.shape)
        out = object.__new__(TransitionMatrix)
        out.n, out.inlinks, out.nnz = self.n, sub, sub.nnz
        out.outweight = np.where(keep, self.outweight, 0.0)
        out.dangling = np.flatnonzero(out.outweight == 0)
        return out


@dataclass
class PageRankResult:
    scores: np.ndarray   # float64, one per page; Cho's scale (mean 1) unless asked otherwise
    iterations: int      # power-iteration steps taken
    delta: float         # L1 change of the probability vector at the last step
    converged: bool      # delta < tol


def _start_vector(x0, n: int) -> np.ndarray:
    if x0 is None:
        return np.full(n, 1.0 / n)
    x = np.asarray(x0, dtype=np.float64).ravel()
    if len(x) > n:
        raise ValueError(f"warm-start vector has {len(x)} entries for {n} pages")
    if len(x) < n:
        # The graph grew since the previous vector: pages first seen since then
        # start at the average score, which the next iterations correct.
        fill = x.mean() if len(x) else 1.0
        x = np.concatenate([x, np.full(n - len(x), fill)])
    if not np.isfinite(x).all() or (x < 0).any() or x.sum() <= 0:
        raise ValueError("warm-start vector must be finite, non-negative and not all zero")
    return x / x.sum()


def pagerank(graph, damping: float = CHO_DAMPING, *, x0=None, tol: float = 1e-6,
             max_iter: int = 200, hosts=None, scale: str = "cho") -> PageRankResult:
    """PageRank of every page of ``graph`` (a CSR adjacency or a TransitionMatrix).

    x0: a previous score vector (any scale) to warm-start from: the ranker
        recomputes on a graph that grew a little, so the old vector is close to
        the new fixed point and few iterations are needed. It may be shorter
        than the graph (new pages are appended at the end).
    tol: stop when the L1 change of the probability vector is below tol.
    hosts: a host id per page: count only links between different hosts
        (Najork & Wiener §4). Ignored when ``graph`` is already a TransitionMatrix.
    scale: "cho" (mean 1, Cho §2 / Najork & Wiener §4) or "probability" (sum 1).
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    if scale not in ("cho", "probability"):
        raise ValueError(f"scale must be 'cho' or 'probability', got {scale!r}")
    tm = graph if isinstance(graph, TransitionMatrix) else TransitionMatrix(graph, hosts=hosts)
    n = tm.n
    if n == 0:
        return PageRankResult(np.zeros(0), 0, 0.0, True)
    x = _start_vector(x0, n)
    teleport = (1.0 - damping) / n
    delta, it = np.inf, 0
    while it < max_iter:
        it += 1
        dangling_mass = x[tm.dangling].sum()
        y = tm.inlinks @ x
        y *= damping
        # (1-d)/N teleport plus the dangling pages' score spread evenly (Cho §2).
        y += teleport + damping * dangling_mass / n
        y /= y.sum()  # guards against floating-point drift of the total
        delta = float(np.abs(y - x).sum())
        x = y
        if delta < tol:
            break
    scores = x * n if scale == "cho" else x
    return PageRankResult(scores, it, delta, delta < tol)
