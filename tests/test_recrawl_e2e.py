"""End to end: continuous crawling of the changing simulated web.

Real `scrapy crawl web` workers with RECRAWL_ENABLED, a real Redis-protocol
server, the simulated web whose pages change as Poisson processes (ETag,
Last-Modified, 304). What was fetched, how often and how politely is read
from the web's own request log.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from types import SimpleNamespace

import pytest
import redis

from crawlproj.frontier import codec
from crawlproj.frontier.frontier import Frontier
from crawlproj.recrawl.buckets import DAY, rate_of
from crawlproj.recrawl.record import STORED, pack_payload
from crawlproj.recrawl.schedule import Recrawl, scheduled_bucket, scheduled_states
from crawlproj.recrawl.state import LM_UNUSABLE, SCHEDULED, RecrawlState
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import ROOT, Workers, stat, wait_for

pytestmark = pytest.mark.e2e

DAY_SECONDS = 2.0
WEB = {"seed": 11, "hosts": 30, "pages": 300, "page_bytes": 2000, "latency_ms": [2, 6],
       "crawl_delay_fraction": 0.1, "crawl_delay": 0.2,
       "change_dist": "loguniform:0.5:50", "day_seconds": DAY_SECONDS}
# Politeness by a fixed wait (and robots.txt's Crawl-delay on some hosts): a
# rule the web's log can check exactly, whatever the load. A wait from the
# download time is checked against the server's times, which a loaded
# machine stretches (the server stamps a request's end late), so its check
# would fail on the measurement, not on the crawler.
MIN_DELAY = 0.05


def settings(**more):
    return {"FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": MIN_DELAY, "RETRY_TIMES": 0, "RECRAWL_ENABLED": True,
            "RECRAWL_TIME_SCALE": 86400 / DAY_SECONDS, "RECRAWL_BUDGET": 40,
            "RECRAWL_PLAN_INTERVAL": 1, "RECRAWL_POLICY": "optimal", **more}


def pages_of(records):
    return [r for r in records if r["path"] != "/robots.txt"]


def test_a_continuous_two_worker_crawl_refetches_pages_politely(redis_url, tmp_path):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(3)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, "rc2", settings())
        a, b = workers.start(2)
        # the crawl does not finish on its own: it is still running once every
        # page was fetched, and fetches pages again
        sw.wait_log(lambda recs: len({checks.url_of(r) for r in pages_of(recs)}) >= len(reachable)
                    and len(pages_of(recs)) >= 3 * len(reachable), timeout=240)
        assert a.poll() is None and b.poll() is None
        for p in (a, b):
            Workers.signal(p, signal.SIGTERM)
        assert [p.wait(60) for p in (a, b)] == [0, 0]
        records = sw.settle_log()
        counts = checks.fetch_counts(records)
        assert set(counts) == reachable
        assert sum(1 for n in counts.values() if n >= 2) >= len(reachable) // 2
        # conditional GET: some recrawls answered 304
        assert any(r["status"] == 304 for r in records)
        assert checks.overlaps(records) == []
        bad = checks.politeness_violations(records, factor=0, min_delay=MIN_DELAY,
                                           crawl_delay_of=sw.web.crawl_delay, tolerance=0.005)
        assert bad == [], bad[:3]
        logs = [workers.log(i) for i in range(2)]
        assert all(stat(log, "frontier/released") > 0 for log in logs)
        assert sum(stat(log, "recrawl/not_modified") for log in logs) > 0


def scheduled_urls(r, crawl_id: str) -> int:
    """URLs in the crawl's recrawl queues, counted in Redis itself."""
    ks = Keyspace.open(r, crawl_id)
    return sum(r.zcard(k) for p in range(ks.partitions)
               for k in r.scan_iter(match=ks.recrawl_queues_pattern(p), count=1000))


def held(r, crawl_id: str) -> int:
    """Leases the crawl's workers hold now (hosts leased, and URLs leased
    apart from their host), counted in Redis."""
    ks = Keyspace.open(r, crawl_id)
    return sum(r.zcard(ks.leases(p)) + r.zcard(ks.pending(p)) for p in range(ks.partitions))


