"""Prioritizers: the order in which the frontier serves URLs (Mercator §3.1's
pluggable prioritizer; Cho et al. §3's ordering metrics).

A prioritizer gives each URL a score when it enters the frontier: lower scores
are served sooner, among the hosts that politeness allows now. Name one with
FRONTIER_PRIORITIZER: a short name below or a dotted path to a class with a
`score(request) -> float` method (and optionally `from_crawler`).
"""

from __future__ import annotations

from scrapy.utils.misc import build_from_crawler, load_object

PRIORITIZERS = {
    "bfs": "crawlproj.prioritizers.basic.BreadthFirst",
    "random": "crawlproj.prioritizers.basic.RandomOrder",
    "backlinks": "crawlproj.prioritizers.links.BacklinkCount",
    "pagerank": "crawlproj.prioritizers.links.PageRankEstimate",
    "opic": "crawlproj.prioritizers.links.OPIC",
    "hostfirst": "crawlproj.prioritizers.basic.HostFirst",
}


def load_prioritizer(name: str, crawler):
    path = PRIORITIZERS.get(name, name)
    if "." not in path:
        raise ValueError(f"unknown FRONTIER_PRIORITIZER {name!r}; "
                         f"use one of {sorted(PRIORITIZERS)} or a dotted class path")
    return build_from_crawler(load_object(path), crawler)
