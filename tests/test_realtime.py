"""The WebCrawler's real-time search mode (Pinkerton 1994), `scrapy crawl web
-a query=... [-a seeds=...] [-a max_pages=N]`: refused arguments, and real
crawls of the topical simulated web, judged from the web's own request log
and the crawl's index."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis as redis_lib
import tantivy

from crawlproj.search.document import document_key
from crawlproj.search.index import PageIndex
from crawlproj.search.realtime import (
    MAX_PAGES,
    RESULTS,
    RESULTS_STABLE,
    RealtimeError,
    query_words,
    session_crawl_id,
)
from crawlproj.search.searcher import Searcher
from crawlproj.simweb import checks
from crawlproj.simweb.model import SimWeb
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import ROOT
from tests.test_bad_inputs import crawl, one_line

# -- the query's words ---------------------------------------------------------


def test_a_sessions_words_drop_stop_words_and_name_it_whatever_their_order():
    assert query_words("The Molecular biology of the CELL") == ["molecular", "biology", "cell"]
    assert session_crawl_id("c", ["a", "b"]) == session_crawl_id("c", ["b", "a"])
    assert session_crawl_id("c", ["a", "b"]) != session_crawl_id("c", ["a", "c"])
    assert session_crawl_id("c", ["a"]) != session_crawl_id("d", ["a"])
    for bad in ("", "  ", "the of", "?!", None):
        with pytest.raises(RealtimeError):
            query_words(bad)


# -- refused before anything starts -------------------------------------------


@pytest.mark.parametrize("args,said", [
    (["-a", "query=", "-a", "seeds=http://a.example/"],
     "crawlproj: -a query is empty: give the words to search for (-a query='...')"),
    (["-a", "query=   ", "-a", "seeds=http://a.example/"],
     "crawlproj: -a query is empty: give the words to search for (-a query='...')"),
    (["-a", "query=the and of", "-a", "seeds=http://a.example/"],
     "crawlproj: -a query='the and of' has only stop words (the, and, of): they are on every "
     "page; give the words that say what you look for"),
    (["-a", "query=?! ... --", "-a", "seeds=http://a.example/"],
     "crawlproj: -a query='?! ... --' has no words, only punctuation: give the words to "
     "search for"),
    (["-a", "query=" + "jazz " * 300, "-a", "seeds=http://a.example/"],
     "crawlproj: -a query is 1500 characters; at most 1000"),
    (["-a", "query=jazz", "-a", "seeds=http://a.example/", "-a", "max_pages=0"],
     "crawlproj: -a max_pages must be a whole number of 1 or more, not '0'"),
    (["-a", "query=jazz", "-a", "seeds=http://a.example/", "-a", "max_pages=-3"],
     "crawlproj: -a max_pages must be a whole number of 1 or more, not '-3'"),
    (["-a", "query=jazz", "-a", "seeds=http://a.example/", "-a", "max_pages=2.5"],
     "crawlproj: -a max_pages must be a whole number of 1 or more, not '2.5'"),
    (["-a", "query=jazz", "-a", "seeds=http://a.example/", "-a", "max_pages=ten"],
     "crawlproj: -a max_pages must be a whole number of 1 or more, not 'ten'"),
    (["-a", "seeds=http://a.example/", "-a", "max_pages=5"],
     "crawlproj: -a max_pages is for the real-time search mode: give -a query='...' too"),
])
def test_unusable_arguments_exit_2_in_one_line(redis_url, tmp_path, args, said):
    run = crawl(redis_url, tmp_path, *args)
    assert run.returncode == 2, run.stderr[-3000:]
    assert one_line(run) == said
    assert redis_lib.Redis.from_url(redis_url).dbsize() == 0


def test_a_query_without_seeds_and_without_an_index_has_nowhere_to_start(redis_url, tmp_path):
    run = crawl(redis_url, tmp_path, "-a", "query=jazz", CRAWL_ID="nothing")
    assert run.returncode == 2, run.stderr[-3000:]
    where = tmp_path / "data" / "index" / "nothing"
    assert one_line(run) == (f"crawlproj: -a query='jazz' has nowhere to start: the index at "
                             f"{where} has no page matching it (or there is no index); give "
                             "-a seeds=... to start from")
    assert redis_lib.Redis.from_url(redis_url).dbsize() == 0
    assert not where.exists()


# -- real crawls of the topical simulated web ----------------------------------

TOPICAL = {"seed": 3, "hosts": 20, "pages": 400, "topics": 4, "page_bytes": 1500,
           "crawl_delay_fraction": 0.0, "robots_fraction": 0.0}
# one request at a time and no politeness wait: each fetch is the frontier's
# best URL at that moment (as bench/similarity_bench.py crawls)
ONE_AT_A_TIME = {"CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1, "FRONTIER_DELAY_FACTOR": 0,
                 "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0, "LOG_LEVEL": "INFO"}


def run_crawl(sw, redis_url, data, crawl_id, spargs: dict, settings: dict | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web"]
    for k, v in spargs.items():
        cmd += ["-a", f"{k}={v}"]
    for k, v in {**ONE_AT_A_TIME, **(settings or {})}.items():
        cmd += ["-s", f"{k}={v}"]
    env = sw.env()
    env.update(REDIS_URL=redis_url, CRAWL_ID=crawl_id, CRAWL_DATA_DIR=str(data),
               PYTHONUNBUFFERED="1")
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    sw.settle_log()
    return run


def pages_fetched(records) -> list[str]:
    return checks.arrival_order(records)


def printed(run) -> list[str]:
    """The result URLs the command printed, in order."""
    lines = run.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("results for "))
    return [ln.split()[2] for ln in lines[at + 1:] if ln.strip()]


@pytest.fixture(scope="module")
def topic(redis_server, tmp_path_factory):
    """The web, the query (the biggest topic but the start page's, so the
    crawl has to find it), its hot pages, a Redis server of the module's."""
    if not redis_server.alive:
        redis_server.restart()
    with redis_server.client() as c:
        c.flushall()
    web = SimWeb.generate(**TOPICAL)
    start = web.seeds(1)[0]
    start_topic = web.topic(web.node_of(start))
    t = max((t for t in range(TOPICAL["topics"]) if t != start_topic),
            key=lambda t: len(web.hot_pages(web.topic_query(t))))
    query = web.topic_query(t)
    return {"tmp": tmp_path_factory.mktemp("realtime"), "web": web, "start": start,
            "start_topic": start_topic, "query": query,
            "hot": {web.url(v) for v in web.hot_pages(query)}, "redis_url": redis_server.url}


