"""The crawl operator's view in a real headless browser (Debian's chromium,
driven by Playwright) against `scrapy ui`: the dashboard's charts of the
crawl's history, the hosts page and a host's page, after a crawl of the
simulated web whose busy hosts answer 503 and some of whose hosts set a
Crawl-delay, with one of its two workers killed (kill -9) on the way and
the web app restarted after. What the pages say is checked against the
simulated web's own request log and the crawl's Redis. Without a chromium
the tests skip, except in CI (BROWSER_TESTS=required), where they fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from crawlproj.monitor.status import crawl_status
from crawlproj.redis.embedded import free_port
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb.testing import SimWebServer
from tests import test_dashboard_browser, test_search_browser
from tests.conftest import RedisServer
from tests.e2e import ROOT, Workers
from tests.test_dashboard_browser import _get, expect
from tests.test_search_browser import _need_browser

pytestmark = pytest.mark.e2e

CRAWL = "op"
# Hosts h0002, h0007, h0011 set a Crawl-delay; h0001, h0003, h0004, h0007 and
# h0012 answer their first two page requests with 503 (seed 11).
WEB = {"seed": 11, "hosts": 12, "pages": 150, "page_bytes": 800, "latency_ms": [1, 3],
       "crawl_delay_fraction": 0.25, "crawl_delay": 0.3, "busy_fraction": 0.3, "busy_requests": 2}
SETTINGS = {"MONITOR_INTERVAL": 1, "MONITOR_HISTORY": "[[1, 600], [60, 10080]]",
            "FRONTIER_BACKOFF_BASE": 1, "FRONTIER_LEASE_TTL": 4}
SHOTS = ROOT / "docs" / "img"
WAIT_MS = 20_000  # the pages read every 2-5 s: a bound on a wait, not a claim
browser = test_search_browser.browser
page = test_dashboard_browser.page


def _ui(env, port):
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "/dashboard" in line, line + proc.stderr.read()
    return proc


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    _need_browser()
    tmp = tmp_path_factory.mktemp("operator")
    server = RedisServer(tmp / "redis")
    r = server.client()
    with SimWebServer(WEB, log_path=str(tmp / "web.jsonl")) as sw:
        web = sw.web
        workers = Workers(sw, server.url, tmp, web.seeds(2), CRAWL, SETTINGS)
        victim, survivor = workers.start(2)
        sw.wait_log(lambda recs: len(recs) >= 60, timeout=180)
        deadline = time.monotonic() + 60
        while True:  # the victim's id, from its heartbeat
            s = crawl_status(r, Keyspace.found(r, CRAWL), with_history=False)
            ids = [w["id"] for w in s["workers"] if w["pid"] == str(victim.pid)]
            if ids or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert ids, "the victim never sent a heartbeat"
        killed_at_ms = int(r.time()[0]) * 1000
        Workers.signal(victim, signal.SIGKILL)
        assert survivor.wait(300) == 0
        victim.wait()
        records = sw.settle_log()
    port = free_port()
    env = dict(os.environ, REDIS_URL=server.url, CRAWL_ID=CRAWL, CRAWL_DATA_DIR=str(tmp / "data"))
    state = {"base": f"http://127.0.0.1:{port}", "records": records, "web": web, "redis": r,
             "victim": ids[0], "killed_at_ms": killed_at_ms, "ui": _ui(env, port),
             "env": env, "port": port}
    yield state
    state["ui"].terminate()
    state["ui"].wait(30)
    server.stop()


def _points(page, chart: str) -> int:
    return int(page.get_attribute(f"#{chart} svg", "data-points"))


def _legend(page, chart: str) -> list[str]:
    return [x.text_content() for x in page.query_selector_all(f"#{chart} .legend-item span")]


def test_the_dashboard_draws_the_crawls_history(site, page):
    page.goto(site["base"] + "/dashboard")
    page.wait_for_selector('#chart-pages svg path[data-series="all"]', timeout=WAIT_MS)
    status = json.loads(_get(site["base"] + "/api/status")[1])
    samples = status["history"]["samples"]
    assert status["history"]["step_s"] == 1 and len(samples) >= 5
    # the last sample holds the crawl's totals; the web's log has those and
    # the killed worker's fetches after its last heartbeat, never counted
    pages = [x for x in site["records"] if x["path"] != "/robots.txt"]
    excluded = status["figures"]["outcomes"]["Excluded by robots.txt"]
    assert samples[-1]["fetched"] == status["fetched"] <= len(pages) + excluded
    fivexx = sum(1 for x in pages if x["status"] >= 500)
    assert 0 < samples[-1]["5xx"] == status["errors"]["5xx"] <= fivexx
    # every chart drawn, with data: the rates from consecutive samples, the gauges as sampled
    for chart in ("chart-pages", "chart-mb", "chart-urls", "chart-hosts", "chart-errors"):
        assert _points(page, chart) >= 5, chart
    assert page.query_selector('#chart-errors path[data-series="5xx"]') is not None
    assert page.query_selector('#chart-hosts path[data-series="backed off"]') is not None
    assert f"fetched {status['fetched']}" in _legend(page, "chart-urls")
    # a line per worker: the killed one's too, up to its last heartbeat
    legend = _legend(page, "chart-pages")
    assert any(x.startswith(site["victim"] + " ") for x in legend), legend
    assert page.text_content("#eta") == "0 s" and "nothing queued" in page.text_content("#eta-basis")
    assert page.errors == []
    shot = page.screenshot(full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS"):  # docs/monitor.md shows it
        (SHOTS / "dashboard.png").write_bytes(shot)


def test_a_host_page_names_its_crawl_delay_and_the_backoff_503s_provoked(site, page):
    web = site["web"]
    (host,) = [h for h in web.hosts if web.busy(h) and web.crawl_delay(h)]
    page.goto(site["base"] + "/host?name=" + host)
    page.wait_for_selector("#story:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#host") == host
    assert page.text_content("#crawl-delay") == f"Crawl-delay {web.crawl_delay(host):g} s (robots.txt)"
    served = Counter(x["status"] for x in site["records"]
                     if x["host"] == host and x["path"] != "/robots.txt")
    assert served[503] == web.busy(host) == 2
    backoffs = int(page.text_content("#backoffs").split(" ")[0])
    # each 503 backed the host off (one may be lost with the killed worker's release)
    assert 1 <= backoffs <= served[503]
    assert "after 429/503 answers" in page.text_content("#last-backoff")
    assert "Crawl-delay: 0.3" in page.text_content("#robots")
    fetched = [x.text_content() for x in page.query_selector_all("#fetches tbody td:nth-child(4)")]
    assert fetched and all(u.startswith(f"http://{host}/") for u in fetched)
    # its crawl log's 503s, among its last errors (the killed worker's log has its own)
    statuses = [x.text_content() for x in page.query_selector_all("#errors tbody td:nth-child(2)")]
    assert 1 <= statuses.count("503") <= 2
    assert page.errors == []
    shot = page.screenshot(full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS"):
        (SHOTS / "host.png").write_bytes(shot)


def test_the_hosts_page_sorts_and_searches(site, page):
    page.goto(site["base"] + "/hosts")
    page.wait_for_selector("#hosts tbody td a", timeout=WAIT_MS)
    page.click('th[data-sort="fetched"]')
    expect(page.locator('th[data-sort="fetched"]')).to_have_class("sortable num sorted", timeout=WAIT_MS)
    cells = page.query_selector_all("#hosts tbody tr td:nth-child(6)")
    fetched = [int(c.text_content().replace(",", "")) for c in cells]
    assert fetched == sorted(fetched, reverse=True) and len(fetched) == len(site["web"].hosts)
    page.fill("#q", "h0007")
    expect(page.locator("#hosts tbody tr")).to_have_count(1, timeout=WAIT_MS)
    assert page.text_content("#hosts tbody td a") == "h0007.example"
    assert page.text_content("#hosts tbody tr td:nth-child(9)") == "0.3 s"
    assert page.errors == []


def test_the_history_survives_a_killed_worker_and_a_restart_of_the_ui(site, page):
    r = site["redis"]
    past = crawl_status(r, Keyspace.found(r, CRAWL))["history"]["samples"]
    theirs = [s for s in past if site["victim"] in s["workers"]]
    assert theirs and all(s["t"] <= site["killed_at_ms"] + 1000 for s in theirs)
    page.goto(site["base"] + "/dashboard")
    page.wait_for_selector('#chart-pages svg path[data-series="all"]', timeout=WAIT_MS)
    before = _points(page, "chart-pages")
    site["ui"].terminate()
    site["ui"].wait(30)
    site["ui"] = _ui(site["env"], site["port"])
    page.reload()
    page.wait_for_selector('#chart-pages svg path[data-series="all"]', timeout=WAIT_MS)
    assert _points(page, "chart-pages") == before
    assert any(x.startswith(site["victim"] + " ") for x in _legend(page, "chart-pages"))
    # the page's reads while the app was down failed, and nothing else did
    assert [e for e in page.errors if "ERR_CONNECTION_REFUSED" not in e] == []


def test_bad_input_gets_one_clear_message_and_markup_stays_text(site, page):
    base = site["base"]
    page.goto(base + "/host?name=" + "%3Cb%3Ebold%3C%2Fb%3E")
    page.wait_for_selector("#message:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#message").startswith("not a host name: '<b>bold</b>'")
    assert page.query_selector("b#nothing, #message b, #host b") is None
    assert page.text_content("#host") == "<b>bold</b>"
    page.goto(base + "/host?name=nowhere.example")
    page.wait_for_selector("#message:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#message").startswith(f"no host 'nowhere.example' in crawl '{CRAWL}'")
    page.goto(base + "/dashboard?crawl=" + "%3Ci%3Enope%3C%2Fi%3E")
    page.wait_for_selector("#banner:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#banner").startswith("no crawl '<i>nope</i>' on this server")
    # a crawl with a record and no data yet: no history to draw, said so
    Keyspace.open(site["redis"], "empty", 1)
    page.goto(base + "/dashboard?crawl=empty")
    expect(page.locator("#state")).to_have_text("idle", timeout=WAIT_MS)
    assert page.text_content("#chart-pages").startswith("no history yet")
    page.goto(base + "/hosts?crawl=empty")
    expect(page.locator("#hosts tbody")).to_have_text("no hosts yet", timeout=WAIT_MS)
    assert [e for e in page.errors if "Failed to load resource" not in e] == []
    for url, said in ((base + "/api/hosts?sort=%3Cb%3E", "sort by one of queue, wait"),
                      (base + "/api/hosts?n=many", "n must be a number, not 'many'"),
                      (base + "/api/status?span=-1", "span must be 1 or more"),
                      (base + "/api/host", "give a host name")):
        code, body = _get(url)
        assert code == 400 and json.loads(body)["error"].startswith(said), (url, body)