@pytest.mark.faults
def test_kill_9_and_restart_lose_no_scheduled_recrawl(redis_url, tmp_path):
    """A worker killed with kill -9 holds leases of recrawls; they expire and
    go back to their recrawl queues. After a restart every page that was in
    the schedule is fetched again, and the schedule holds each page once."""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(3)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, "rckill", settings(
            FRONTIER_LEASE_TTL=3, RECRAWL_POLICY="uniform"))
        (victim,) = workers.start(1)
        sw.wait_log(lambda recs: len({checks.url_of(r) for r in pages_of(recs)}) >= len(reachable)
                    and len(pages_of(recs)) >= 2 * len(reachable), timeout=240)
        # a budget-bound continuous crawl holds a lease only while it fetches:
        # kill the victim while it holds one, stopped first so that it
        # releases nothing between the look and the kill
        r = redis.Redis.from_url(redis_url)
        def stopped_holding_a_lease():
            Workers.signal(victim, signal.SIGSTOP)
            time.sleep(0.05)  # a write it sent before the stop is served
            if held(r, "rckill"):
                return True
            Workers.signal(victim, signal.SIGCONT)
            return False

        assert wait_for(stopped_holding_a_lease, timeout=60, every=0.02), \
            "the victim never held a lease"
        Workers.signal(victim, signal.SIGKILL)
        victim.wait()
        records = sw.settle_log()
        last = {}
        for rec in sorted(pages_of(records), key=lambda x: x["t0"]):
            last[checks.url_of(rec)] = rec["status"]
        kept = {u for u, status in last.items() if status in (200, 304)}
        restarted = time.time()
        (survivor,) = workers.start(1, seeds=False)
        # uniform: every page is due within pages / budget = 7.5 s
        sw.wait_log(lambda recs: kept <= {checks.url_of(x) for x in recs if x["t0"] > restarted},
                    timeout=120)
        Workers.signal(survivor, signal.SIGTERM)
        assert survivor.wait(60) == 0
        log = workers.log(1)
        assert stat(log, "frontier/expired_leases") > 0  # the victim's leases went back
        assert scheduled_urls(r, "rckill") == len(kept)
        assert checks.overlaps(sw.settle_log()) == []


