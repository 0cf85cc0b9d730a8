"""The virtual crawler's graph: a graph file (read by crawlproj.graphfile, the
reader the simulated web uses too) as a deduplicated CSR link matrix, each
page's links in the order the page has them, with a host id per page when the
file has URLs (the host-first order and cross-host
PageRank use them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from crawlproj import graphfile
from crawlproj.graphfile import GraphFormatError
from crawlproj.urls import host_of

__all__ = ["Graph", "GraphFormatError", "read_graph"]


@dataclass
class Graph:
    adjacency: sp.csr_matrix         # row = source page, column = target; entries 1
    urls: list[str] | None = None    # URL per page, when the file has them
    hosts: np.ndarray | None = None  # host id per page (int32), when URLs are known
    host_names: list[str] | None = None
    name: str = ""
    self_loops_dropped: int = 0

    @property
    def n(self) -> int:
        return self.adjacency.shape[0]

    @property
    def m(self) -> int:
        return self.adjacency.nnz

    def successors(self, page: int) -> np.ndarray:
        a = self.adjacency
        return a.indices[a.indptr[page]:a.indptr[page + 1]]


def _hosts(urls: list[str]) -> tuple[np.ndarray, list[str]]:
    """A host id per page: the frontier's politeness key (crawlproj.urls.host_of;
    graphfile admits only URLs the rule accepts), so that host-first orders and
    cross-host PageRank group pages as a crawl does."""
    ids: dict[str, int] = {}
    out = np.empty(len(urls), dtype=np.int32)
    for i, url in enumerate(urls):
        out[i] = ids.setdefault(host_of(url), len(ids))
    return out, list(ids)


def _links_in_page_order(src: np.ndarray, dst: np.ndarray, n: int,
                         drop_self_loops: bool) -> sp.csr_matrix:
    """The n x n link matrix (entries 1), each row's targets in the order of
    their first link on the page, not sorted by id: the crawlers discover a
    page's links in that order, and every order breaks ties by discovery (Cho's
    FIFO queue takes a page's links as the page lists them), so the virtual
    crawler must see them as the simulated web serves them."""
    if drop_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    first = np.sort(np.unique(src * n + dst, return_index=True)[1])  # file order, repeats dropped
    src, dst = src[first], dst[first]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return sp.csr_matrix((np.ones(len(dst)), dst, indptr), shape=(n, n))


def read_graph(path: str, *, urls: str | None = None, keep_self_loops: bool = False) -> Graph:
    """Read a graph file (crawlproj.graphfile: formats, URL rule) into a
    deduplicated CSR link graph.

    Self-links are dropped unless ``keep_self_loops``: a page pointing at itself
    is not one of the "links to P" from other pages that IB(P) counts (Cho §2),
    and cnr-2000 has 87,442 of them (SOURCES.md). Repeated links count once,
    where the page first has them.
    """
    lg = graphfile.read(path, urls=urls)
    offsets = np.frombuffer(lg.offsets, dtype=np.int64)
    dst = np.frombuffer(lg.targets, dtype=np.int32).astype(np.int64)
    src = np.repeat(np.arange(lg.n, dtype=np.int64), np.diff(offsets))
    loops = int((src == dst).sum())
    adj = _links_in_page_order(src, dst, lg.n, drop_self_loops=not keep_self_loops)
    g = Graph(adj, name=lg.name,
              self_loops_dropped=(0 if keep_self_loops else loops) + lg.stats.get("self_links", 0))
    if lg.urls is not None:
        g.urls = lg.urls
        g.hosts, g.host_names = _hosts(g.urls)
    return g
