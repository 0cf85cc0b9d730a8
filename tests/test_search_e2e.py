"""The index and the search server after a real crawl of the simulated web.

Two `scrapy crawl web` workers on a real Redis server hand their pages over
to the crawl's one indexer; what the index holds is compared with the
simulated web's own request log and model. `scrapy ui` and `scrapy index`
run as the user runs them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from urllib.parse import urlencode

import pytest
import redis as redis_lib
import tantivy

from crawlproj.redis.embedded import free_port
from crawlproj.redis.keyspace import Keyspace
from crawlproj.search.document import document_key
from crawlproj.search.index import PageIndex
from crawlproj.search.indexer import IndexerLock
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import ROOT, Workers

pytestmark = pytest.mark.e2e

# Half the pages change their text every 3 s: the second crawl gets new versions.
WEB = {"seed": 5, "hosts": 20, "pages": 300, "page_bytes": 1500, "p404": 0.03, "p_redirect": 0.05,
       "p500": 0.02, "p_binary": 0.05, "latency_ms": [1, 3], "change_rate": 0.5, "change_period": 3.0}
FAST = {"FRONTIER_DELAY_FACTOR": 0, "RETRY_TIMES": 1}


def scrapy(*args, data_dir, redis_url, crawl_id="search", timeout=180, **env):
    e = dict(os.environ, CRAWL_DATA_DIR=str(data_dir), CRAWL_ID=crawl_id, REDIS_URL=redis_url, **env)
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=timeout)


def keys_of(directory) -> Counter:
    index = PageIndex(directory)
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs)).hits
    return Counter(searcher.doc(a)["key"][0] for _, a in hits)


@pytest.fixture(scope="module")
def crawl(redis_server, tmp_path_factory):
    """Two workers crawl the web; then the crawl's Redis state is deleted
    (the index stays) and a third worker crawls it all again: every page is
    fetched by two workers, half of them in a new version."""
    if not redis_server.alive:
        redis_server.restart()
    with redis_server.client() as c:
        c.flushall()
    tmp = tmp_path_factory.mktemp("search-e2e")
    with SimWebServer(WEB, log_path=str(tmp / "web.jsonl")) as sw:
        workers = Workers(sw, redis_server.url, tmp, sw.web.seeds(2), "search", FAST)
        started = time.time()
        workers.start(2)
        assert workers.wait() == [0, 0]
        first = keys_of(tmp / "data" / "index" / "search")
        run = scrapy("crawls", "delete", "search", "--yes", data_dir=tmp / "data", redis_url=redis_server.url)
        assert run.returncode == 0, run.stderr
        time.sleep(WEB["change_period"])  # a new version of every changing page
        workers.start(1)
        assert workers.wait() == [0, 0, 0]
        records = sw.read_log()
        web = sw.web
        # every HTML page the web served with 200 (not robots.txt, not binary
        # resources), and when it last served it
        html = [r for r in records if r["status"] == 200 and r["path"] != "/robots.txt"
                and web.node_of(checks.url_of(r)) is not None]
        pages = Counter(checks.url_of(r) for r in html)
        last = {}
        for r in sorted(html, key=lambda r: r["t0"]):
            last[checks.url_of(r)] = r
        yield {"tmp": tmp, "data": tmp / "data", "web": web, "pages": pages, "last": last,
               "first_keys": first, "redis_url": redis_server.url, "started": started,
               "logs": [workers.log(i) for i in range(3)]}


@pytest.fixture(scope="module")
def ui(crawl):
    port = free_port()
    env = dict(os.environ, CRAWL_DATA_DIR=str(crawl["data"]), CRAWL_ID="search")
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert f"127.0.0.1:{port}" in line, line + proc.stderr.read()
    yield {"port": port, "base": f"http://127.0.0.1:{port}", "proc": proc}
    proc.terminate()
    proc.wait(30)


def get(base, path, **params):
    url = base + path + ("?" + urlencode(params) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def test_every_fetched_page_is_indexed_once(crawl):
    for log in crawl["logs"]:
        assert "'finish_reason': 'finished'" in log and "Traceback" not in log
    keys = keys_of(crawl["data"] / "index" / "search")
    assert set(keys) == {document_key(u) for u in crawl["pages"]}
    assert set(keys.values()) == {1}
    # every page was fetched by two workers (one in each crawl), and is in it once
    assert set(crawl["pages"].values()) == {2}
    assert set(crawl["first_keys"]) == set(keys)


def test_the_index_is_written_by_a_process_of_the_workers_own(crawl):
    """Each crawl's index is written by an indexer process a worker started
    (not by the worker itself), and the workers' stats count what it wrote."""
    started = [pid for log in crawl["logs"]
               for pid in re.findall(r"Indexer lock taken \(\S+\): indexer process (\d+) writes", log)]
    assert len(started) >= 2  # one in each crawl at least
    # and each of them wrote, as a process of its own, its worker's pid beside its own
    for log in crawl["logs"]:
        worker_pid = re.search(r"Frontier opened: .* worker [^:]+:(\d+):", log).group(1)
        for pid in re.findall(r"Indexer process (\d+) of worker " + worker_pid, log):
            assert pid != worker_pid and pid in started
    written = sum(int(m) for log in crawl["logs"] for m in re.findall(r"'index/written': (\d+)", log))
    assert written >= len(crawl["pages"])


