"""The dashboard in a real headless browser (Debian's chromium, driven by
Playwright) against `scrapy ui`, showing a crawl of the simulated web whose
Redis the test stops and starts again. The same set-up as the search page's
browser tests: without a chromium they skip, except in CI, where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from crawlproj.redis.embedded import free_port
from crawlproj.simweb.testing import SimWebServer
from tests import test_search_browser
from tests.conftest import RedisServer
from tests.e2e import ROOT, Workers
from tests.test_search_browser import _need_browser

pytestmark = pytest.mark.e2e

CRAWL = "dash"
WEB = {"seed": 11, "hosts": 12, "pages": 90, "page_bytes": 800, "latency_ms": [1, 3]}
# the page reads the status every 2 s: a bound on a wait, not a claim
WAIT_MS = 20_000
# the search page's headless chromium, launched once this module's site is up
browser = test_search_browser.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    _need_browser()
    tmp = tmp_path_factory.mktemp("dashboard")
    server = RedisServer(tmp / "redis")
    with SimWebServer(WEB, log_path=str(tmp / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        workers = Workers(sw, server.url, tmp, seeds, CRAWL,
                          {"MONITOR_INTERVAL": 1, "FRONTIER_DELAY_FACTOR": 0})
        workers.start(1)
        assert workers.wait(180) == [0]
        records = sw.settle_log()
    port = free_port()
    env = dict(os.environ, REDIS_URL=server.url, CRAWL_ID=CRAWL,
               CRAWL_DATA_DIR=str(tmp / "data"))
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "/dashboard" in line, line + proc.stderr.read()
    yield {"base": f"http://127.0.0.1:{port}", "records": records, "redis": server}
    proc.terminate()
    proc.wait(30)
    server.stop()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    pg = ctx.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # a script or style the CSP blocks is reported on the console as an error
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.errors = errors
    yield pg
    ctx.close()


def _get(url: str, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _pages(records):
    return [r for r in records if r["path"] != "/robots.txt"]


def expect(locator):
    from playwright.sync_api import expect as playwright_expect
    return playwright_expect(locator)


def test_dashboard_shows_the_crawl_as_the_web_saw_it(site, page):
    page.goto(site["base"] + "/dashboard")
    ok = [r for r in _pages(site["records"]) if r["status"] == 200]
    expect(page.locator("#crawl")).to_have_text("dash", timeout=WAIT_MS)
    assert page.text_content("#state") == "idle"
    rows = page.query_selector_all("#outcomes .bar-row")
    by_name = {r.query_selector("span").text_content():
               int(r.query_selector(".n").text_content().replace(",", "")) for r in rows}
    assert by_name["200 OK"] == len(ok)
    # every attempt: those the web logged, and those robots.txt kept from it
    fetched = int(page.text_content("#fetched").replace(",", ""))
    assert fetched == len(_pages(site["records"])) + by_name["Excluded by robots.txt"]
    assert by_name["404 Not Found"] == sum(1 for r in _pages(site["records"]) if r["status"] == 404)
    assert page.query_selector_all("#workers tbody tr.closed"), "the worker's goodbye is not shown"
    assert page.text_content("#log").count("\n") > 5  # the crawl log's tail
    assert page.errors == []


def test_pause_and_resume_buttons_steer_the_crawl(site, page):
    page.goto(site["base"] + "/dashboard")
    expect(page.locator("#state")).to_have_text("idle", timeout=WAIT_MS)
    page.click("#pause")
    expect(page.locator("#state")).to_have_text("paused", timeout=WAIT_MS)
    assert site["redis"].client().hget("cp:{dash/0}:control", "pause") is not None
    page.click("#resume")
    expect(page.locator("#state")).to_have_text("idle", timeout=WAIT_MS)
    assert site["redis"].client().hget("cp:{dash/0}:control", "pause") is None
    assert page.errors == []


def test_dashboard_says_redis_is_unreachable_and_recovers(site, page):
    page.goto(site["base"] + "/dashboard")
    expect(page.locator("#state")).to_have_text("idle", timeout=WAIT_MS)
    site["redis"].kill()
    try:
        page.wait_for_selector("#banner:not([hidden])", timeout=20_000)
        assert "Redis unreachable" in page.text_content("#banner")
    finally:
        site["redis"].restart()
    page.wait_for_selector("#banner[hidden]", state="attached", timeout=30_000)
    assert page.text_content("#state") == "idle"


def test_status_api_metrics_and_control_refusals(site):
    base = site["base"]
    code, body = _get(base + "/api/status?crawl=no-such-crawl")
    assert code == 404 and "no crawl 'no-such-crawl'" in json.loads(body)["error"]
    code, body = _get(base + "/api/status")
    status = json.loads(body)
    assert code == 200 and status["crawl_id"] == CRAWL
    code, text = _get(base + "/metrics")
    assert code == 200
    line = f'crawlproj_pages_fetched_total{{crawl_id="{CRAWL}"}} {float(status["fetched"])}'
    assert line in text.decode(), text.decode()[:2000]
    control = base + "/api/control"
    body = json.dumps({"action": "pause"}).encode()
    assert _get(control, "POST", body, {"content-type": "text/plain"})[0] == 415
    assert _get(control, "POST", body, {"content-type": "application/json",
                                        "origin": "http://evil.example"})[0] == 403
    assert _get(control, "POST", b'{"action": "explode"}',
                {"content-type": "application/json"})[0] == 400
    code, _ = _get(control, "POST", json.dumps({"crawl": "nope", "action": "pause"}).encode(),
                   {"content-type": "application/json"})
    assert code == 404
