"""The importance-first prioritizers on the live frontier, on a web small enough
to know the right order by hand (Cho et al. §3; Abiteboul et al. 2003).

One worker, one request at a time, no politeness wait, one page per host: the
frontier must then serve exactly the prioritizer's best URL each time, and the
simulated web's request log shows the order.
"""

from __future__ import annotations

import pytest
from scrapy import Request

from crawlproj.prioritizers.links import OPIC, BacklinkCount, PageRankEstimate
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers

#   S -> A, B, C;  A -> D;  B -> D;  C -> D, E
EDGES = [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4), (3, 5)]
NAMES = "SABCDE"

# By hand (ties between equal scores go to the lower host name, i.e. S < A < ... < E):
EXPECTED = {
    # level by level, in order of discovery
    "bfs": "SABCDE",
    # after A, D has 1 link like B and C but was found later: B; then D has 2
    "backlinks": "SABDCE",
    # IR' estimates: A, B, C get 0.1 + 0.9 * 1/3 = 0.4; A gives D 0.1 + 0.9 * 0.4
    # = 0.46 > 0.4, so D next; C gives E 0.1 + 0.9 * 0.4 / 2 = 0.28, last
    "pagerank": "SADBCE",
    # cash: A, B, C get 1/3; A gives D 1/3 (a tie, B is first by name); B gives
    # D another 1/3: D (2/3) before C
    "opic": "SABDCE",
}


def crawl_order(redis_url, tmp_path, prioritizer, edges, nodes_per_host) -> list[int]:
    """Node ids in the order one worker fetched them, starting at node 0."""
    graph = tmp_path / "g.edges.tsv"
    graph.write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    spec = {"graph": str(graph), "format": "edges", "nodes_per_host": nodes_per_host,
            "page_bytes": 300}
    with SimWebServer(spec, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers = Workers(sw, redis_url, tmp_path, [sw.web.url(0)], f"hand-{prioritizer}", {
            "CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1, "FRONTIER_DELAY_FACTOR": 0,
            "FRONTIER_PRIORITIZER": prioritizer})
        workers.start(1)
        assert workers.wait() == [0]
        return [sw.web.node_of(u) for u in checks.arrival_order(sw.read_log())]


@pytest.mark.e2e
@pytest.mark.parametrize("prioritizer", sorted(EXPECTED))
def test_order_on_a_hand_made_web(redis_url, tmp_path, prioritizer):
    order = crawl_order(redis_url, tmp_path, prioritizer, EDGES, nodes_per_host=1)
    assert "".join(NAMES[i] for i in order) == EXPECTED[prioritizer]


@pytest.mark.e2e
@pytest.mark.parametrize("prioritizer,expected", [("hostfirst", [0, 2, 4, 1, 3, 5]),
                                                  ("bfs", [0, 1, 2, 3, 4, 5])])
def test_host_first(redis_url, tmp_path, prioritizer, expected):
    """Hosts A = {0, 1}, B = {2, 3}, C = {4, 5}; 0 -> 1, 2; 2 -> 3, 4; 4 -> 5.
    Host-first takes 2 (B's first) before 1, then 4 (C's first) before 1 and 3;
    breadth-first goes level by level."""
    edges = [(0, 1), (0, 2), (2, 3), (2, 4), (4, 5)]
    assert crawl_order(redis_url, tmp_path, prioritizer, edges, nodes_per_host=2) == expected


def linked(url, parent_score, links, parent_host):
    return Request(url, meta={"link_context": (parent_score, links, parent_host)})


def test_scores_and_bumps():
    pr = PageRankEstimate(damping=0.9)
    r = linked("http://b.ex/x", -2.0, 4, "a.ex")
    assert pr.score(r) == pytest.approx(-(0.1 + 0.9 * 2 / 4))
    assert pr.bump(r) == pytest.approx(-0.45)
    assert pr.score(Request("http://s.ex/")) == -1.0  # a seed: the average page
    # a retry or redirect keeps the score it was leased with, and bumps nothing
    again = Request("http://b.ex/x", meta={"frontier_score": -7.5})
    assert (pr.score(again), pr.bump(again)) == (-7.5, 0.0)
    # Najork & Wiener's cross-host rule: a link within a host confers nothing
    cross = PageRankEstimate(cross_host_only=True)
    same = linked("http://a.ex/y", -2.0, 4, "a.ex")
    assert (cross.score(same), cross.bump(same)) == (pytest.approx(-0.1), 0.0)
    assert OPIC().score(r) == -0.5 and OPIC().bump(r) == -0.5
    b = BacklinkCount()
    assert b.bump(r) == -1e10 and BacklinkCount(cross_host_only=True).bump(same) == 0
    assert b.score(r) < b.score(Request("http://s.ex/")) - 0.9e10
