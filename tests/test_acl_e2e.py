"""The ACL user of docs/deploy.md is enough for a crawl, and no more.

The line is read from the docs themselves, so the docs cannot drift from
what was tested: a server with that user, two workers logged in as it
crawling the simulated web with every store on, the PageRank prioritizer (the
ranker inside a worker) and link-store compaction, then the tools.
"""

from __future__ import annotations

import re
import secrets
import shlex
import subprocess
import sys

import pytest
import redis

from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import ROOT, Workers

pytestmark = pytest.mark.e2e

WEB = {"seed": 11, "hosts": 30, "pages": 300, "page_bytes": 1500, "latency_ms": [1, 3]}


def documented_acl() -> list[str]:
    text = (ROOT / "docs" / "deploy.md").read_text()
    lines = re.findall(r"^ACL SETUSER crawler .*$", text, re.M)
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def test_a_crawl_runs_as_the_documented_acl_user(redis_server_factory, tmp_path):
    server = redis_server_factory()
    password = secrets.token_hex(16)
    args = [a.replace("PASSWORD", password) for a in documented_acl()]
    admin = server.client()
    admin.execute_command(*args)
    url = f"redis://crawler:{password}@127.0.0.1:{server.port}/0"
    crawler = redis.Redis.from_url(url)
    with pytest.raises(redis.exceptions.NoPermissionError):
        crawler.flushall()
    with pytest.raises(redis.exceptions.NoPermissionError):
        crawler.set(b"someone-elses-key", b"x")

    with SimWebServer(WEB) as sw:
        seeds = sw.web.seeds(3)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, url, tmp_path, seeds, "acl", {
            "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_PRIORITIZER": "pagerank",
            "RANKER_INTERVAL": 1, "LINKSTORE_SEGMENT_PAGES": 50,
            "CONTENTSEEN_NEAR": True})
        workers.start(2)
        assert workers.wait() == [0, 0]
        fetched = {checks.url_of(r) for r in sw.read_log() if r["path"] != "/robots.txt"}
    logs = [workers.log(i) for i in range(2)]
    for log in logs:
        assert not re.search(r"NOPERM|ACL failure|no permissions", log), log[-3000:]
    # the ranker and the link store's compaction ran as that user too
    assert any("Ranker: " in log for log in logs) and any("Link store: " in log for log in logs)
    assert reachable <= fetched
    for tool in (["frontier", "--crawl-id", "acl"], ["crawls", "list"],
                 ["crawlctl", "status", "--crawl-id", "acl"], ["crawlctl", "pause", "--crawl-id", "acl"]):
        run = subprocess.run([sys.executable, "-m", "scrapy", *tool], cwd=ROOT,
                             env={**workers.sw.env(), "REDIS_URL": url},
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
