"""crawlproj/monitor/ against a real Redis-protocol server: the heartbeat's
sums, crawl control as the workers see it (the frontier script's side is
test_sync_control.py's), and the commands' answers to mistakes (one line,
exit status 2)."""

from __future__ import annotations

import socket
from datetime import datetime, timezone

import pytest
import redis as redis_lib
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawlproj.addon import apply_table
from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.frontier.leases import LeaseBook
from crawlproj.frontier.sync import FrontierSync
from crawlproj.monitor import control
from crawlproj.monitor.heartbeat import Heartbeat
from crawlproj.monitor.status import crawl_status
from crawlproj.redis.keyspace import Keyspace
from crawlproj.ui.dashboard import StatusService, is_loopback
from tests.test_bad_inputs import one_line, scrapy


def _frontier(r, crawl="ctl", urls=4) -> Frontier:
    f = Frontier(r, Keyspace.open(r, crawl, 1), lease_ttl=30)
    f.sync({0: Batch(enqueue=[f.entry(f"h{i}.ex", f"http://h{i}.ex/", 0.0, b"x")
                              for i in range(urls)])})
    return f


def test_one_command_is_one_moment_in_every_partition_and_the_record(redis_url):
    """A worker compares the stop's stamp with its own start (sync.py) and
    the dashboard shows the record's: both must be the one time returned."""
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "ctl-many", 512)  # enough EVALs to cross a ms
    for command, field in (("pause", b"pause"), ("stop", b"stop")):
        at = control.control(r, ks, command)
        stamps = {r.hget(ks.control(p), field) for p in range(ks.partitions)}
        assert stamps == {str(at).encode()}
        assert r.hget(ks.crawl_control, field) == str(at).encode()


def _sync(f: Frontier, stopped: list) -> FrontierSync:
    return FrontierSync(f, LeaseBook(), get_crawler().stats, 4, True, 0, lambda: None,
                        on_stop=lambda: stopped.append(True))


def test_a_stop_closes_the_workers_running_then_and_not_those_started_after(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r)
    running, late = [], []
    before = _sync(f, running)
    before.control.answered(f.sync({0: Batch()}))  # its first answer: it runs from here
    control.control(r, f.keyspace, "stop")
    after = _sync(f, late)  # a worker starting as the stop is given
    after.control.answered(f.sync({0: Batch()}))
    before.control.answered(f.sync({0: Batch()}))
    assert running == [True] and late == []
    # the stop also ended nothing else: the crawl's URLs are all still queued
    assert f.sync({0: Batch()})[0].queued == 4


def _heartbeat(r, crawl="hb", interval=5.0) -> Heartbeat:
    crawler = get_crawler()
    beat = Heartbeat(crawler, r, Keyspace(crawl, 1), interval, 30.0)
    beat.worker = "w1"
    return beat


