"""Per-page importance arithmetic shared by the live prioritizers and the virtual crawler.

Each function is the formula for one page or one link, with no state of its
own, so the frontier's prioritizers (one URL at enqueue time) and the virtual
crawler of `crawlproj.evaluate` (whole arrays at once: every function here
also accepts numpy arrays) compute the same numbers.

Larger importance = crawl sooner. The frontier serves *lower* scores first, so
`frontier_score` turns one into the other.

Sources:
  [Cho]   Cho, Garcia-Molina & Page 1998, §2 (IB, IR) and §4 Fig. 2 (IB', IR')
  [OPIC]  Abiteboul, Preda & Cobena 2003, "Adaptive on-line page importance
          computation", WWW 2003, §3 (cash and history)
  [NW]    Najork & Wiener 2001, §4 (links between different hosts only)
  [WebCrawler] Pinkerton 1994 (host-first: "every server represented")
"""

from __future__ import annotations

import numpy as np

from crawlproj.ranker.pagerank import CHO_DAMPING


def frontier_score(importance):
    """The frontier's score for an importance value: lower scores are served first."""
    return -importance


def _per_link(amount, links):
    """amount / links, and 0 where a page has no links (scalars or arrays)."""
    if np.ndim(amount) == 0 and np.ndim(links) == 0:
        return 0.0 if links <= 0 else amount / links
    c = np.asarray(links, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, np.asarray(amount, dtype=np.float64) / c, 0.0)


# -- Backlink count IB'(P) [Cho §2] -------------------------------------------------

def backlink_increment(src_host=None, dst_host=None, cross_host_only: bool = False) -> int:
    """How much one newly seen link adds to its target's IB'(P).

    IB'(P) is "the number of links to P that have been seen so far" [Cho §2]:
    each link seen once adds 1. With ``cross_host_only`` a link within one host
    adds nothing, as in Najork & Wiener's remote-links variant [NW §4].
    """
    if cross_host_only and src_host is not None and src_host == dst_host:
        return 0
    return 1


# -- PageRank IR'(P) [Cho §2, Fig. 2] ----------------------------------------------

def pagerank_base(damping: float = CHO_DAMPING) -> float:
    """IR'(P) of a page no crawled page links to yet: the (1 - d) of Cho's equation."""
    return 1.0 - damping


def pagerank_contribution(parent_rank, parent_outlinks, damping: float = CHO_DAMPING):
    """What one link from a crawled page adds to its target's IR'(P): d * IR(T)/c(T).

    This is one term of Cho's equation IR(P) = (1-d) + d * sum IR(Ti)/ci [Cho §2],
    with the parent's current estimate. A URL discovered between two ranker runs
    gets ``pagerank_base() + sum of pagerank_contribution()`` over the crawled
    pages known to link to it: the equation evaluated once with its parents'
    ranks held fixed. Pages without links (c = 0) are dangling and spread their
    rank over every page [Cho §2], which adds the same to every URL and so does
    not change the order: they contribute 0 here.
    """
    return damping * _per_link(parent_rank, parent_outlinks)


# -- OPIC [Abiteboul, Preda & Cobena 2003] ----------------------------------------------

def opic_share(cash, outlinks):
    """The cash each child receives when a page holding ``cash`` is crawled.

    OPIC §3: when page i is read, its cash C[i] is added to its history H[i] and
    distributed equally among the pages it links to; C[i] becomes 0. A page with
    no links gives its cash to the virtual page that links to every page (their
    fix for dangling pages); callers spread it evenly (``opic_share`` returns 0
    per child then). Nutch's OPIC scoring filter does the same division:
    score / number of outlinks per outlink.
    """
    return _per_link(cash, outlinks)


def opic_importance(history, cash, total_history):
    """OPIC's estimate of a page's importance: (H[i] + C[i]) / (|H| + 1) [OPIC §3].

    ``total_history`` is the cash distributed so far (|H|, the sum of all
    histories). With all cash starting at one page, |H| + 1 is the total cash
    ever present, so the estimates of all pages sum to 1.
    """
    return (history + cash) / (total_history + 1.0)


# -- Host-first [WebCrawler] ------------------------------------------------------------

def hostfirst_class(host_already_represented: bool) -> int:
    """0 for the first URL of a host not yet represented in the crawl, 1 for the rest.

    The WebCrawler's indexing mode fetched one page of every server it knew
    before going deeper into any: the first URL of a new host jumps the queue;
    within a class the order is breadth-first.
    """
    return 1 if host_already_represented else 0
