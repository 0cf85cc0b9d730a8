"""The virtual crawler's graph: a graph file (read by crawlproj.graphfile, the
reader the simulated web uses too) as a deduplicated CSR link matrix, with a
host id per page when the file has URLs (the host-first order and cross-host
PageRank use them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from crawlproj import graphfile
from crawlproj.graphfile import GraphFormatError
from crawlproj.ranker.pagerank import build_adjacency
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


def read_graph(path: str, *, urls: str | None = None, keep_self_loops: bool = False) -> Graph:
    """Read a graph file (crawlproj.graphfile: formats, URL rule) into a
    deduplicated CSR link graph.

    Self-links are dropped unless ``keep_self_loops``: a page pointing at itself
    is not one of the "links to P" from other pages that IB(P) counts (Cho §2),
    and cnr-2000 has 87,442 of them (SOURCES.md). Repeated links count once.
    """
    lg = graphfile.read(path, urls=urls)
    offsets = np.frombuffer(lg.offsets, dtype=np.int64)
    dst = np.frombuffer(lg.targets, dtype=np.int32).astype(np.int64)
    src = np.repeat(np.arange(lg.n, dtype=np.int64), np.diff(offsets))
    loops = int((src == dst).sum())
    adj = build_adjacency(src, dst, lg.n, drop_self_loops=not keep_self_loops)
    g = Graph(adj, name=lg.name,
              self_loops_dropped=(0 if keep_self_loops else loops) + lg.stats.get("self_links", 0))
    if lg.urls is not None:
        g.urls = lg.urls
        g.hosts, g.host_names = _hosts(g.urls)
    return g
