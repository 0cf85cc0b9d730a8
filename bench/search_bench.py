"""The crawl's full-text index: the engine choice, then the product.

`--compare`: two embedded full-text engines side by side, tantivy (Rust,
through the `tantivy` package) and SQLite's FTS5 (in Python's own sqlite3),
on the same documents: pages of the simulated web,
rendered and extracted exactly as the crawler does (crawlproj.extract), with
the anchor texts of the links that point to each page. Measured: indexing
pages/s (one writer, commits every --batch pages), query latency p50/p95 of
the engine call alone (top 10 with the total count; known-item queries, the
title of a random page, and one- and two-word queries drawn from the
vocabulary), index bytes per page, and known-item rank 1.

    .venv/bin/python bench/search_bench.py --compare --pages 100000

Default: crawlproj's own index on the same pages. The indexer
(crawlproj.search.indexer.Indexer.write, batches of INDEX_BATCH, anchor
store and commits included) writes them; `scrapy ui` serves them, and the
queries go through HTTP (one keep-alive connection, GET /api/search): p50 /
p95 of the whole round trip, known-item search (a page's title as the query:
is the page the first result?), and index bytes per page.

    .venv/bin/python bench/search_bench.py --pages 100000

`--freshness`: how soon a handed-over page is searchable. A real Redis
server, `scrapy index` (the crawl's indexer) and `scrapy ui` as processes;
documents pushed onto the hand-over list at --rate pages/s, as workers'
pipelines push them; each polled through HTTP, oldest first, until found
(the indexer takes the list in order, so they become visible in order).

    .venv/bin/python bench/search_bench.py --freshness --pages 6000 --rate 200

docs/search.md has the figures and the choices made from them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode

import tantivy

from crawlproj.extract import extract_page
from crawlproj.search.document import Document
from crawlproj.search.index import PageIndex
from crawlproj.search.indexer import Indexer
from crawlproj.simweb.model import WORDS, SimWeb

ROOT = Path(__file__).resolve().parent.parent


def documents(pages: int, hosts: int, seed: int = 1) -> list[dict]:
    web = SimWeb.generate(seed=seed, hosts=hosts, pages=pages)
    docs, anchors = [], defaultdict(list)
    for node in range(pages):
        url = web.url(node)
        e = extract_page(web.render(node), url, "utf-8")
        for target, anchor in e.links:
            anchors[target].append(anchor)
        docs.append({"url": url, "host": url.split("/")[2], "title": e.title, "text": e.text,
                     "fetched_at": 1.7e9 + node, "pagerank": 1.0, "links": e.links})
    for d in docs:
        d["anchors"] = " ".join(anchors.get(d["url"], ())[:50])
    return docs


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Tantivy:
    name = "tantivy"

    def __init__(self, path: Path):
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("url", stored=True, tokenizer_name="raw")
        sb.add_text_field("title", stored=True)
        sb.add_text_field("text", stored=True)
        sb.add_text_field("anchors", stored=False)
        sb.add_float_field("pagerank", stored=True, fast=True)
        sb.add_float_field("fetched_at", stored=True)
        path.mkdir()
        self.index = tantivy.Index(sb.build(), path=str(path))

    def add(self, docs, batch):
        w = self.index.writer(heap_size=256_000_000, num_threads=2)
        for i, d in enumerate(docs, 1):
            w.delete_documents_by_term("url", d["url"])
            w.add_document(tantivy.Document(url=d["url"], title=d["title"], text=d["text"],
                                            anchors=d["anchors"], pagerank=d["pagerank"],
                                            fetched_at=d["fetched_at"]))
            if i % batch == 0:
                w.commit()
        w.commit()
        w.wait_merging_threads()
        self.index.reload()

    def search(self, q):
        query = self.index.parse_query(q, ["title", "text", "anchors"],
                                       field_boosts={"title": 4.0, "anchors": 2.0},
                                       conjunction_by_default=True)
        s = self.index.searcher()
        r = s.search(query, 10, count=True, weight_by_field="pagerank")
        return r.count, [s.doc(a)["url"][0] for _, a in r.hits]


class Fts5:
    name = "sqlite-fts5"

    def __init__(self, path: Path):
        path.mkdir()
        self.db = sqlite3.connect(path / "index.sqlite3")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript("""
            CREATE TABLE docs(id INTEGER PRIMARY KEY, url TEXT UNIQUE, pagerank REAL, fetched_at REAL);
            CREATE VIRTUAL TABLE fts USING fts5(title, text, anchors, tokenize='unicode61');
        """)

    def add(self, docs, batch):
        db = self.db
        for i, d in enumerate(docs, 1):
            old = db.execute("SELECT id FROM docs WHERE url = ?", (d["url"],)).fetchone()
            if old:
                db.execute("DELETE FROM fts WHERE rowid = ?", old)
                db.execute("DELETE FROM docs WHERE id = ?", old)
            cur = db.execute("INSERT INTO docs(url, pagerank, fetched_at) VALUES (?, ?, ?)",
                             (d["url"], d["pagerank"], d["fetched_at"]))
            db.execute("INSERT INTO fts(rowid, title, text, anchors) VALUES (?, ?, ?, ?)",
                       (cur.lastrowid, d["title"], d["text"], d["anchors"]))
            if i % batch == 0:
                db.commit()
        db.commit()
        db.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        db.commit()

    def search(self, q):
        db = self.db
        total = db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (q,)).fetchone()[0]
        rows = db.execute(
            "SELECT docs.url FROM fts JOIN docs ON docs.id = fts.rowid WHERE fts MATCH ? "
            "ORDER BY bm25(fts, 4.0, 1.0, 2.0) * (1 + docs.pagerank) LIMIT 10", (q,)).fetchall()
        return total, [r[0] for r in rows]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def run(engine_cls, docs, args, root):
    path = root / engine_cls.name
    engine = engine_cls(path)
    t = time.perf_counter()
    engine.add(docs, args.batch)
    secs = time.perf_counter() - t
    rnd = random.Random(7)
    sample = rnd.sample(docs, min(args.queries, len(docs)))
    lat, hits1 = [], 0
    for d in sample:
        t = time.perf_counter()
        _, urls = engine.search(d["title"])
        lat.append(time.perf_counter() - t)
        hits1 += bool(urls) and urls[0] == d["url"]
    words = []
    for _ in range(args.queries):
        words.append(rnd.choice(WORDS) if rnd.random() < 0.5 else f"{rnd.choice(WORDS)} {rnd.choice(WORDS)}")
    lat_words = []
    for q in words:
        t = time.perf_counter()
        engine.search(q)
        lat_words.append(time.perf_counter() - t)
    size = du(path)
    return {"engine": engine_cls.name, "pages_per_s": len(docs) / secs, "index_s": secs,
            "bytes_per_page": size / len(docs),
            "known_p50_ms": statistics.median(lat) * 1e3, "known_p95_ms": pct(lat, 95) * 1e3,
            "words_p50_ms": statistics.median(lat_words) * 1e3,
            "words_p95_ms": pct(lat_words, 95) * 1e3,
            "known_item_rank1": hits1 / len(sample)}


def queries(docs, n, seed=7):
    rnd = random.Random(seed)
    known = rnd.sample(docs, min(n, len(docs)))
    words = [rnd.choice(WORDS) if rnd.random() < 0.5 else f"{rnd.choice(WORDS)} {rnd.choice(WORDS)}"
             for _ in range(n)]
    return known, words


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def product(docs, args, root: Path):
    directory = root / "index"
    index = PageIndex(directory, write=True)
    indexer = Indexer(index, None, args.batch)
    t = time.perf_counter()
    for i in range(0, len(docs), args.batch):
        indexer.write([Document(d["url"], d["title"], d["text"], d["fetched_at"], d["links"])
                       for d in docs[i:i + args.batch]])
    secs = time.perf_counter() - t
    t = time.perf_counter()
    while index.anchors.stale(1):
        indexer.write([])
    catch_up = time.perf_counter() - t
    t = time.perf_counter()
    indexer.maybe_rank(force=True)
    rank_s = time.perf_counter() - t
    n_docs = index.num_docs()
    index.close()
    size = du(directory)
    print(f"indexer: {len(docs) / secs:,.0f} pages/s ({secs:.1f} s for {len(docs):,} pages, batches of "
          f"{args.batch}); anchor text catch-up {catch_up:.1f} s, PageRank {rank_s:.1f} s; "
          f"{n_docs:,} documents, {size / n_docs:,.0f} bytes/page ({size / 2**20:,.0f} MiB)", flush=True)
    port = free_port()
    env = dict(os.environ, CRAWLPROJ_INDEX_DIR=str(directory))
    ui = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ui.stdout.readline()  # "crawlproj search on ..."
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def get(q, **params):
            t = time.perf_counter()
            conn.request("GET", "/api/search?" + urlencode({"q": q, **params}))
            body = conn.getresponse().read()
            return time.perf_counter() - t, json.loads(body)

        known, words = queries(docs, args.queries)
        for d in known[:50]:  # warm the page cache and the searcher, as a running server is
            get(d["title"])
        lat, first = [], 0
        for d in known:
            dt, r = get(d["title"])
            lat.append(dt)
            first += bool(r["results"]) and r["results"][0]["url"] == d["url"]
        lat_words = [get(q)[0] for q in words]
        both = lat + lat_words
        print(f"HTTP /api/search: known-item p50 {statistics.median(lat) * 1e3:.2f} ms "
              f"p95 {pct(lat, 95) * 1e3:.2f} ms; words p50 {statistics.median(lat_words) * 1e3:.2f} ms "
              f"p95 {pct(lat_words, 95) * 1e3:.2f} ms; all p50 {statistics.median(both) * 1e3:.2f} ms "
              f"p95 {pct(both, 95) * 1e3:.2f} ms; known item at rank 1: {first / len(known):.1%} "
              f"of {len(known):,}", flush=True)
    finally:
        ui.terminate()
        ui.wait()


def freshness(docs, args, root: Path):
    import redis as redis_lib

    from crawlproj.embedded import spawn_server
    from crawlproj.keyspace import Keyspace
    from crawlproj.search.handover import HandOver

    port = free_port()
    server = spawn_server(port, root / "redis", appendonly=False)
    procs = []
    try:
        url = f"redis://127.0.0.1:{port}"
        r = redis_lib.Redis.from_url(url)
        ks = Keyspace.open(r, "fresh")
        env = dict(os.environ, REDIS_URL=url, CRAWL_ID="fresh", CRAWLPROJ_INDEX_DIR=str(root / "fresh"))
        procs.append(subprocess.Popen([sys.executable, "-m", "scrapy", "index"], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        while r.get(ks.indexer_lock) is None or not (root / "fresh" / "meta.json").exists():
            time.sleep(0.1)
        ui_port = free_port()
        ui = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(ui_port)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(ui)
        ui.stdout.readline()
        conn = http.client.HTTPConnection("127.0.0.1", ui_port, timeout=30)
        handover = HandOver(r, ks)
        pushed: list[float] = []
        lags: list[float] = []

        def found(i):
            conn.request("GET", "/api/search?" + urlencode({"q": f"fresh{i}", "n": 1}))
            return json.loads(conn.getresponse().read())["total"] > 0

        start = time.monotonic()
        i = 0
        while len(lags) < len(docs):
            now = time.monotonic()
            while i < len(docs) and now - start >= i / args.rate:
                d = docs[i]
                handover.push([Document(f"http://fresh.example/{i}", f"fresh{i} {d['title']}", d["text"],
                                        time.time(), d["links"]).pack()])
                pushed.append(time.monotonic())
                i += 1
            if len(lags) < i and found(len(lags)):
                lags.append(time.monotonic() - pushed[len(lags)])
            else:
                time.sleep(0.005)
        print(f"freshness: {len(lags):,} pages pushed at {args.rate:,.0f}/s; handed over -> searchable "
              f"through HTTP: p50 {statistics.median(lags):.2f} s, p95 {pct(lags, 95):.2f} s, "
              f"max {max(lags):.2f} s", flush=True)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=1000, help="pages per commit")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--compare", action="store_true", help="tantivy against SQLite FTS5")
    ap.add_argument("--freshness", action="store_true", help="hand-over to searchable, through HTTP")
    ap.add_argument("--rate", type=float, default=200.0, help="--freshness: pages pushed per second")
    ap.add_argument("--engines", default="tantivy,fts5")
    args = ap.parse_args()
    t = time.perf_counter()
    docs = documents(args.pages, args.hosts)
    text_bytes = sum(len(d["text"].encode()) for d in docs) / len(docs)
    print(f"{len(docs):,} pages prepared in {time.perf_counter() - t:.1f} s, "
          f"{text_bytes:,.0f} bytes of text per page; {os.cpu_count()} CPUs", flush=True)
    root = Path(tempfile.mkdtemp(prefix="search-bench-"))
    try:
        if args.freshness:
            freshness(docs, args, root)
            return
        if not args.compare:
            product(docs, args, root)
            return
        for name in args.engines.split(","):
            r = run({"tantivy": Tantivy, "fts5": Fts5}[name], docs, args, root)
            print(f"{r['engine']:12s} index {r['pages_per_s']:8,.0f} pages/s ({r['index_s']:.1f} s)  "
                  f"{r['bytes_per_page']:7,.0f} B/page  known-item p50 {r['known_p50_ms']:.2f} ms "
                  f"p95 {r['known_p95_ms']:.2f} ms  words p50 {r['words_p50_ms']:.2f} ms "
                  f"p95 {r['words_p95_ms']:.2f} ms  rank-1 {r['known_item_rank1']:.1%}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
