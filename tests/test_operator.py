"""The crawl operator's view (crawlproj/monitor/history.py, hosts.py, eta.py)
against a real Redis-protocol server: the history the heartbeats keep, the
frontier's record of each host, the ETA's arithmetic, `scrapy frontier
--host`, and the Prometheus alerting rules, checked by Prometheus' promtool."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest
import redis as redis_lib
import yaml
from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawlproj.addon import apply_table
from crawlproj.errors import CrawlprojError
from crawlproj.frontier import codec
from crawlproj.frontier.frontier import Batch, Frontier, Host, Release
from crawlproj.monitor import eta, history, hosts
from crawlproj.monitor.heartbeat import Heartbeat
from crawlproj.monitor.status import crawl_status
from crawlproj.redis.keyspace import Keyspace
from tests.e2e import ROOT
from tests.test_bad_inputs import one_line, scrapy


def _settings(**values) -> Settings:
    s = Settings()
    apply_table(s)
    for k, v in values.items():
        s.set(k, v)
    return s


def _beat(r, crawl: str, rings, interval=5.0, worker="w1") -> Heartbeat:
    beat = Heartbeat(get_crawler(), r, Keyspace(crawl, 1), interval, 30.0, rings)
    beat.worker = worker
    return beat


# -- the history -------------------------------------------------------------------

def test_the_history_keeps_one_sample_per_slot_in_a_bounded_ring(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "hist", 1)
    a, b = _beat(r, "hist", [(20, 5)], worker="a"), _beat(r, "hist", [(20, 5)], worker="b")
    for _ in range(40):
        for beat in (a, b):
            beat.stats.inc_value("figures/attempts", 1)
            beat.stats.inc_value("figures/errors/5xx", 1)
            beat.answered(r.execute_command(*beat.command()))
        time.sleep(0.004)
    assert r.hlen(ks.history_ring(20)) <= 5  # a ring later, a slot's field is reused
    now = int(r.time()[0]) * 1000 + int(r.time()[1]) // 1000
    past = history.read(r, ks, now)
    samples = past["samples"]
    assert samples and past["step_s"] == 0.02
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
    # the newest sample holds the crawl's counters as they are, and each worker's own
    assert samples[-1]["fetched"] == 80 and samples[-1]["5xx"] == 80
    assert samples[-1]["workers"]["b"][0] == 40  # b wrote last; a just before, maybe a slot earlier
    assert [s["workers"]["a"][0] for s in samples if "a" in s["workers"]][-1] == 40
    assert len({s["s"] for s in samples}) == len(samples)
    # read again from the newest sample on: that one only, or none
    again = history.read(r, ks, now, since_ms=samples[-1]["t"] - 1)["samples"]
    assert [s["t"] for s in again] == [samples[-1]["t"]]


def test_the_time_run_leaves_out_stretches_with_no_worker(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "gap", 1)
    beat = _beat(r, "gap", [(1000, 10)], interval=0.01)  # a gap is 3 intervals: 30 ms
    beat.answered(r.execute_command(*beat.command()))
    time.sleep(0.2)
    beat.answered(r.execute_command(*beat.command()))
    assert history.times(r, ks)["run_ms"] == 0  # 200 ms with no heartbeat: not run time
    beat.answered(r.execute_command(*beat.command()))
    t = history.times(r, ks)
    assert 0 <= t["run_ms"] <= 30 and t["last_ms"] >= t["first_ms"] + 200


@pytest.mark.parametrize("rings", [[(1000, 10)], []], ids=["history", "no history"])
def test_the_average_rate_of_a_finished_crawl_stays_put(redis_url, rings):
    """Once every worker has closed, the crawl's average is taken over its
    run, not over the time since: it does not fall while nobody crawls."""
    r = redis_lib.Redis.from_url(redis_url)
    Keyspace.open(r, "done-h", 1)
    beat = _beat(r, "done-h", rings, interval=1.0)
    beat.stats.set_value("figures/attempts", 50)
    beat.answered(r.execute_command(*beat.command()))
    time.sleep(0.1)
    beat.state = "closed"
    beat.answered(r.execute_command(*beat.command()))
    first = crawl_status(r, Keyspace.found(r, "done-h"))["rates"]
    time.sleep(0.3)
    later = crawl_status(r, Keyspace.found(r, "done-h"))["rates"]
    assert first["pages_s_avg"] > 0 and later == first


@pytest.mark.parametrize("value", ["often", "[[10]]", "[[0, 5]]", "[[1.5, 5]]", [["a", 1]], "{}"])
def test_a_bad_history_setting_is_refused_in_one_line(value):
    with pytest.raises(CrawlprojError, match=r"^MONITOR_HISTORY must be a list of \[seconds per"):
        history.rings(_settings(MONITOR_HISTORY=value))
    assert history.rings(_settings(MONITOR_HISTORY="[[60, 10], [10, 6]]")) == [(10000, 6), (60000, 10)]
    assert history.rings(_settings(MONITOR_HISTORY=[])) == []


def test_a_bad_history_setting_stops_a_worker_with_one_line(redis_url, tmp_path):
    run = scrapy("crawl", "web", "-a", "seeds=http://a.example/", "-s", "MONITOR_HISTORY=[[10]]",
                 env_extra={"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2
    assert one_line(run).startswith("crawlproj: MONITOR_HISTORY must be a list of [seconds")


# -- the frontier's record of a host ------------------------------------------------

def _leased(r, crawl: str, host: str, n: int = 3) -> Frontier:
    f = Frontier(r, Keyspace.open(r, crawl, 1), lease_ttl=30, backoff_base=2.0)
    urls = [f"http://{host}/p{i}" for i in range(n)]
    f.sync({0: Batch(enqueue=[f.entry(host, u, float(i), codec.encode(Request(u), None, host))
                              for i, u in enumerate(urls)])})
    return f


def test_a_hosts_record_says_how_its_downloads_ended_and_its_backoffs(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _leased(r, "rec", "busy.ex")
    (lease,) = f.sync({0: Batch(lease=1)})[0].leased
    f.sync({0: Batch(release=[Release("busy.ex", lease.token, Host.BUSY, "return", 300, -1)])})
    raw = r.hget(f.keyspace.host_records(0), "busy.ex")
    rec = hosts._record(raw)
    assert (rec["ok"], rec["busy"], rec["fail"], rec["backoffs"]) == (0, 1, 0, 1)
    assert rec["delay_ms"] == 300 and rec["block_ms"] == 2000  # the backoff, not the delay
    assert rec["last_backoff"]["fate"] == "busy" and rec["last_backoff"]["ms"] == 2000
    story = hosts.host(r, f.keyspace, "BUSY.ex", _settings())
    assert story["state"] == "waiting" and story["fails"] == 1 and story["queue"] == 3
    assert story["why"].startswith("backed off after 1 429/503 answers in a row (backoff 2 s)")
    assert story["next_urls"] == ["http://busy.ex/p0", "http://busy.ex/p1", "http://busy.ex/p2"]


def test_a_host_waiting_out_its_crawl_delay_says_so(redis_url):
    from crawlproj.robots import Rules

    r = redis_lib.Redis.from_url(redis_url)
    f = _leased(r, "cd", "slow.ex")
    _, stored = Rules.parsed(b"User-agent: *\nCrawl-delay: 7\nDisallow: /x/\n", "crawlproj")
    r.set(f.keyspace.robots(0, "http://slow.ex"), stored, px=60_000)
    (lease,) = f.sync({0: Batch(lease=1)})[0].leased
    f.sync({0: Batch(release=[Release("slow.ex", lease.token, Host.OK, "done", 7000)])})
    story = hosts.host(r, f.keyspace, "http://slow.ex/any/page", _settings())
    assert story["robots"]["crawl_delay"] == 7.0
    assert story["why"].startswith("Crawl-delay 7 s (its robots.txt): next contact in")
    assert "Disallow: /x/" in story["robots"]["origins"][0]["rules"]
    listed = hosts.hosts(r, f.keyspace, _settings(), sort="wait")
    assert [row["host"] for row in listed["rows"]] == ["slow.ex"]
    assert listed["rows"][0]["why"] == story["why"] or listed["rows"][0]["why"].startswith("Crawl-delay 7 s")


def test_a_host_an_operator_blocked_or_slowed_down_says_so(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _leased(r, "steer", "held.ex")
    f.set_delay("held.ex", 9000)
    (lease,) = f.sync({0: Batch(lease=1)})[0].leased
    f.sync({0: Batch(release=[Release("held.ex", lease.token, Host.OK, "done", 100)])})
    story = hosts.host(r, f.keyspace, "held.ex", _settings())
    assert story["why"].startswith("the operator's least delay, 9 s after its last download "
                                   "(`scrapy crawlctl delay held.ex 0` lifts it): next contact in")
    f.block("held.ex", 7_200_000)
    story = hosts.host(r, f.keyspace, "held.ex", _settings())
    assert story["why"] == ("blocked by the operator for 2.0 h "
                            "(`scrapy crawlctl unblock held.ex` lifts it)")


def test_hosts_sort_and_search(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "many", 1), lease_ttl=30)
    f.sync({0: Batch(enqueue=[f.entry(f"h{i}.ex", f"http://h{i}.ex/p{j}", float(j), b"x")
                              for i in range(5) for j in range(i + 1)])})
    got = hosts.hosts(r, f.keyspace, _settings(), sort="queue")
    assert [row["host"] for row in got["rows"]] == ["h4.ex", "h3.ex", "h2.ex", "h1.ex", "h0.ex"]
    assert [row["queue"] for row in got["rows"]] == [5, 4, 3, 2, 1]
    got = hosts.hosts(r, f.keyspace, _settings(), sort="host", search="H3", n=10)
    assert (got["matched"], got["total"], [x["host"] for x in got["rows"]]) == (1, 5, ["h3.ex"])
    with pytest.raises(ValueError, match="sort by one of queue, wait"):
        hosts.hosts(r, f.keyspace, _settings(), sort="<b>")


@pytest.mark.parametrize("name,said", [
    ("<b>x</b>", "not a host name: '<b>x</b>'"),
    ("Bücher.EX:80", "no host 'xn--bcher-kva.ex' in crawl 'known'"),  # keyed as the frontier keys
    ("nowhere.ex", "no host 'nowhere.ex' in crawl 'known'"),
    ("", "give a host name"),
    ("a b", "not a host name: 'a b'"),
])
def test_unknown_or_malformed_hosts_are_one_clear_error(redis_url, name, said):
    r = redis_lib.Redis.from_url(redis_url)
    f = _leased(r, "known", "there.ex")
    with pytest.raises(CrawlprojError) as caught:
        hosts.host(r, f.keyspace, name, _settings())
    assert str(caught.value).startswith(said)


def test_frontier_host_command_tells_a_hosts_story(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    f = _leased(r, "cli", "busy.ex")
    (lease,) = f.sync({0: Batch(lease=1)})[0].leased
    f.sync({0: Batch(release=[Release("busy.ex", lease.token, Host.BUSY, "return", 100, 4000)])})
    env = {"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)}
    run = scrapy("frontier", "--crawl-id", "cli", "--host", "busy.ex", env_extra=env)
    assert run.returncode == 0, run.stderr
    assert "host busy.ex of crawl cli (partition 0): waiting" in run.stdout
    assert "backed off after 1 429/503 answers in a row (Retry-After 4 s)" in run.stdout
    assert "back-offs        1; 1 failure(s) in a row now" in run.stdout
    for args, said in ((["--host", "<i>x</i>"], "crawlproj: not a host name: '<i>x</i>'"),
                       (["--host", "busy.ex", "--all"], "crawlproj: --host names a host of one crawl")):
        run = scrapy("frontier", "--crawl-id", "cli", *args, env_extra=env)
        assert run.returncode == 2 and one_line(run).startswith(said), run.stderr


# -- the ETA -------------------------------------------------------------------------

def _samples(lefts, fetched_per_s=10.0, step_ms=1000):
    return [{"t": i * step_ms, "fetched": int(i * fetched_per_s * step_ms / 1000),
             "queued": left, "leased": 0, "pending": 0} for i, left in enumerate(lefts)]


def test_the_eta_follows_the_work_left_as_it_drains():
    rates = eta.drain(_samples([100, 90, 80, 70, 60]), run_s=4.0)
    assert rates["drain_s"] == pytest.approx(10.0)
    e = eta.estimate(60, rates, None, 10.0)
    assert e == {"eta_s": 6, "lower_bound": False, "basis": e["basis"]}
    assert "falling by 10.0/s" in e["basis"]


def test_an_eta_while_the_work_still_grows_is_a_lower_bound():
    rates = eta.drain(_samples([10, 30, 50, 70]), run_s=3.0)
    e = eta.estimate(70, rates, None, 10.0)
    assert e["lower_bound"] and e["eta_s"] == 7 and "still growing" in e["basis"]


def test_the_busiest_host_holds_the_end_of_the_crawl():
    rows = [{"host": "big.ex", "queue": 100, "state": "ready", "interval_s": 0.5, "record": None},
            {"host": "small.ex", "queue": 10, "state": "ready", "interval_s": 0.5, "record": None}]
    bound = eta.host_bound(rows, now_ms=0)
    assert bound["host"] == "big.ex" and bound["seconds"] == 50.0
    e = eta.estimate(250, eta.drain(_samples([290, 280, 270, 260, 250], 10.0), 4.0), bound, 10.0)
    assert e["eta_s"] == 50 and "host big.ex holds the end" in e["basis"]  # 25 s to drain, 50 for big.ex
    # most of the work left is big.ex's: its pace, though the drain says 11 s
    e = eta.estimate(110, eta.drain(_samples([150, 140, 130, 120, 110], 10.0), 4.0), bound, 10.0)
    assert e["eta_s"] == 50 and "100 of the 110 URLs left" in e["basis"]


# -- alerts --------------------------------------------------------------------------

RULES = ROOT / "docs" / "prometheus-alerts.yml"
PROMTOOL = shutil.which("promtool")


def _need_promtool():
    if PROMTOOL is None:
        if os.environ.get("PROMTOOL_TESTS") == "required":
            pytest.fail("no promtool on PATH (Debian: apt-get install prometheus)")
        pytest.skip("no promtool on PATH (Debian: apt-get install prometheus)")


def served(r, crawl: str) -> str:
    """/metrics of a running crawl with URLs queued, a page fetched and an
    error, whose worker fetches now (so that every series has a value)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from crawlproj.ui.metrics import CrawlCollector

    _leased(r, crawl, "a.ex")
    beat = _beat(r, crawl, [(1000, 10)])
    beat._meter.tick(beat.stats)
    for name in ("figures/attempts", "figures/status/200", "figures/outcome/200 OK",
                 "figures/type/text/html", "figures/errors/5xx"):
        beat.stats.set_value(name, 3 if name != "figures/errors/5xx" else 1)
    time.sleep(0.05)
    beat._meter.tick(beat.stats)  # the worker's pages/s over its last interval
    beat.answered(r.execute_command(*beat.command()))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CrawlCollector(lambda: r))
    return generate_latest(registry).decode()


