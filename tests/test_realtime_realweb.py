"""The real-time search mode on a real site: Debian's Python 3.11 manual
under nginx (tests/nginxweb.py), a session from its home page toward a
query whose page is two links away, judged from nginx's access log.

On this manual the page a user asking `sqlite` wants, library/sqlite3.html,
is first found through a hub's link that says nothing of the query
(whatsnew/3.11.html: "set_authorizer()", py-modindex.html: "sqlite3"), and
later under the library index's or the table of contents' "sqlite3 - DB-API
2.0 interface for SQLite databases". Cho's hot queue holds the URLs "seen in
an anchor mentioning" the query: the later link must count
(docs/search.md, "The real-time mode on real documentation").
"""

from __future__ import annotations

import pytest

from crawlproj.search.realtime import MAX_PAGES
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web
from tests.test_realtime import pages_fetched, printed, run_crawl

pytestmark = pytest.mark.e2e

HOST = "docs.python.test"
SEED = f"http://{HOST}/"
TARGET = f"http://{HOST}/library/sqlite3.html"
# Fetches allowed: the session reaches the page in 7-10 (bench/realtime_docs.py),
# breadth-first in 233, and a session whose URLs keep their first link's
# score had not fetched it after 50.
BUDGET = 20
SCOPE = {"CRAWL_SCOPE": "host"}  # the manual only: its links to python.org are not ours


def crawl(tmp_path, redis_url, crawl_id: str, spargs: dict, settings: dict):
    with NginxWeb([Site(HOST, PYTHON_DOCS)], tmp_path / f"nginx-{crawl_id}") as web:
        run = run_crawl(web, redis_url, tmp_path / f"data-{crawl_id}", crawl_id,
                        {"seeds": SEED, **spargs}, {**SCOPE, **settings})
        return run, pages_fetched(web.settle_log())


@pytest.fixture(scope="module")
def bfs_order(redis_server, tmp_path_factory):
    require_real_web()
    if not redis_server.alive:
        redis_server.restart()
    run, order = crawl(tmp_path_factory.mktemp("bfs"), redis_server.url, "docs-bfs", {},
                       {"FRONTIER_PRIORITIZER": "bfs", "CLOSESPIDER_PAGECOUNT": BUDGET})
    assert run.returncode == 0, run.stderr[-3000:]
    return order


@pytest.mark.parametrize("query", ["sqlite", "sqlite database cursor"])
def test_a_session_reaches_its_page_two_links_away_where_bfs_does_not(query, bfs_order, redis_url,
                                                                      tmp_path):
    run, order = crawl(tmp_path, redis_url, "docs-rt", {"query": query, "max_pages": BUDGET}, {})
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"'finish_reason': '{MAX_PAGES}'" in run.stderr
    assert order[0] == SEED and len(order) >= BUDGET
    assert TARGET not in bfs_order[:BUDGET], bfs_order
    assert TARGET in order[:BUDGET], order
    # and the session's results, as it prints them at its end, show it first
    assert printed(run)[0] == TARGET, printed(run)
