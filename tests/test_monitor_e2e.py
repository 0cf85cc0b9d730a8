"""End to end: watching and steering a running crawl (crawlproj/monitor/).

Real workers, a real Redis-protocol server, the simulated web. What the crawl
status says is checked against the simulated web's own request log; control
is checked by that log's timestamps against the times the control commands
were stamped with in Redis (both on this machine's clock).
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
import redis as redis_lib

from crawlproj.monitor import control
from crawlproj.monitor.status import crawl_status
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers, stat
from tests.test_crawl_e2e import FACTOR, RETRIES, WEB, assert_fetched_once_and_politely, expected, off_allowance

pytestmark = pytest.mark.e2e

ROBOTS = "/robots.txt"
# a heartbeat a second, so that a test sees the status move within seconds
MONITORED = {"FRONTIER_DELAY_FACTOR": FACTOR, "RETRY_TIMES": RETRIES, "MONITOR_INTERVAL": 1}


@pytest.fixture
def started():
    """Workers to kill when a test fails: a paused worker waits for its resume
    (or for a Redis that is gone) as long as it lives."""
    made = []
    yield made.append
    for workers in made:
        workers.kill_all()


def status_of(redis_url: str, crawl_id: str) -> dict:
    r = redis_lib.Redis.from_url(redis_url)
    return crawl_status(r, Keyspace.found(r, crawl_id))


def wait_status(redis_url, crawl_id, predicate, timeout=60.0) -> dict:
    """Poll the crawl's status until predicate(status) holds (a bound on the
    wait, not a claim about time: the assertion is the predicate's)."""
    deadline = time.monotonic() + timeout
    while True:
        s = status_of(redis_url, crawl_id)
        if predicate(s) or time.monotonic() > deadline:
            return s
        time.sleep(0.2)


def test_status_figures_agree_with_the_web_log(redis_url, tmp_path, started):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, "mon-figures", MONITORED)
        started(workers)
        workers.start(2)
        assert workers.wait() == [0, 0]
        records = sw.settle_log()
        s = status_of(redis_url, "mon-figures")
    pages = [r for r in records if r["path"] != ROBOTS]
    robots = [r for r in records if r["path"] == ROBOTS]
    f = s["figures"]
    # every attempt that reached the web, by status; the others (robots.txt
    # exclusions) never left the worker
    http = {k: v for k, v in f["statuses"].items() if int(k) > 0}
    assert http == {str(k): v for k, v in Counter(r["status"] for r in pages).items()}
    excluded = f["outcomes"]["Excluded by robots.txt"]
    assert s["fetched"] == f["attempts"] == len(pages) + excluded
    assert excluded == f["robots_excluded"] > 0
    assert f["robots_fetches"] == len(robots)
    ok = [r for r in pages if r["status"] == 200]
    assert f["documents"] == len(ok)
    assert f["document_bytes"] == sum(r["bytes"] for r in ok)
    assert sum(n for _, n in f["sizes"]) == len(ok)
    assert f["outcomes"]["200 OK"] == len(ok)
    # each worker's share, summed, is the crawl's; both said goodbye
    assert sorted(w["state"] for w in s["workers"]) == ["closed", "closed"]
    assert sum(w["pages"] for w in s["workers"]) == f["attempts"]
    assert all(w["finish_reason"] == "finished" for w in s["workers"])
    assert s["queued"] == 0 and s["frontier"]["live_leases"] == 0
    assert s["discovered"] == s["fetched"]
    # the indexer (on by default) ran in some worker; the ranker (off with bfs) never
    assert s["indexer"]["written"] > 0 and s["indexer"]["last_batch"]
    assert s["ranker"]["runs"] == 0 and s["ranker"]["last_run"] is None
    # pages per host (Mercator Figure 9a): every host with a page counts at y = 1
    assert s["figures"]["pages_per_host"][0] == [1, len({r["host"] for r in pages})]


