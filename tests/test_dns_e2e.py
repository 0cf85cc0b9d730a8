"""Host names that do not resolve, in real crawls (docs/hardening.md, "Names
that do not resolve").

Workers connect directly, through the test resolver (tests/resolver.py:
docs.python.test is 127.0.0.1, where nginx serves Debian's Python manual;
any other name resolves to nothing, and no lookup leaves the process), with
no proxy. ROBOTS_RETRY_WAIT is a day: a worker that took a name that does not
resolve for a robots.txt that could not be had would wait it out, and the
test's timeout would end it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from crawlproj.monitor.status import crawl_status
from crawlproj.redis.keyspace import Keyspace
from tests.e2e import ROOT, Workers, stat
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOST = "docs.python.test"
SETTINGS = {
    "DEPTH_LIMIT": 1, "CRAWL_SCOPE": "any",
    "TWISTED_DNS_RESOLVER": "tests.resolver.StaticResolver",
    "TEST_RESOLVER_MAP": json.dumps({HOST: ["127.0.0.1"]}),
    "ADDRESS_GUARD_ALLOW": HOST,  # its loopback address, and nothing else
    "ROBOTS_RETRY_WAIT": 86400,
}


class Direct:
    """nginx reached directly, not as a proxy: the environment without one."""

    def __init__(self, web: NginxWeb):
        self.web = web

    def env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items()
                if k.lower() not in ("http_proxy", "https_proxy", "no_proxy")}

    def settle_log(self) -> list[dict]:
        return self.web.settle_log()


@pytest.fixture
def site(tmp_path):
    """The manual, and a page of links: one to the manual, one to a host
    that does not resolve."""
    require_real_web()
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (extra / "links.html").write_text(
        '<html><body><a href="/library/json.html">json</a>'
        '<a href="http://gone.invalid/page.html">gone</a></body></html>')
    site = Site(HOST, PYTHON_DOCS, f"location = /robots.txt {{ alias {extra}/robots.txt; }}\n"
                                   f"location = /links.html {{ alias {extra}/links.html; }}")
    with NginxWeb([site], tmp_path / "nginx") as web:
        yield web


def report(tmp_path, crawl_id: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env.update(CRAWL_DATA_DIR=str(tmp_path / "data"), CRAWL_ID=crawl_id)
    run = subprocess.run([sys.executable, "-m", "scrapy", "report", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def named(log: str, seed: str, host: str) -> list[str]:
    return [line for line in log.splitlines()
            if f"seed {seed}: host {host} does not resolve" in line]


def test_a_seed_that_does_not_resolve_is_named_and_the_good_one_crawled(site, redis_url,
                                                                        tmp_path):
    good = f"http://{HOST}:{site.port}/links.html"
    bad = "http://nowhere.invalid/"
    workers = Workers(Direct(site), redis_url, tmp_path, [good, bad], "dns", SETTINGS)
    workers.start(2)
    assert workers.wait() == [0, 0]
    paths = sorted(r["path"] for r in site.settle_log())
    assert paths == ["/library/json.html", "/links.html", "/robots.txt"]
    logs = [workers.log(i) for i in range(2)]
    for log in logs:
        assert len(named(log, bad, "nowhere.invalid")) == 1, log[-3000:]
        assert not named(log, "http://gone.invalid/page.html", "gone.invalid")  # not a seed
        assert "disallowing it all" not in log
    # the seed and the discovered link that do not resolve: DNS errors, in
    # the workers' stats and in the report of their crawl logs
    assert sum(stat(log, "figures/outcome/DNS error") for log in logs) == 2
    assert sum(stat(log, "dns/hosts_unresolvable") for log in logs) == 2
    assert sum(stat(log, "robotstxt/forbidden") for log in logs) == 0
    outcomes = report(tmp_path, "dns")["outcomes"]
    assert outcomes.get("DNS error") == 2
    assert outcomes.get("Excluded by robots.txt", 0) == 0
    assert outcomes.get("200 OK") == 2
    # the dashboard's figures: the crawl-wide stats the workers' heartbeats summed
    r = redis.Redis.from_url(redis_url)
    figures = crawl_status(r, Keyspace.found(r, "dns"))["figures"]
    assert (figures["dns_errors"], figures["robots_excluded"]) == (2, 0)


def test_a_worker_whose_seeds_all_do_not_resolve_stops_with_an_error(site, redis_url, tmp_path):
    seeds = ["http://nowhere.invalid/", "https://gone.invalid/a.html"]
    workers = Workers(Direct(site), redis_url, tmp_path, seeds, "dns-none", SETTINGS)
    workers.start(2)
    assert workers.wait() == [7, 7]
    assert site.settle_log() == []  # nothing was fetched, from nowhere
    for i in range(2):
        log = workers.log(i)
        assert len(named(log, "http://nowhere.invalid/", "nowhere.invalid")) == 1
        assert len(named(log, "https://gone.invalid/a.html", "gone.invalid")) == 1
        assert log.strip().splitlines()[-1] == (
            "crawlproj: the crawl stopped on an error: no seed could be crawled: no seed's "
            "host resolves (finish reason seed_dns_error); the log says what failed (exit "
            "status 7)"), log[-3000:]
