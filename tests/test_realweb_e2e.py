"""A real site, served by a real web server, crawled by two workers.

Debian's Python 3.11 manual under nginx (tests/nginxweb.py), with a
robots.txt of the test's: two `scrapy crawl web` workers share one frontier;
what was fetched, how often and when is read from nginx's access log.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from crawlproj.simweb import checks
from tests.e2e import Workers, stat
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web

pytestmark = pytest.mark.e2e

HOST = "docs.python.test"
CRAWL_DELAY = 0.05
ROBOTS = f"User-agent: *\nDisallow: /genindex\nDisallow: /library/json.html\nCrawl-delay: {CRAWL_DELAY}\n"


def python_docs(tmp_path, robots: str = ROBOTS, directives: str = "") -> Site:
    extra = tmp_path / "extra"
    extra.mkdir(exist_ok=True)
    (extra / "robots.txt").write_text(robots)
    return Site(HOST, PYTHON_DOCS, f"location = /robots.txt {{ alias {extra}/robots.txt; }}\n{directives}")


def test_two_workers_crawl_a_real_site_once_and_politely(redis_url, tmp_path):
    require_real_web()
    with NginxWeb([python_docs(tmp_path)], tmp_path / "nginx") as web:
        workers = Workers(web, redis_url, tmp_path, [web.url(HOST, "/library/index.html")], "realweb",
                          {"DEPTH_LIMIT": 1, "CRAWL_SCOPE": "host"})
        # the second worker joins first and waits for work, so that both crawl the
        # host's 200 pages however loaded the machine
        workers.start(1, seeds=False)
        workers.wait_opened()
        workers.start(1)
        assert workers.wait() == [0, 0]
        records = web.settle_log()
    paths = Counter(r["path"] for r in records)
    assert paths["/robots.txt"] == 1
    assert max(paths.values()) == 1, paths.most_common(3)  # no page twice
    assert "/library/json.html" not in paths  # Disallow obeyed
    assert not [p for p in paths if p.startswith("/genindex")]
    assert paths["/library/index.html"] == 1 and len(paths) > 200  # the library's pages, one link away
    assert {r["status"] for r in records} == {200}
    assert checks.overlaps(records) == []
    # Crawl-delay between any two requests, robots.txt included (nginx logs in ms)
    bad = checks.politeness_violations(records, factor=0.0, crawl_delay_of={HOST: CRAWL_DELAY},
                                       ignore_paths=(), tolerance=0.002)
    assert bad == [], bad[:3]
    logs = [workers.log(i) for i in range(2)]
    assert sum(stat(log, "robotstxt/forbidden") for log in logs) >= 1
    assert all(stat(log, "response_received_count") > 0 for log in logs)  # both worked


def test_what_a_crawl_keeps_is_its_owners_alone(redis_url, tmp_path):
    """CRAWL_DATA_DIR and what the stores make in it (WARC files, crawl logs,
    the index, link segments) are created owner-only, whatever the umask."""
    require_real_web()
    old = os.umask(0o022)
    try:
        with NginxWeb([python_docs(tmp_path)], tmp_path / "nginx") as web:
            workers = Workers(web, redis_url, tmp_path, [web.url(HOST, "/library/csv.html")], "private",
                              {"DEPTH_LIMIT": 1, "CRAWL_SCOPE": "host"})
            workers.start(1)
            assert workers.wait() == [0]
    finally:
        os.umask(old)
    data = tmp_path / "data"
    made = [data, *(p for p in data.rglob("*") if p.is_dir())]
    assert {p.relative_to(data).parts[0] for p in made[1:]} >= {"warc", "logs", "index"}
    assert {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in made
            if p.stat().st_mode & 0o077} == {}
    assert not (data.stat().st_mode & 0o077)
