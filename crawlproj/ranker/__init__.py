"""The ranker: PageRank on the link graph the crawl has gathered so far.

Cho, Garcia-Molina & Page (1998) §4, Fig. 2 order the frontier by IR'(P), the
PageRank of the pages seen so far; Najork & Wiener (2001) §2 also ran it over
links between different hosts only. `crawlproj.ranker.pagerank` holds the
computation (sparse power iteration, warm start); the loop that runs it on a
schedule and rewrites queued priorities builds on it.
"""

from crawlproj.ranker.pagerank import (
    PageRankResult,
    TransitionMatrix,
    build_adjacency,
    cross_host_edges,
    pagerank,
)

__all__ = ["PageRankResult", "TransitionMatrix", "build_adjacency", "cross_host_edges", "pagerank"]