def test_pause_stops_fetching_within_two_seconds_and_resume_goes_on(redis_url, tmp_path, started):
    crawl = "mon-pause"
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        # heartbeats every 2 s: the idle round trips counted below are the
        # frontier's polls, which the heartbeats ride
        workers = Workers(sw, redis_url, tmp_path, seeds, crawl,
                          {**MONITORED, "MONITOR_INTERVAL": 2})
        started(workers)
        workers.start(2)
        sw.wait_log(len(reachable) // 5, timeout=120)
        r = redis_lib.Redis.from_url(redis_url)
        keyspace = Keyspace.found(r, crawl)
        paused_at = control.control(r, keyspace, "pause") / 1000.0
        # both workers say they are paused, and then beat three more times
        s = wait_status(redis_url, crawl, lambda s: len(s["workers"]) == 2 and all(
            w["state"] == "paused" for w in s["workers"]))
        assert [w["state"] for w in s["workers"]] == ["paused", "paused"], s["workers"]
        beat = max(w["last_heartbeat_ms"] for w in s["workers"])
        s = wait_status(redis_url, crawl, lambda s: min(
            w["last_heartbeat_ms"] for w in s["workers"]) > beat + 4000)
        during = [x for x in sw.read_log() if x["t0"] > paused_at]
        late = [x for x in during if x["t0"] > paused_at + 2.0]
        assert late == [], f"{len(late)} requests started more than 2 s after the pause"
        assert s["state"] == "paused"
        # the downloads under way finish, and then no host is held (waited
        # for: a worker starved of CPU on a busy machine takes its time)
        s = wait_status(redis_url, crawl, lambda s: s["frontier"]["hosts_leased"] == 0)
        assert s["frontier"]["hosts_leased"] == 0, (
            s["frontier"], [(w["state"], w["leases"], w["fetching"]) for w in s["workers"]])
        assert [x for x in sw.read_log() if x["t0"] > paused_at + 2.0] == []
        # idle costs at most one round trip a second, by the server's clock,
        # counted from each worker's next heartbeat once no host is held (the
        # lease releases of the last downloads are not idle cost) over ten
        # seconds or more; one write is the window's edge (a heartbeat's
        # stamp is late when the worker waited for CPU), not a rate
        beat = max(w["last_heartbeat_ms"] for w in s["workers"])
        idle = wait_status(redis_url, crawl, lambda s: min(
            w["last_heartbeat_ms"] for w in s["workers"]) > beat)
        beat = max(w["last_heartbeat_ms"] for w in idle["workers"])
        later = wait_status(redis_url, crawl, lambda s: min(
            w["last_heartbeat_ms"] for w in s["workers"]) > beat + 10000)
        rates = []
        for w in later["workers"]:
            w0 = next(x for x in idle["workers"] if x["id"] == w["id"])
            seconds = (w["last_heartbeat_ms"] - w0["last_heartbeat_ms"]) / 1000.0
            rates.append((_writes_at(w) - _writes_at(w0) - 1) / seconds)
        assert all(rate <= 1.0 for rate in rates), rates
        control.control(r, keyspace, "resume")
        assert workers.wait() == [0, 0]
        assert_fetched_once_and_politely(sw, reachable)
        after = [x for x in sw.read_log() if x["t0"] > paused_at + 2.0]
        assert after, "nothing was fetched after the resume"


def _writes_at(worker: dict) -> int:
    return worker["counters"]["frontier/redis_writes"]


def test_stop_then_restart_fetches_every_page_once(redis_url, tmp_path, started):
    crawl = "mon-stop"
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, crawl, MONITORED)
        started(workers)
        first = workers.start(2)
        sw.wait_log(len(reachable) // 4, timeout=120)
        r = redis_lib.Redis.from_url(redis_url)
        keyspace = Keyspace.found(r, crawl)
        control.control(r, keyspace, "stop")
        assert [p.wait(60) for p in first] == [0, 0]
        for i in range(2):
            assert "finish_reason': 'stopped'" in workers.log(i)
        # the leases they held and had not started went back
        assert sum(stat(workers.log(i), "frontier/returned") for i in range(2)) > 0
        s = status_of(redis_url, crawl)
        assert s["state"] == "stopped", s["state"]
        assert s["frontier"]["live_leases"] == 0 and s["queued"] > 0
        fetched_before = len(sw.settle_log())
        assert fetched_before < len(reachable)
        workers.start(2, seeds=False)  # the same command goes on where it stopped
        assert workers.wait() == [0] * 4
        records = sw.settle_log()
        assert set(checks.fetch_counts(records)) == reachable
        assert off_allowance(records) == {}  # each once (a 500 once more: its retry)
        assert status_of(redis_url, crawl)["state"] == "idle"


@pytest.mark.faults
def test_killed_worker_is_shown_gone_then_forgotten_and_its_leases_return(redis_url, tmp_path, started):
    crawl = "mon-kill"
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, redis_url, tmp_path, seeds, crawl,
                          {**MONITORED, "FRONTIER_LEASE_TTL": 4})
        started(workers)
        victim, survivor = workers.start(2)
        sw.wait_log(len(reachable) // 4, timeout=120)
        s = wait_status(redis_url, crawl, lambda s: len(s["workers"]) == 2)
        victim_id = next(w["id"] for w in s["workers"] if w["pid"] == str(victim.pid))
        Workers.signal(victim, signal.SIGKILL)
        victim.wait()
        s = wait_status(redis_url, crawl, lambda s: any(
            w["id"] == victim_id and w["state"] == "gone" for w in s["workers"]))
        gone = next(w for w in s["workers"] if w["id"] == victim_id)
        assert "back to their queues" in gone["leases_fate"], gone
        s = wait_status(redis_url, crawl, lambda s: victim_id not in {
            w["id"] for w in s["workers"]})
        assert victim_id not in {w["id"] for w in s["workers"]}, "the dead worker is still listed"
        assert survivor.wait(300) == 0
        records = sw.settle_log()
        assert set(checks.fetch_counts(records)) == reachable
        assert status_of(redis_url, crawl)["frontier"]["expired_leases"] > 0