def recrawl_plan(redis_url: str, *args):
    env = {**os.environ, "REDIS_URL": redis_url}
    return subprocess.run([sys.executable, "-m", "scrapy", "recrawl", "plan", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def scheduled_buckets(r, crawl_id: str) -> Counter:
    """Pages per change-rate bucket of the crawl's schedule, each page's
    bucket read from the recrawl state in its own payload."""
    ks = Keyspace.open(r, crawl_id)
    out = Counter()
    for p in range(ks.partitions):
        for key in r.scan_iter(match=ks.recrawl_queues_pattern(p), count=1000):
            host = key.decode().rsplit("d:", 1)[1]
            for fp in r.zrange(key, 0, -1):
                request = codec.decode(r.hget(ks.payloads(p, host), fp), host=host)
                out[scheduled_bucket(RecrawlState.unpack(request.meta[STORED][0]))] += 1
    return out


def test_recrawl_plan_shows_the_plan_in_force_of_a_live_crawl(redis_url, tmp_path):
    """`scrapy recrawl plan --crawl-id` reads the crawl's schedule from Redis:
    per bucket the pages whose own recrawl state puts them there, at the
    fetches per day their due times follow, on the policy and budget the
    workers run with."""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(3)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, "rcplan", settings())
        (w,) = workers.start(1)
        sw.wait_log(lambda recs: len(pages_of(recs)) >= 4 * len(reachable), timeout=240)
        Workers.signal(w, signal.SIGTERM)
        assert w.wait(60) == 0
    r = redis.Redis.from_url(redis_url)
    truth = scheduled_buckets(r, "rcplan")
    out = recrawl_plan(redis_url, "--crawl-id", "rcplan", "--json", "--png", tmp_path / "p.png")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["policy"] == "optimal" and doc["budget"] == 40
    assert doc["time_scale"] == 86400 / DAY_SECONDS
    shown = {b["bucket"]: b["pages"] for b in doc["buckets"]} | {0: doc["unestimated_pages"]}
    assert {k: n for k, n in shown.items() if n} == {k: n for k, n in truth.items() if n}
    assert len([k for k in truth if k > 0]) >= 5   # estimates spread over buckets
    # optimal: a faster bucket gets at least as many fetches per page, up to
    # where it gets nothing (Cho & Garcia-Molina's Lagrange condition)
    per_page = [b["fetches_per_day"] / b["pages"] for b in doc["buckets"]]
    rates = [b["rate"] for b in doc["buckets"]]
    assert rates == sorted(rates) and max(per_page) > 2 * min(per_page)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    # the observed changes per bucket are those the web served: per page,
    # the versions of its first fetches, as many as its state has seen
    versions: dict[str, list[int]] = {}
    for rec in sorted(pages_of(sw.settle_log()), key=lambda x: x["t0"]):
        if rec["status"] in (200, 304) and rec.get("v") is not None:
            versions.setdefault(checks.url_of(rec), []).append(rec["v"])
    served: Counter = Counter()
    visits: Counter = Counter()
    for url, st in scheduled_states(Frontier(r, Keyspace.found(r, "rcplan"))):
        if url not in versions:     # not an HTML page (an image): it never changes
            assert st.changes == 0
            visits[scheduled_bucket(st)] += st.fetches
            continue
        v = versions[url][:st.fetches + 1]
        assert len(v) == st.fetches + 1
        served[scheduled_bucket(st)] += sum(a != b for a, b in zip(v, v[1:]))
        visits[scheduled_bucket(st)] += st.fetches
    observed = {o["bucket"]: o for o in doc["observed"]}
    assert {k: o["changed_visits"] for k, o in observed.items() if o["changed_visits"]} \
        == {k: n for k, n in served.items() if n}
    assert {k: o["visits"] for k, o in observed.items()} == dict(visits)
    assert sum(served.values()) > 50 and sum(visits.values()) > sum(served.values())
    text = recrawl_plan(redis_url, "--crawl-id", "rcplan")
    assert text.returncode == 0 and text.stdout.startswith("crawl rcplan: policy optimal")


def test_recrawl_plan_of_no_live_crawl_is_one_line_and_exit_status_2(redis_url, tmp_path):
    out = recrawl_plan(redis_url, "--crawl-id", "nosuchcrawl")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "nosuchcrawl" in out.stderr
    r = redis.Redis.from_url(redis_url)
    Keyspace.open(r, "notcontinuous")   # a crawl that never ran with RECRAWL_ENABLED
    out = recrawl_plan(redis_url, "--crawl-id", "notcontinuous")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("crawlproj: crawl 'notcontinuous' has no recrawl plan: "
                                  "no worker of it ran with RECRAWL_ENABLED")
    with socket.socket() as s:      # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        down = f"redis://127.0.0.1:{s.getsockname()[1]}/0"
    out = recrawl_plan(down, "--crawl-id", "rcplan")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("crawlproj: ")


def test_recrawl_plan_shows_each_buckets_estimate_against_the_observed_changes(redis_url):
    """Per scheduled bucket: the visits that saw a change against those the
    bucket's rate expects at each page's mean interval, and the changes
    dated by Last-Modified per day they were watched, from every page's own
    state in Redis."""
    r = redis.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "rcobs")
    k1, k2 = 120, 40
    pages = {  # path -> state
        "/a": RecrawlState(flags=SCHEDULED, bucket=k1, fetches=4, changes=2, lm_changes=3,
                           last_fetch=1e9, t_changed=2 * DAY, t_unchanged=2 * DAY,
                           lm_exposure=1.5 * DAY),
        "/b": RecrawlState(flags=SCHEDULED, bucket=k1, fetches=6, changes=6, lm_changes=0,
                           last_fetch=1e9, t_changed=3 * DAY, lm_exposure=0.5 * DAY),
        "/c": RecrawlState(flags=SCHEDULED | LM_UNUSABLE, bucket=k2, fetches=3, changes=0,
                           lm_changes=2, last_fetch=1e9, t_unchanged=30 * DAY,
                           lm_exposure=9 * DAY),
        "/d": RecrawlState(last_fetch=1e9),               # fetched once: no estimate yet
    }
    host = "www.example.org"
    p = ks.partition_of(host)
    for i, (path, st) in enumerate(pages.items()):
        fp = f"fp{i}".encode()
        r.zadd(ks.recrawl_queue(p, host), {fp: 1e12})
        r.hset(ks.payloads(p, host), fp, pack_payload(path, False, 1, [st.pack(), "", 0,
                                                                        b"d" * 8]))
        r.hincrby(ks.rate_buckets(p), scheduled_bucket(st), 1)
    r.hset(ks.recrawl_terms, mapping=Recrawl(SimpleNamespace(new_share=0.2, redis=r,
                                                              keyspace=ks),
                                             "optimal", 2.0).terms())
    out = recrawl_plan(redis_url, "--crawl-id", "rcobs", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["bucket"]: row for row in json.loads(out.stdout)["observed"]}
    assert set(rows) == {0, k2, k1}
    a = rows[k1]
    assert (a["pages"], a["visits"], a["changed_visits"]) == (2, 10, 8)
    # /a: 4 visits a day apart; /b: 6 half a day apart
    lam = rate_of(k1) * DAY
    assert a["expected_changed_visits"] == pytest.approx(
        4 * -math.expm1(-lam) + 6 * -math.expm1(-lam / 2))
    assert a["estimated_changes_per_day"] == pytest.approx(lam)
    assert (a["dated_changes"], a["dated_days"]) == (3, pytest.approx(2.0))
    assert a["dated_changes_per_day"] == pytest.approx(1.5)
    c = rows[k2]       # Last-Modified found unusable: no dated changes count
    assert (c["pages"], c["visits"], c["changed_visits"], c["dated_changes"]) == (1, 3, 0, 0)
    assert c["expected_changed_visits"] == pytest.approx(3 * -math.expm1(-rate_of(k2) * 10 * DAY))
    assert c["dated_changes_per_day"] is None
    assert rows[0]["pages"] == 1 and rows[0]["expected_changed_visits"] is None
    text = recrawl_plan(redis_url, "--crawl-id", "rcobs")
    assert text.returncode == 0, text.stderr
    table = text.stdout.split("the estimate against the pages' observed changes")[1].splitlines()
    assert [line.split()[:5] for line in table[2:]] == [
        ["0", "1", "-", "0", "0"], [str(k2), "1", f"{rate_of(k2) * DAY:.4g}", "3", "0"],
        [str(k1), "2", f"{lam:.4g}", "10", "8"]]