def test_the_alerting_rules_use_only_metrics_the_app_serves(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    served_text = served(r, "alerts")
    assert 'crawlproj_errors_total{crawl_id="alerts",kind="5xx"} 1.0' in served_text
    assert re.search(r'^crawlproj_eta_seconds\{crawl_id="alerts"\} \d', served_text, re.M)
    assert re.search(r"^crawlproj_redis_used_memory_bytes \d", served_text, re.M)
    names = set(re.findall(r"^(crawlproj_[a-z_]+)", served_text, re.M))
    used = set(re.findall(r"crawlproj_[a-z_]+", RULES.read_text()))
    assert used and used <= names, sorted(used - names)


def test_promtool_checks_the_rules_and_each_alert_fires_when_it_should(tmp_path):
    _need_promtool()
    check = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # the firing is tested; the annotations (text for people) are left out
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "test.yml").write_text(ALERT_CASES)
    run = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


# Series a scrape every minute would give, and the alerts they must (and
# must not) raise: a stalled crawl beside a healthy one, errors rising from
# 1 % to 30 %, Redis at 95 % of its maxmemory, a worker gone.
ALERT_CASES = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'crawlproj_crawl_state{crawl_id="stuck",state="running"}'
        values: '1x40'
      - series: 'crawlproj_pages_fetched_total{crawl_id="stuck"}'
        values: '0+100x10 1000x30'
      - series: 'crawlproj_crawl_state{crawl_id="fine",state="running"}'
        values: '1x40'
      - series: 'crawlproj_pages_fetched_total{crawl_id="fine"}'
        values: '0+100x40'
      - series: 'crawlproj_redis_used_memory_bytes'
        values: '950x40'
      - series: 'crawlproj_redis_maxmemory_bytes'
        values: '1000x40'
      - series: 'crawlproj_workers{crawl_id="fine",state="gone"}'
        values: '0x10 1x30'
    alert_rule_test:
      - eval_time: 30m
        alertname: CrawlStalled
        exp_alerts:
          - exp_labels: {crawl_id: stuck, state: running, severity: page}
      - eval_time: 30m
        alertname: CrawlRedisMemoryNearLimit
        exp_alerts:
          - exp_labels: {severity: page}
      - eval_time: 30m
        alertname: CrawlWorkersGone
        exp_alerts:
          - exp_labels: {crawl_id: fine, state: gone, severity: warn}
      - eval_time: 30m
        alertname: CrawlErrorRateRising
        exp_alerts: []
  - interval: 1m
    input_series:
      - series: 'crawlproj_pages_fetched_total{crawl_id="c"}'
        values: '0+100x120'
      - series: 'crawlproj_errors_total{crawl_id="c",kind="5xx"}'
        values: '0+1x80 80+30x40'
    alert_rule_test:
      - eval_time: 75m
        alertname: CrawlErrorRateRising
        exp_alerts: []
      - eval_time: 115m
        alertname: CrawlErrorRateRising
        exp_alerts:
          - exp_labels: {crawl_id: c, severity: warn}
