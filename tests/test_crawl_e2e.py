"""End to end: several `scrapy crawl web` workers share one frontier.

Everything is real: worker processes running Scrapy's engine, a Redis-protocol
server, HTTP to the simulated web through its proxy. What was fetched, how
often, and how politely is read from the simulated web's own request log.
"""

from __future__ import annotations

import signal
import time

import pytest

from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers, stat

# A few thousand pages over a few hundred hosts, with latency, robots.txt
# exclusions, Crawl-delay, 404s, 500s, redirects and binary resources.
WEB = {"seed": 7, "hosts": 200, "pages": 2000, "page_bytes": 2000, "latency_ms": [2, 8],
       "crawl_delay_fraction": 0.03, "crawl_delay": 0.2}
FACTOR = 2.0
RETRIES = 1


def expected(sw):
    seeds = sw.web.seeds(3)
    return seeds, sw.web.reachable(seeds, obey_robots=True)


def assert_fetched_once_and_politely(sw, reachable, allow_refetch=frozenset()):
    records = sw.settle_log()  # the workers have exited: every request is in
    counts = checks.fetch_counts(records)
    status = {checks.url_of(r): r["status"] for r in records}
    assert set(counts) == reachable, (
        f"missing {sorted(reachable - set(counts))[:5]}, extra {sorted(set(counts) - reachable)[:5]}")
    twice = {u: n for u, n in counts.items()
             if n != (1 + RETRIES if status[u] == 500 else 1) and u not in allow_refetch}
    assert not twice, f"fetched more than once: {list(twice.items())[:5]}"
    assert checks.overlaps(records) == []
    bad = checks.politeness_violations(records, factor=FACTOR, crawl_delay_of=sw.web.crawl_delay,
                                       tolerance=0.005)
    assert bad == [], bad[:3]
    return records


@pytest.mark.parametrize("n_workers,partitions", [(2, 1), (3, 4)])
def test_workers_share_one_polite_frontier(redis_url, tmp_path, n_workers, partitions):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, f"e2e{n_workers}", {
            "FRONTIER_DELAY_FACTOR": FACTOR, "FRONTIER_PARTITIONS": partitions,
            "RETRY_TIMES": RETRIES})
        workers.start(n_workers)
        assert workers.wait() == [0] * n_workers
        assert_fetched_once_and_politely(sw, reachable)
        logs = [workers.log(i) for i in range(n_workers)]
        # every worker did a share of the work, and no lease expired
        assert all(stat(log, "frontier/released") > 0 for log in logs)
        assert sum(stat(log, "frontier/expired_leases") for log in logs) == 0
        assert all("finish_reason': 'finished'" in log for log in logs)


def test_killed_worker_loses_nothing(redis_url, tmp_path):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, "kill9", {
            "FRONTIER_DELAY_FACTOR": FACTOR, "RETRY_TIMES": RETRIES, "FRONTIER_LEASE_TTL": 3})
        victim, survivor = workers.start(2)
        sw.wait_log(len(reachable) // 4, timeout=120)
        Workers.signal(victim, signal.SIGKILL)
        victim.wait()
        assert survivor.wait(300) == 0
        records = sw.settle_log()
        counts = checks.fetch_counts(records)
        assert set(counts) == reachable
        refetched = [u for u, n in counts.items() if n > (1 + RETRIES if u else 1)]
        expired = stat(workers.log(1), "frontier/expired_leases")
        # only URLs whose lease expired with the dead worker can be fetched twice
        assert expired > 0 and len(refetched) <= expired
        assert checks.overlaps(records) == []


def test_interrupted_worker_returns_its_urls(redis_url, tmp_path):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, "sigint", {
            "FRONTIER_DELAY_FACTOR": FACTOR, "RETRY_TIMES": RETRIES})
        (first,) = workers.start(1)
        sw.wait_log(len(reachable) // 3, timeout=120)
        Workers.signal(first, signal.SIGINT)
        assert first.wait(60) == 0
        assert "frontier/returned" in workers.log(0)
        time.sleep(0.5)
        (second,) = workers.start(1, seeds=False)  # joins the crawl, no seeds
        assert second.wait(300) == 0
        assert_fetched_once_and_politely(sw, reachable)
