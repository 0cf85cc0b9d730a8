"""The stores after real crawls of the simulated web.

Real `scrapy crawl web` workers, a real Redis server, HTTP to the simulated
web on loopback; what the stores hold is compared with the simulated web's
own request log and its model, never with the crawler's opinion of itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import networkx as nx
import pandas as pd
import pyarrow.parquet as pq
import pytest
import redis as redis_lib
from warcio.archiveiterator import ArchiveIterator

from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from crawlproj.stores.crawllog import log_files, read_lines
from crawlproj.stores.linkstore import node_id
from crawlproj.stores.pagemeta import PageMetaStore
from tests import pywbenv
from tests.e2e import ROOT, Workers

pytestmark = pytest.mark.e2e

# A few hundred pages with 404s, 500s, redirects, robots.txt exclusions and
# binary resources: every kind of response the stores must keep.
WEB = {"seed": 11, "hosts": 25, "pages": 300, "page_bytes": 1500, "p404": 0.03,
       "p_redirect": 0.03, "p500": 0.02, "p_binary": 0.05, "robots_fraction": 0.3,
       "latency_ms": [1, 3]}
FAST = {"FRONTIER_DELAY_FACTOR": 0, "RETRY_TIMES": 1}


def warc_records(directory: Path):
    """(url, status, type, payload) of every response/revisit record under directory;
    every record's digests are checked by warcio."""
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, check_digests="raise"):
                if rec.rec_type in ("response", "revisit"):
                    out.append((rec.rec_headers.get_header("WARC-Target-URI"),
                                int(rec.http_headers.get_statuscode()), rec.rec_type,
                                rec.content_stream().read()))
    return out


def scrapy_cmd(*args, data_dir, crawl_id, redis_url, timeout=120):
    env = dict(os.environ, CRAWL_DATA_DIR=str(data_dir), CRAWL_ID=crawl_id, REDIS_URL=redis_url)
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


# link-store segments of 4 pages: pages come in faster than segments are written
SEGMENT = 4