def test_a_page_fetched_again_shows_its_new_text(crawl):
    from crawlproj.extract import extract_page

    web = crawl["web"]
    index = PageIndex(crawl["data"] / "index" / "search")
    searcher = index.searcher()
    changing = 0   # pages whose text differs between the two crawls' fetches
    for url, rec in crawl["last"].items():
        node = web.node_of(url)
        hits = searcher.search(tantivy.Query.term_query(index.index.schema, "key", document_key(url)), 1).hits
        text = searcher.doc(hits[0][1])["text"][0]
        served = {extract_page(web.render(node, t), url, "utf-8").text for t in (rec["t0"], rec["t1"])}
        assert text in served, url
        changing += web.version(node, rec["t0"]) != web.version(node, rec["t0"] - WEB["change_period"])
    # so that the check above tells the two fetches apart for many pages
    assert changing > 0.2 * len(crawl["last"])
    with redis_lib.Redis.from_url(crawl["redis_url"]) as r:
        ks = Keyspace.found(r, "search")
        assert r.llen(ks.index_queue) == 0 and r.get(ks.indexer_lock) is None


def test_every_fetched_page_is_found_by_its_title(crawl, ui):
    web, first, missing = crawl["web"], 0, []
    for url in crawl["pages"]:
        title = web.title(web.node_of(url))
        status, _, body = get(ui["base"], "/api/search", q=title, n=10, per_host=0)
        assert status == 200, body
        urls = [r["url"] for r in json.loads(body)["results"]]
        first += bool(urls) and urls[0] == url
        if url not in urls:
            missing.append(url)
    assert missing == []
    assert first >= 0.95 * len(crawl["pages"])


def test_the_api_answers_as_documented(crawl, ui):
    web = crawl["web"]
    url = next(iter(crawl["pages"]))
    title = web.title(web.node_of(url))
    status, headers, body = get(ui["base"], "/api/search", q=title.split()[0], n=3, offset=0)
    assert status == 200 and headers["content-type"].startswith("application/json")
    r = json.loads(body)
    assert set(r) == {"query", "total", "took_ms", "results"} and r["query"] == title.split()[0]
    assert r["total"] >= 1 and 1 <= len(r["results"]) <= 3
    for hit in r["results"]:
        assert set(hit) == {"url", "title", "snippet", "score", "fetched_at"}
        # a fetch of this crawl: after its workers started, before now
        assert crawl["started"] <= hit["fetched_at"] <= time.time()
    scores = [h["score"] for h in r["results"]]
    assert scores == sorted(scores, reverse=True)
    for q, code, says in [("", 400, "empty query"), ("x" * 10_000, 400, "too long"),
                          ("fox", 400, None)]:
        if says is None:
            status, _, body = get(ui["base"], "/api/search", q=q, n="ten")
            assert status == 400 and "n must be a whole number" in json.loads(body)["error"]
            continue
        status, _, body = get(ui["base"], "/api/search", q=q)
        assert status == code and says in json.loads(body)["error"]
    assert get(ui["base"], "/no/such/page")[0] == 404
    assert ui["proc"].poll() is None  # still serving


def test_the_search_page(crawl, ui):
    web = crawl["web"]
    word = web.title(web.node_of(next(iter(crawl["pages"])))).split()[0]
    status, headers, page = get(ui["base"], "/")
    assert status == 200 and 'name="q"' in page and "Query syntax" in page
    status, headers, page = get(ui["base"], "/", q=word, n=2)
    assert status == 200 and "<mark>" + word + "</mark>" in page and "fetched " in page
    assert "script-src" not in headers["content-security-policy"]  # no script may run
    status, _, page = get(ui["base"], "/", q='<script>alert(1)</script>')
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    status, _, page = get(ui["base"], "/", q="zzzznotaword")
    assert status == 200 and "No pages match" in page


def test_a_second_server_on_the_port_is_refused(crawl, ui):
    run = scrapy("ui", "--port", str(ui["port"]), data_dir=crawl["data"], redis_url=crawl["redis_url"])
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith(f"crawlproj: cannot listen on 127.0.0.1:{ui['port']}")


def test_rebuild_from_the_warc_files_alone_and_export(crawl, tmp_path):
    before = keys_of(crawl["data"] / "index" / "search")
    # while the indexer lock is held, a rebuild is refused
    with redis_lib.Redis.from_url(crawl["redis_url"]) as r:
        lock = IndexerLock(r, Keyspace("search", 1), ttl=30)
        assert lock.hold()
        try:
            run = scrapy("index", "--rebuild", data_dir=crawl["data"], redis_url=crawl["redis_url"])
            assert run.returncode == 2 and "before a rebuild" in run.stderr
        finally:
            lock.release()
    run = scrapy("index", "--rebuild", data_dir=crawl["data"], redis_url=crawl["redis_url"])
    assert run.returncode == 0, run.stderr
    assert keys_of(crawl["data"] / "index" / "search") == before
    out = tmp_path / "bulk.ndjson"
    run = scrapy("index", "--export", str(out), data_dir=crawl["data"], redis_url=crawl["redis_url"])
    assert run.returncode == 0, run.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * len(before)
    assert {json.loads(x)["index"]["_id"] for x in lines[0::2]} == set(before)
