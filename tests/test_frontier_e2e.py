"""End to end, one worker: the frontier's order, and requests it must refuse.

Real `scrapy crawl` processes, a real Redis-protocol server, the simulated web;
order and fetches are read from the simulated web's request log.
"""

from __future__ import annotations

from collections import deque

import pytest

from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers, stat
from tests.spiders.hostile import BAD_URLS

pytestmark = pytest.mark.e2e

# No redirects, errors, robots exclusions or Crawl-delays: every page's depth
# from the seeds is its shortest link distance, known from the graph.
PLAIN = {"seed": 3, "hosts": 30, "pages": 300, "page_bytes": 500, "p_redirect": 0,
         "p500": 0, "robots_fraction": 0, "crawl_delay_fraction": 0}


def link_depths(web, seeds) -> dict[str, int]:
    """Shortest link distance of every reachable URL from the seeds (BFS)."""
    depth = {u: 0 for u in seeds}
    todo = deque(seeds)
    while todo:
        url = todo.popleft()
        node = web.node_of(url)
        for target, _anchor in ([] if node is None else web.links(node)):
            if target not in depth:
                depth[target] = depth[url] + 1
                todo.append(target)
    return depth


def descents(seq) -> int:
    return sum(1 for a, b in zip(seq, seq[1:]) if b < a)


@pytest.mark.parametrize("prioritizer", ["bfs", "random"])
def test_frontier_serves_in_priority_order(redis_url, tmp_path, prioritizer):
    """One request at a time, no politeness wait: the frontier must hand out
    the best queued URL every time, so bfs visits pages level by level (Cho et
    al. §3) and a random order does not (which shows the check can fail)."""
    with SimWebServer(PLAIN, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        depth = link_depths(sw.web, seeds)
        workers = Workers(sw, redis_url, tmp_path, seeds, f"order-{prioritizer}", {
            "CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1, "FRONTIER_DELAY_FACTOR": 0,
            "FRONTIER_PRIORITIZER": prioritizer, "FRONTIER_RANDOM_SEED": 5})
        workers.start(1)
        assert workers.wait() == [0]
        order = checks.arrival_order(sw.read_log())
        assert set(order) == set(depth) == sw.web.reachable(seeds)
        levels = [depth[u] for u in order]
        if prioritizer == "bfs":
            assert descents(levels) == 0, levels
        else:
            assert descents(levels) > len(levels) // 10


def test_unfetchable_requests_are_refused_and_the_crawl_goes_on(redis_url, tmp_path):
    web = {**PLAIN, "hosts": 10, "pages": 60}
    with SimWebServer(web, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(1)
        workers = Workers(sw, redis_url, tmp_path, seeds, "hostile", {
            "SPIDER_MODULES": "crawlproj.spiders,tests.spiders", "FRONTIER_DELAY_FACTOR": 0})
        workers.start(1, spider="hostile")
        assert workers.wait() == [0]
        log = workers.log(0)
        for reason, url in BAD_URLS.items():
            # refused by the frontier, or (w3lib 2.6 and later) not even built by Scrapy
            by_scrapy = stat(log, f"hostile/unbuildable/{reason}")
            assert stat(log, f"frontier/refused/{reason}") + by_scrapy == 1, reason
            if not by_scrapy:
                assert f"Frontier refused {url[:60]}" in log, reason
        # nothing of them reached the web, and everything else was crawled
        counts = checks.fetch_counts(sw.read_log())
        assert set(counts) == sw.web.reachable(seeds)
        assert "finish_reason': 'finished'" in log


@pytest.mark.parametrize("prioritizer", ["bfs", "backlinks"])
def test_links_sent_lately_are_dropped_before_scrapy_handles_them(redis_url, tmp_path, prioritizer):
    """crawlproj/frontier/recentlinks.py drops a link this worker already sent, unless
    the prioritizer counts duplicate links (backlinks must see them all); the
    crawl fetches the same pages either way."""
    with SimWebServer(PLAIN, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        workers = Workers(sw, redis_url, tmp_path, seeds, f"recent-{prioritizer}", {
            "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_PRIORITIZER": prioritizer})
        workers.start(1)
        assert workers.wait() == [0]
        counts = checks.fetch_counts(sw.read_log())
        assert set(counts) == sw.web.reachable(seeds) and max(counts.values()) == 1
        log = workers.log(0)
        dropped = stat(log, "frontier/recent_links_dropped")
        if prioritizer == "bfs":
            assert dropped > 100, dropped
        else:
            assert dropped == 0 and stat(log, "frontier/bumped") > 0