"""


def test_the_history_is_read_over_a_span_and_the_status_of_every_state(redis_url):
    """The ETA reads the last minutes' samples; a span and a since read others."""
    from crawlproj.monitor import control

    r = redis_lib.Redis.from_url(redis_url)
    f = _leased(r, "spans", "a.ex")
    beat = _beat(r, "spans", [(1000, 60)])
    beat.answered(r.execute_command(*beat.command()))
    for command in (None, "pause", "resume", "stop"):
        if command:
            control.control(r, f.keyspace, command)
        for span, since in ((None, 0), (30.5, 0), (3600, 1), (None, 10**12)):
            s = crawl_status(r, Keyspace.found(r, "spans"), history_span=span, history_since=since)
            assert s["state"] in ("running", "paused", "stopping")
            assert isinstance(s["history"]["samples"], list)


# -- the demo ------------------------------------------------------------------------

@pytest.mark.e2e
def test_the_demo_says_no_error_for_the_simulated_webs_planned_500s(embedded_data_dir):
    run = scrapy("demo", "--hosts", "40", "--pages", "600",
                 env_extra={"CRAWL_DATA_DIR": str(embedded_data_dir)}, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    given_up = int(re.search(r"; (\d+) given up: the simulated web's planned 500s", run.stdout)[1])
    assert given_up > 0  # pages that answer 500 to every try were crawled, and given up
    assert "ERROR" not in run.stdout + run.stderr and "Gave up" not in run.stdout + run.stderr
    assert run.stdout.rstrip().endswith("demo OK")