@pytest.fixture(scope="module")
def topical(topic):
    """A real-time session from the start page, and a bfs crawl of the whole
    web from the same page."""
    out = dict(topic)
    tmp, web = out["tmp"], out["web"]
    out["data"] = tmp / "data"
    with SimWebServer(TOPICAL, log_path=str(tmp / "rt.jsonl")) as sw:
        out["run"] = run_crawl(sw, out["redis_url"], out["data"], "rt",
                               {"query": out["query"], "seeds": out["start"]})
        out["order"] = pages_fetched(sw.read_log())
        out["html"] = {checks.url_of(r) for r in sw.read_log()
                       if r["status"] == 200 and web.node_of(checks.url_of(r)) is not None}
    with SimWebServer(TOPICAL, log_path=str(tmp / "bfs.jsonl")) as sw:
        out["bfs_run"] = run_crawl(sw, out["redis_url"], tmp / "bfs-data", "bfs",
                                   {"seeds": out["start"]})
        out["bfs"] = pages_fetched(sw.read_log())
    return out


@pytest.mark.e2e
def test_it_reaches_the_hot_pages_before_bfs_with_the_same_budget(topical, tmp_path):
    assert topical["bfs_run"].returncode == 0, topical["bfs_run"].stderr[-3000:]
    hot, bfs = topical["hot"], topical["bfs"]
    assert len(hot) >= 100
    # a budget of as many fetches as there are hot pages, the stopping rule
    # off: the order alone is judged here (when the results stop improving
    # depends on when the first result page fills, tested below)
    budget = len(hot)
    with SimWebServer(TOPICAL, log_path=str(tmp_path / "web.jsonl")) as sw:
        run = run_crawl(sw, topical["redis_url"], tmp_path / "data", "rtbudget",
                        {"query": topical["query"], "seeds": topical["start"],
                         "max_pages": budget}, {"REALTIME_STABLE_PAGES": 0})
        order = pages_fetched(sw.read_log())
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"'finish_reason': '{MAX_PAGES}'" in run.stderr
    got, bfs_got = (sum(1 for u in o[:budget] if u in hot) for o in (order, bfs))
    # with the same number of pages, bfs fetched far fewer hot ones
    assert got >= 0.8 * len(hot), (got, len(hot), budget)
    assert bfs_got < 0.6 * got, (bfs_got, got, budget)
    need, bfs_need = (checks.fetches_to_reach(o, hot, 0.8) for o in (order, bfs))
    assert need <= 0.6 * bfs_need, (need, bfs_need)