@pytest.fixture(scope="module")
def crawl(redis_server, tmp_path_factory):
    """One finished two-worker crawl, shared by the checks below."""
    if not redis_server.alive:
        redis_server.restart()
    with redis_server.client() as c:
        c.flushall()
    tmp = tmp_path_factory.mktemp("stores-e2e")
    with SimWebServer(WEB, log_path=str(tmp / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        workers = Workers(sw, redis_server.url, tmp, seeds, "stores", {
            **FAST, "WARC_MAX_SIZE": 120_000, "LINKSTORE_SEGMENT_PAGES": SEGMENT})
        workers.start(2)
        assert workers.wait() == [0, 0]
        logs = [workers.log(i) for i in range(2)]
        yield {"sw": sw, "web": sw.web, "records": sw.read_log(), "tmp": tmp,
               "data": tmp / "data", "logs": logs, "redis_url": redis_server.url,
               "seeds": seeds}


def test_warc_holds_exactly_the_fetched_responses(crawl):
    for log in crawl["logs"]:
        assert "'finish_reason': 'finished'" in log and "Traceback" not in log
        # what writing them cost the writer's thread, in the worker's stats
        cpu = re.search(r"'warc/thread_cpu_s': ([0-9.e-]+)", log)
        assert cpu and float(cpu.group(1)) > 0, log[-3000:]
    warc = crawl["data"] / "warc"
    assert not list(warc.glob("*.open"))  # every file closed cleanly
    files = list(warc.glob("*.warc.gz"))
    assert len(files) > 2  # rotated at WARC_MAX_SIZE
    recs = warc_records(warc)
    got = Counter((u, s) for u, s, _, _ in recs)
    want = Counter((checks.url_of(r), r["status"]) for r in crawl["records"])
    assert got == want
    assert {s for _, s in want} >= {200, 404, 500}
    assert any(300 <= s < 400 for _, s in want)
    # the stored payload is what the web served (its pages never change)
    web = crawl["web"]
    served = [(url, payload) for url, status, rtype, payload in recs
              if status == 200 and rtype == "response"]
    assert served
    for url, payload in served:
        host, path = url[7:].split("/", 1)
        assert payload == web.respond(host, "/" + path).body, url
    # warcio's own checker agrees
    run = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *map(str, files)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_cdxj_index(crawl, tmp_path):
    out = scrapy_cmd("cdx", data_dir=crawl["data"], crawl_id="stores",
                     redis_url=crawl["redis_url"])
    assert out.returncode == 0, out.stderr
    index = (crawl["data"] / "warc" / "index.cdxj").read_text().splitlines()
    assert index == sorted(index)
    assert len(index) == len(crawl["records"])
    # the index pywb builds itself from the same files, line for line
    files = sorted((crawl["data"] / "warc").glob("*.warc.gz"))
    assert index == pywbenv.own_index(pywbenv.collection(tmp_path, "c", files, files))
    line = json.loads(index[len(index) // 2].split(" ", 2)[2])
    with open(crawl["data"] / "warc" / line["filename"], "rb") as f:
        f.seek(int(line["offset"]))
        rec = next(iter(ArchiveIterator(f)))
        assert rec.rec_headers.get_header("WARC-Target-URI") == line["url"]


def test_exported_graph_has_exactly_the_edges_of_the_pages_fetched(crawl):
    out = crawl["tmp"] / "graph"
    run = scrapy_cmd("export-graph", str(out), "--json", data_dir=crawl["data"],
                     crawl_id="stores", redis_url=crawl["redis_url"])
    assert run.returncode == 0, run.stderr
    assert "export-graph" in scrapy_cmd("-h", data_dir=crawl["data"], crawl_id="stores",
                                        redis_url=crawl["redis_url"]).stdout
    web = crawl["web"]
    expected, crawled = Counter(), set()
    for r in crawl["records"]:
        node = web.node_of(checks.url_of(r))
        if r["status"] == 200 and r["path"] != "/robots.txt":
            crawled.add(node_id(checks.url_of(r)))
            if node is not None:
                # a page's links, once per target URL as the spider extracts
                # them (with the first non-empty anchor text)
                links: dict[str, str] = {}
                for url, anchor in web.links(node):
                    if not links.get(url):
                        links[url] = anchor
                for url, anchor in links.items():
                    expected[(node_id(checks.url_of(r)), node_id(url), anchor)] += 1
    edges = pq.read_table(out / "edges.parquet")
    got = Counter(zip(*(edges.column(c).to_pylist() for c in ("src", "dst", "anchor"))))
    assert got == expected
    urls = pq.read_table(out / "urls.parquet").to_pylist()
    assert {u["id"] for u in urls if u["crawled"]} == crawled
    assert {u["id"] for u in urls} >= {d for _, d, _ in expected}
    counts = json.loads(run.stdout)
    assert counts["edges"] == sum(expected.values())
    # segments were written as the working set grew
    r = redis_lib.Redis.from_url(crawl["redis_url"])
    keyspace = Keyspace.existing(r, "stores")
    assert keyspace.partitions == 1
    assert r.llen(keyspace.link_segments(0)) >= 2
    # and caught up with it: at close the working set holds less than a
    # segment (a compaction that finished after more pages came in started
    # the next)
    assert r.llen(keyspace.links(0)) < SEGMENT
    assert list((crawl["data"] / "links" / "stores").glob("*.edges.parquet"))
    # each segment written by a process of its own, which returns the
    # decoded pages' memory when it exits: never by the worker
    ran = [line.split("Link store compaction process ", 1)[1].split()[:4]
           for log in crawl["logs"] for line in log.splitlines()
           if "Link store compaction process " in line]
    assert ran and all(pid != parent for pid, _, _, parent in ran)
    written = sum(int(m) for log in crawl["logs"]
                  for m in re.findall(r"'stores/links/segments': (\d+)", log))
    assert written == r.llen(keyspace.link_segments(0))


def test_exported_graph_loads_in_pandas_duckdb_networkx(crawl):
    out = crawl["tmp"] / "graph2"
    assert scrapy_cmd("export-graph", str(out), data_dir=crawl["data"], crawl_id="stores",
                      redis_url=crawl["redis_url"]).returncode == 0
    edges = pd.read_parquet(out / "edges.parquet")
    urls = pd.read_parquet(out / "urls.parquet")
    assert list(edges.columns) == ["src", "dst", "anchor", "nofollow"] and len(edges) > 0
    g = nx.from_pandas_edgelist(edges, "src", "dst", create_using=nx.DiGraph)
    assert set(g.nodes) <= set(urls["id"])
    n = duckdb.sql(f"SELECT count(*) FROM '{out}/edges.parquet' e "
                   f"JOIN '{out}/urls.parquet' u ON e.dst = u.id").fetchall()[0][0]
    assert n == len(edges)


def test_page_metadata_agrees_with_the_web_log(crawl):
    r = redis_lib.Redis.from_url(crawl["redis_url"])
    store = PageMetaStore(r, Keyspace.existing(r, "stores"))
    by_url = defaultdict(list)
    for rec in crawl["records"]:
        by_url[checks.url_of(rec)].append(rec)
    assert sum(1 for _ in store.scan()) == len(by_url)
    for url, recs in by_url.items():
        recs.sort(key=lambda x: x["t0"])
        m = store.get(url)
        assert m is not None, url
        assert m.fetches == len(recs), url
        assert (m.status, m.length) == (recs[-1]["status"], recs[-1]["bytes"]), url
        assert m.changes == 0  # a static web
        # the crawler starts a fetch before the server sees it
        assert m.first_fetch <= recs[0]["t0"] + 0.001 and m.last_fetch <= recs[-1]["t0"] + 0.001
        assert (m.digest != "") == any(200 <= x["status"] < 300 for x in recs)


def test_crawl_log_and_report(crawl):
    paths = log_files(crawl["data"] / "logs", "stores")
    assert len(paths) == 2  # one per worker
    lines = list(read_lines(paths))
    answered = Counter((ln.url, ln.status) for ln in lines if ln.status > 0)
    assert answered == Counter((checks.url_of(r), r["status"]) for r in crawl["records"])
    excluded = [ln.url for ln in lines if ln.status == -9998]
    assert excluded and all(crawl["web"].is_disallowed(u) for u in excluded)
    # Heritrix's '-': no size without a response, no fetch time without a fetch
    assert all(ln.size is None and ln.fetched == "-" for ln in lines if ln.status == -9998)
    assert all(ln.size is not None and ln.fetched != "-" for ln in lines if ln.status > 0)
    assert all(re.fullmatch(r"#\d{3}", ln.thread) for ln in lines)
    robots = [ln for ln in lines if ln.url.endswith("/robots.txt")]
    assert robots and all(ln.hops == "P" for ln in robots)
    # a robots.txt line's via is the page that needed it, on the same host
    assert all(ln.via.startswith(ln.url[: -len("robots.txt")]) and ln.via != ln.url for ln in robots)
    run = scrapy_cmd("report", "--json", "--png", str(crawl["tmp"] / "png"),
                     data_dir=crawl["data"], crawl_id="stores", redis_url=crawl["redis_url"])
    assert run.returncode == 0, run.stderr
    rep = json.loads(run.stdout)
    docs = [r for r in crawl["records"] if r["path"] != "/robots.txt"]
    assert rep["outcomes"]["200 OK"] == sum(r["status"] == 200 for r in docs)
    assert rep["outcomes"]["404 Not Found"] == sum(r["status"] == 404 for r in docs)
    assert rep["outcomes"]["Excluded by robots.txt"] == len(excluded)
    assert rep["documents"] == sum(rep["size_bins"])
    assert rep["robots_fetches"] == sum(r["path"] == "/robots.txt" for r in crawl["records"])
    pngs = sorted(p.name for p in (crawl["tmp"] / "png").glob("*.png"))
    assert pngs == ["content_types.png", "document_sizes.png", "outcomes.png", "per_host.png"]
    text = scrapy_cmd("report", data_dir=crawl["data"], crawl_id="stores",
                      redis_url=crawl["redis_url"]).stdout
    assert "Outcome of download attempts" in text and "Document sizes" in text
