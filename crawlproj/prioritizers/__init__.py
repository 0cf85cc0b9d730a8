"""Prioritizers: the order in which the frontier serves URLs (Mercator §3.1's
pluggable prioritizer; Cho et al. §3's ordering metrics).

A prioritizer gives each URL a score when it enters the frontier: lower scores
are served sooner, among the hosts that politeness allows now. Name one with
FRONTIER_PRIORITIZER: a short name below or a dotted path to a class with a
`score(request) -> float` method (and optionally `from_crawler`). A crawl's
record keeps the name (:func:`prioritizer_name`): scores of two prioritizers
are not comparable, so every worker of a crawl must use the same one.
What a link's score needs from the page it was found on (the page's score,
anchor text) travels with it in meta["link_context"], set by the spider
middleware in linkcontext.py (middlewares/linkcontext.py is its entry point).
"""

from __future__ import annotations

import difflib

from scrapy.utils.misc import build_from_crawler, load_object

from crawlproj.errors import CrawlprojError

PRIORITIZERS = {
    "bfs": "crawlproj.prioritizers.basic.BreadthFirst",
    "random": "crawlproj.prioritizers.basic.RandomOrder",
    "backlinks": "crawlproj.prioritizers.links.BacklinkCount",
    "pagerank": "crawlproj.prioritizers.links.PageRankEstimate",
    "opic": "crawlproj.prioritizers.links.OPIC",
    "hostfirst": "crawlproj.prioritizers.basic.HostFirst",
    "similarity": "crawlproj.prioritizers.similarity.SimilarityOrder",
}


class PrioritizerError(CrawlprojError, ValueError):
    """FRONTIER_PRIORITIZER names no prioritizer; the message is one line."""


def prioritizer_name(name) -> str:
    """The name a crawl records for FRONTIER_PRIORITIZER: the short name of a
    built-in one (also when given by its class path), else the class path."""
    name = str(name).strip()
    short = {path: short for short, path in PRIORITIZERS.items()}
    return short.get(name, name.lower() if name.lower() in PRIORITIZERS else name)


def prioritizer_class(name) -> type:
    """The class FRONTIER_PRIORITIZER names; PrioritizerError if none."""
    name = prioritizer_name(name)
    path = PRIORITIZERS.get(name, name)
    if "." not in path:
        close = difflib.get_close_matches(name.lower(), PRIORITIZERS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise PrioritizerError(f"unknown FRONTIER_PRIORITIZER {name!r}{hint}; use one of "
                               f"{', '.join(PRIORITIZERS)} or a dotted class path")
    try:
        return load_object(path)
    except (ImportError, NameError, AttributeError, ValueError) as exc:
        raise PrioritizerError(f"FRONTIER_PRIORITIZER {name!r} cannot be loaded: {exc}") from None


def load_prioritizer(name, crawler):
    return build_from_crawler(prioritizer_class(name), crawler)
