"""Importance-first orders on the shared frontier: backlink count IB'(P),
PageRank IR'(P) and OPIC (Cho, Garcia-Molina & Page 1998 §3; Abiteboul, Preda &
Cobena 2003).

A score is set when a URL is first seen, from what is known then: the page
that linked to it (meta["link_context"], crawlproj/prioritizers/linkcontext.py). Each
further link to a URL still queued changes its score by bump() inside the
frontier's enqueue script, so IB' and OPIC cash stay exact as the crawl goes on
(crawlproj/frontier/lua/sync.lua). PageRank is also recomputed on the whole
graph now and then by the ranker, which rewrites every queued score
(Frontier.rescore). The arithmetic is crawlproj.prioritizers.importance's,
shared with the virtual crawler of `scrapy evaluate`.

A request that comes back without a link context (a retry, a redirect) keeps
the score it was leased with; a seed gets the score of a page with no known
links.
"""

from __future__ import annotations

import time

from crawlproj.prioritizers import importance
from crawlproj.prioritizers.basic import Prioritizer
from crawlproj.urls import host_of


class LinkPrioritizer(Prioritizer):
    """Shared plumbing: the link context, and Najork & Wiener's cross-host rule
    (§4: only links between different hosts confer importance)."""

    def __init__(self, cross_host_only: bool = False):
        self.cross_host_only = cross_host_only

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getbool("PRIORITIZER_CROSS_HOST_ONLY"))

    def context(self, request):
        """(parent importance or None, parent's link count, weight of this
        link: 1, or 0 for a same-host link under the cross-host rule), or
        None for a request that no page's links produced."""
        ctx = request.meta.get("link_context")
        if not ctx:
            return None
        parent_score, links, parent_host = ctx[:3]
        weight = importance.backlink_increment(parent_host, host_of(request.url),
                                               self.cross_host_only)
        parent = None if parent_score is None else -parent_score
        return parent, links, weight

    def score(self, request) -> float:
        ctx = self.context(request)
        if ctx is None:
            again = request.meta.get("frontier_score")
            return self.seed_score() if again is None else again
        return self.link_score(*ctx)

    def bump(self, request) -> float:
        ctx = self.context(request)
        return 0.0 if ctx is None else self.link_bump(*ctx)


class BacklinkCount(LinkPrioritizer):
    """IB'(P): the number of links to P seen so far; most first, then first
    discovered. A score is -count x 1e10 + discovery time, so one more link
    outranks any difference in time (as BreadthFirst's depth does)."""

    UNIT = 1e10

    def seed_score(self) -> float:
        return time.time()

    def link_score(self, parent, links, weight) -> float:
        return -self.UNIT * weight + time.time()

    def link_bump(self, parent, links, weight) -> float:
        return -self.UNIT * weight


class PageRankEstimate(LinkPrioritizer):
    """IR'(P) on Cho's scale (mean 1): a new URL gets (1 - d) + d IR(T)/c(T)
    from the page T that linked to it, IR(T) being T's score when it was
    leased; each further link adds its d IR(T)/c(T). The ranker replaces these
    estimates by PageRank on the whole graph seen so far."""

    def __init__(self, cross_host_only: bool = False, damping: float = importance.CHO_DAMPING):
        super().__init__(cross_host_only)
        self.damping = damping

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        return cls(s.getbool("PRIORITIZER_CROSS_HOST_ONLY"),
                   s.getfloat("PAGERANK_DAMPING"))

    def seed_score(self) -> float:
        return -1.0  # the average page (Cho's IR starts at 1)

    def _share(self, parent, links, weight) -> float:
        if not weight or parent is None:
            return 0.0
        return float(importance.pagerank_contribution(parent, links, self.damping))

    def link_score(self, parent, links, weight) -> float:
        return -(importance.pagerank_base(self.damping) + self._share(parent, links, weight))

    def link_bump(self, parent, links, weight) -> float:
        return -self._share(parent, links, weight)


class OPIC(LinkPrioritizer):
    """Online Page Importance Computation: every seed starts with cash 1; a
    page fetched passes its cash (its score when leased) to its links in equal
    shares, and a queued URL's cash is the sum of the shares it received: most
    cash first. No global recomputation. Cash sent to pages already fetched is
    not kept (a recrawl order would add it to their history)."""

    def seed_score(self) -> float:
        return -1.0

    def _share(self, parent, links, weight) -> float:
        if not weight or parent is None:
            return 0.0
        return float(importance.opic_share(parent, links))

    def link_score(self, parent, links, weight) -> float:
        return -self._share(parent, links, weight)

    def link_bump(self, parent, links, weight) -> float:
        return -self._share(parent, links, weight)