def test_heartbeats_add_each_counter_once_even_after_a_lost_one(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    Keyspace.open(r, "hb", 1)
    beat = _heartbeat(r)
    stats = beat.stats
    stats.set_value("figures/attempts", 5)
    stats.set_value("start_time", "not a number")
    stats.set_value("ranker/last_run", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    beat.answered(r.execute_command(*beat.command()))
    stats.inc_value("figures/attempts", 3)
    beat.command()  # this one is lost with its sync
    beat.answered(ConnectionError("the sync failed"))
    stats.inc_value("figures/attempts", 2)
    beat.answered(r.execute_command(*beat.command()))
    ks = Keyspace("hb", 1)
    assert r.hget(ks.totals, "figures/attempts") == b"10"
    assert r.hget(ks.totals, "start_time") is None
    assert r.hget(ks.worker("w1"), "c:figures/attempts") == b"10"
    s = crawl_status(r, Keyspace.found(r, "hb"))
    assert s["fetched"] == 10 and [w["id"] for w in s["workers"]] == ["w1"]
    assert s["ranker"]["last_run"] == "2026-01-02T03:04:05+00:00"


def test_a_heartbeat_applied_whose_answer_was_lost_is_not_counted_twice(redis_url):
    """A sync that times out after the server ran it: the worker counts the
    heartbeat lost and sends its growth again; the crawl's totals must not
    hold it twice (a 5xx counted twice on a loaded machine)."""
    r = redis_lib.Redis.from_url(redis_url)
    Keyspace.open(r, "hb-again", 1)
    beat = _heartbeat(r, crawl="hb-again")
    beat.stats.set_value("figures/attempts", 5)
    beat.answered(r.execute_command(*beat.command()))
    beat.stats.inc_value("figures/attempts", 3)
    r.execute_command(*beat.command())  # the server applied it ...
    beat.answered(TimeoutError("Timeout reading from socket"))  # ... the answer was lost
    beat.stats.inc_value("figures/attempts", 2)
    beat.answered(r.execute_command(*beat.command()))
    ks = Keyspace("hb-again", 1)
    assert r.hget(ks.totals, "figures/attempts") == b"10"
    assert r.hget(ks.worker("w1"), "c:figures/attempts") == b"10"


def test_a_heartbeat_writes_nothing_into_a_server_that_lost_the_crawl(redis_url):
    """A server restarted empty (no meta hash of the crawl) gets no worker
    record, totals or history from a heartbeat sent before the worker knew:
    it is refused as CRAWLLOST, as the frontier's sync is."""
    r = redis_lib.Redis.from_url(redis_url)
    beat = _heartbeat(r, crawl="hb-lost")
    beat.stats.set_value("figures/attempts", 5)
    with pytest.raises(redis_lib.ResponseError, match="CRAWLLOST"):
        r.execute_command(*beat.command())
    assert r.keys("cp:{hb-lost}*") == []


def test_a_silent_worker_is_shown_gone_then_forgotten(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    Keyspace.open(r, "hb", 1)
    beat = _heartbeat(r, interval=0.01)
    beat.lease_ttl = 0.05
    beat.answered(r.execute_command(*beat.command()))
    import time
    time.sleep(0.05)  # more than 3 intervals: gone, its leases not yet expired
    w = crawl_status(r, Keyspace.found(r, "hb"))["workers"][0]
    assert w["state"] == "gone" and "back to their queues" in w["leases_fate"]
    time.sleep(0.05)
    other = _heartbeat(r, interval=0.01)
    other.worker = "w2"
    other.lease_ttl = 0.05
    other.answered(r.execute_command(*other.command()))  # the others' heartbeats forget it
    ids = [w["id"] for w in crawl_status(r, Keyspace.found(r, "hb"))["workers"]]
    assert ids == ["w2"]


def test_control_beyond_loopback_needs_a_token():
    settings = Settings()
    apply_table(settings)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")
    open_beyond = StatusService(settings, "c", None, loopback=False)
    assert not open_beyond.control_allowed()
    guarded = StatusService(settings, "c", "s3cret", loopback=False)
    assert guarded.control_allowed() and guarded.token_required()
    assert guarded.authorised(b"Bearer s3cret") and not guarded.authorised(b"Bearer s3cre")
    assert not guarded.authorised(None)
    local = StatusService(settings, "c", None, loopback=True)
    assert local.control_allowed() and local.authorised(None)


# -- mistakes: one line, exit status 2 -------------------------------------------

@pytest.mark.parametrize("args,said", [
    (["crawlctl"], "crawlproj: crawlctl takes one of pause, resume, stop, status, or "
                   "block|unblock|delay HOST [SECONDS], not 'nothing'"),
    (["crawlctl", "paws"], "crawlproj: crawlctl takes one of pause, resume, stop, status, or "
                           "block|unblock|delay HOST [SECONDS], not 'paws'"),
    (["crawlctl", "block", "a.ex"], "crawlproj: crawlctl block HOST SECONDS: got 'a.ex'"),
    (["crawlctl", "block", "a.ex", "soon"],
     "crawlproj: crawlctl block a.ex: SECONDS is a number of seconds, 0 or more, not 'soon'"),
    (["crawlctl", "delay", "a.ex", "-1"],
     "crawlproj: crawlctl delay a.ex: SECONDS is a number of seconds, 0 or more, not '-1'"),
    (["crawlctl", "unblock", "a b"], "crawlproj: not a host name: 'a b'"),
    (["crawlctl", "pause", "--crawl-id", "nope"],
     "crawlproj: no crawl 'nope' on this server (`scrapy crawls list` shows the crawls there are)"),
])
def test_crawlctl_mistakes(redis_url, tmp_path, args, said):
    run = scrapy(*args, env_extra={"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2
    assert one_line(run) == said


def test_crawlctl_with_redis_unreachable(tmp_path):
    from crawlproj.redis.embedded import free_port
    port = free_port()
    run = scrapy("crawlctl", "stop", env_extra={"REDIS_URL": f"redis://127.0.0.1:{port}/0",
                                                 "CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2
    assert one_line(run) == (f"crawlproj: cannot reach Redis at redis://127.0.0.1:{port}/0: "
                             "Connection refused")


def test_crawlctl_pauses_and_says_so(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, crawl="said")
    run = scrapy("crawlctl", "pause", "--crawl-id", "said",
                 env_extra={"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("crawl said paused")
    assert f.sync({0: Batch(lease=1)})[0].leased == []


def test_crawlctl_blocks_and_slows_down_a_host(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, crawl="steered")
    env = {"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)}
    run = scrapy("crawlctl", "block", "http://A.ex/x", "3600", "--crawl-id", "steered",
                 env_extra=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("host a.ex: blocked until ")
    assert f.host("a.ex").blocked_until_ms > f.now_ms() + 3_500_000
    run = scrapy("crawlctl", "delay", "a.ex", "2.5", "--crawl-id", "steered", env_extra=env)
    assert run.stdout == "host a.ex: at least 2.5 s between downloads\n"
    assert f.host("a.ex").least_delay_ms == 2500
    run = scrapy("crawlctl", "unblock", "a.ex", "--crawl-id", "steered", env_extra=env)
    assert run.stdout == "host a.ex: not blocked\n"
    assert f.host("a.ex").blocked_until_ms is None


def test_a_bad_monitor_interval(redis_url, tmp_path):
    run = scrapy("crawl", "web", "-a", "seeds=http://a.example/", "-s", "MONITOR_INTERVAL=often",
                 env_extra={"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2
    assert one_line(run) == ("crawlproj: MONITOR_INTERVAL='often' is not a number "
                             "(settings/base.py says what each means)")


def test_the_ui_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = scrapy("ui", "--port", str(port), env_extra={"CRAWL_DATA_DIR": str(tmp_path)},
                     timeout=60)
    assert run.returncode == 2
    assert one_line(run) == (f"crawlproj: cannot listen on 127.0.0.1:{port}: "
                             "Address already in use (--port to choose another)")


def test_an_empty_ui_token(tmp_path):
    run = scrapy("ui", "--port", "0", env_extra={"CRAWL_DATA_DIR": str(tmp_path),
                                                  "CRAWLPROJ_UI_TOKEN": " "}, timeout=60)
    assert run.returncode == 2
    assert one_line(run) == "crawlproj: UI_TOKEN must not be empty (unset it for no token)"


def test_the_grafana_dashboard_draws_only_metrics_the_app_serves(redis_url):
    import json
    import re

    from tests.e2e import ROOT
    from tests.test_operator import served

    text = served(redis_lib.Redis.from_url(redis_url), "graf")
    assert 'crawlproj_pages_fetched_total{crawl_id="graf"} 3.0' in text
    assert 'crawlproj_queued_urls{crawl_id="graf"} 3.0' in text
    drawn = set(re.findall(r"crawlproj_[a-z_]+", (ROOT / "docs" / "grafana-dashboard.json").read_text()))
    names = set(re.findall(r"^(crawlproj_[a-z_]+)", text, re.M))
    assert drawn and drawn <= names, sorted(drawn - names)
    assert json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())["panels"]


def test_what_pages_asked_and_the_crawl_obeyed_is_in_the_status_and_metrics(redis_url):
    """The spider's robotsmeta/ counters, summed crawl-wide by the heartbeat,
    reach /api/status (and the dashboard that draws it) and /metrics."""
    from prometheus_client import CollectorRegistry, generate_latest

    from crawlproj.ui.metrics import CrawlCollector

    r = redis_lib.Redis.from_url(redis_url)
    _frontier(r, crawl="obeyed")
    beat = _heartbeat(r, crawl="obeyed")
    for name, n in (("robotsmeta/pages/noindex", 2), ("robotsmeta/pages/nofollow", 3),
                    ("robotsmeta/pages/noarchive", 1), ("robotsmeta/links/nofollow", 40)):
        beat.stats.set_value(name, n)
    beat.answered(r.execute_command(*beat.command()))
    s = crawl_status(r, Keyspace.found(r, "obeyed"))["politeness"]
    assert (s["pages_noindex"], s["pages_nofollow"], s["pages_noarchive"], s["links_nofollow"]) == (2, 3, 1, 40)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CrawlCollector(lambda: r))
    served = generate_latest(registry).decode()
    assert 'crawlproj_pages_noindex_total{crawl_id="obeyed"} 2.0' in served
    assert 'crawlproj_links_nofollow_total{crawl_id="obeyed"} 40.0' in served