@pytest.mark.e2e
def test_it_stops_by_itself_when_the_results_stop_improving(topical):
    run, order = topical["run"], topical["order"]
    assert f"'finish_reason': '{RESULTS_STABLE}'" in run.stderr, run.stderr[-3000:]
    # indexed in the worker's threads: an indexer process, a second late to
    # start, had it fetch 356-479 pages where it fetches 111-383
    assert "Indexer lock taken" in run.stderr and "indexer process" not in run.stderr
    # stopped with links left: bfs went on to fetch many more of the web
    assert len(order) < 0.85 * len(topical["bfs"]), (len(order), len(topical["bfs"]))
    # and the results it prints are the query's: each a hot page
    results = printed(run)
    assert len(results) == RESULTS
    assert set(results) <= topical["hot"]


@pytest.mark.e2e
def test_its_pages_and_results_are_searchable_in_the_crawls_index(topical):
    index = PageIndex(topical["data"] / "index" / "rt")
    searcher = index.searcher()
    # every HTML page the session fetched is in the index of crawl "rt"
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs)).hits
    keys = {searcher.doc(a)["key"][0] for _, a in hits}
    assert keys == {document_key(u) for u in topical["html"]}
    # what the command printed is what the index answers now
    found = Searcher(index).search(topical["query"], n=RESULTS)
    assert [h.url for h in found.results] == printed(topical["run"])


@pytest.mark.e2e
def test_without_seeds_it_starts_from_the_indexs_best_results(topical):
    """A second query on the same crawl: its session starts from what the
    index answers (pages the first session fetched), not from any seed."""
    web = topical["web"]
    query = web.topic_query(topical["start_topic"])
    index = PageIndex(topical["data"] / "index" / "rt")
    best = [h.url for h in Searcher(index).search(query, n=RESULTS).results]
    assert len(best) == RESULTS, best
    with SimWebServer(TOPICAL, log_path=str(topical["tmp"] / "second.jsonl")) as sw:
        run = run_crawl(sw, topical["redis_url"], topical["data"], "rt",
                        {"query": query, "max_pages": 15})
        order = pages_fetched(sw.read_log())
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"'seeds/accepted': {RESULTS}" in run.stderr, run.stderr[-3000:]
    assert order[0] in best, (order[:3], best)
    # its frontier is its own: the first session's crawl record is untouched
    with redis_lib.Redis.from_url(topical["redis_url"]) as r:
        names = {k.decode() for k in r.keys("*") if b".q-" in k}
    assert any(session_crawl_id("rt", query_words(query)) in n for n in names)
    assert any(session_crawl_id("rt", query_words(topical["query"])) in n for n in names)


@pytest.mark.e2e
def test_it_stops_at_max_pages(topic, tmp_path):
    max_pages = 40
    with SimWebServer(TOPICAL, log_path=str(tmp_path / "web.jsonl")) as sw:
        run = run_crawl(sw, topic["redis_url"], tmp_path / "data", "rtmax",
                        {"query": topic["query"], "seeds": topic["start"],
                         "max_pages": max_pages})
        order = pages_fetched(sw.read_log())
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"'finish_reason': '{MAX_PAGES}'" in run.stderr
    # no download starts after the max_pages-th page; one under way then may end
    assert max_pages <= len(order) <= max_pages + ONE_AT_A_TIME["CONCURRENT_REQUESTS"], len(order)
    assert len(printed(run)) == RESULTS
    assert os.path.isdir(tmp_path / "data" / "index" / "rtmax")


@pytest.mark.e2e
def test_its_pages_go_to_the_searched_crawls_indexer(topic, tmp_path):
    """A worker that may not write the index (INDEX_WRITER=False) leaves its
    documents to the indexer of the crawl it searches: on that crawl's
    hand-over list, none on the session's own."""
    from crawlproj.redis.keyspace import Keyspace
    from crawlproj.search.document import Document

    with SimWebServer(TOPICAL, log_path=str(tmp_path / "web.jsonl")) as sw:
        run = run_crawl(sw, topic["redis_url"], tmp_path / "data", "rtwriter",
                        {"query": topic["query"], "seeds": topic["start"], "max_pages": 12},
                        {"INDEX_WRITER": False})
        html = {checks.url_of(r) for r in sw.read_log() if r["status"] == 200
                and topic["web"].node_of(checks.url_of(r)) is not None}
    assert run.returncode == 0, run.stderr[-3000:]
    session = session_crawl_id("rtwriter", query_words(topic["query"]))
    with redis_lib.Redis.from_url(topic["redis_url"]) as r:
        waiting = r.lrange(Keyspace("rtwriter", 1).index_queue, 0, -1)
        assert r.exists(Keyspace(session, 1).index_queue) == 0
    assert {Document.unpack(d).url for d in waiting} == html
    assert not (tmp_path / "data" / "index").exists()
