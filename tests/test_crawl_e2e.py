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

pytestmark = pytest.mark.e2e

# A few thousand pages over a few hundred hosts, with latency, robots.txt
# exclusions, Crawl-delay, 404s, 500s, redirects and binary resources.
WEB = {"seed": 7, "hosts": 200, "pages": 2000, "page_bytes": 2000, "latency_ms": [2, 8],
       "crawl_delay_fraction": 0.03, "crawl_delay": 0.2}
FACTOR = 2.0
RETRIES = 1
VICTIM_UA = "crawlproj-test victim"


def expected(sw):
    seeds = sw.web.seeds(3)
    return seeds, sw.web.reachable(seeds, obey_robots=True)


def allowance(records) -> dict[str, int]:
    """How often each URL may be fetched: once, or 1 + RETRIES times when the
    web answers it with a 500 (Scrapy's RetryMiddleware tries it again)."""
    return {checks.url_of(r): 1 + RETRIES if r["status"] == 500 else 1 for r in records}


def off_allowance(records) -> dict[str, int]:
    """URL -> its fetches minus its allowance, for every URL where they differ
    (negative: a retry was lost)."""
    allowed = allowance(records)
    return {u: n - allowed[u] for u, n in checks.fetch_counts(records).items() if n != allowed[u]}


def assert_fetched_once_and_politely(sw, reachable):
    records = sw.settle_log()  # the workers have exited: every request is in
    counts = checks.fetch_counts(records)
    assert set(counts) == reachable, (
        f"missing {sorted(reachable - set(counts))[:5]}, extra {sorted(set(counts) - reachable)[:5]}")
    off = off_allowance(records)
    assert not off, f"fetched more or fewer times than allowed: {list(off.items())[:5]}"
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


@pytest.mark.faults
def test_killed_worker_loses_nothing(redis_url, tmp_path):
    """kill -9: the dead worker's leases expire and their URLs go back to their
    queues; the survivor fetches everything, and fetches again only URLs the
    dead worker had leased: each at most once more (a URL the web answers
    with a 500, its tries once more: the dead worker's retry may already be
    queued, its lease of the URL not yet given back), no more of them than
    leases expired."""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, "kill9", {
            "FRONTIER_DELAY_FACTOR": FACTOR, "RETRY_TIMES": RETRIES, "FRONTIER_LEASE_TTL": 3})
        # the web's log tells the workers' requests apart by User-Agent
        (victim,) = workers.start(1, settings={"USER_AGENT": VICTIM_UA})
        (survivor,) = workers.start(1)
        sw.wait_log(len(reachable) // 4, timeout=120)
        Workers.signal(victim, signal.SIGKILL)
        victim.wait()
        dead_at = time.time()
        assert survivor.wait(300) == 0
        records = sw.settle_log()
        assert set(checks.fetch_counts(records)) == reachable
        expired = stat(workers.log(1), "frontier/expired_leases")
        assert expired > 0  # the victim held leases when it died
        refetched = off_allowance(records)
        allowed = allowance(records)
        assert all(1 <= extra <= allowed[u] for u, extra in refetched.items()), refetched
        assert len(refetched) <= expired, (expired, refetched)
        by_victim = {checks.url_of(r) for r in records if r["ua"] == VICTIM_UA and r["t0"] < dead_at}
        # Once the victim is dead every request is the survivor's, whatever its
        # User-Agent: a retry the victim had leased goes back to its queue with
        # the headers the victim gave it, and the survivor sends them as they are.
        by_survivor_later = {checks.url_of(r) for r in records if r["t0"] > dead_at}
        # And a retry the survivor made goes out with the survivor's User-Agent
        # whoever sends it: the victim may have sent one just before it died,
        # its lease then expired and the survivor sent it again. So a URL
        # answered with a 500 before the death may be the victim's too.
        failed_before = {checks.url_of(r) for r in records
                         if r["status"] == 500 and r["t0"] < dead_at}
        assert by_victim and by_survivor_later
        lost = (by_victim | failed_before) & by_survivor_later
        assert set(refetched) <= lost, sorted(set(refetched) - lost)[:5]
        assert checks.overlaps(records) == []


@pytest.mark.faults
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


def test_the_spider_runs_on_scrapys_own_scheduler(redis_url, tmp_path):
    """The project's spider and settings with Scrapy's scheduler and
    dupefilter (as the benchmarks' stock Scrapy runs them): the frontier's
    features that need its crawl in Redis (the trap guard's near-duplicate
    window) stand aside, and the crawl fetches every page and ends with 0."""
    web = dict(WEB, hosts=20, pages=200, crawl_delay_fraction=0.0)
    with SimWebServer(web, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, "stock", {
            "SCHEDULER": "scrapy.core.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter", "RETRY_TIMES": RETRIES})
        workers.start(1)
        assert workers.wait() == [0]
        fetched = set(checks.fetch_counts(sw.settle_log()))
        assert fetched == reachable, sorted(reachable ^ fetched)[:5]
        assert "finish_reason': 'finished'" in workers.log(0)
