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

    .venv/bin/python bench/search_bench.py --pages 100000 --src base25

`--src REV` (repeatable) runs crawlproj as of that commit beside this tree,
each in processes of its own (`git archive` of the package and settings):
the versions take turns batch by batch while indexing and query by query
while serving, so that a load that comes and goes hits them alike.
`--weights` also measures known-item rank 1 in-process (this tree only) at
each of the given SEARCH_PAGERANK_WEIGHTs, on the same index.

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


def _indexer_worker(docs_file: str, directory: str, batch: int, weights: str) -> None:
    """One code version's indexer, driven a step at a time over stdin (see
    product): a command per line, the seconds it took (or figures) per line."""
    import msgpack

    with open(docs_file, "rb") as f:
        docs = msgpack.unpackb(f.read(), raw=False)
    index = PageIndex(Path(directory), write=True)
    indexer = Indexer(index, None, batch)
    for line in sys.stdin:
        cmd, *arg = line.split()
        t = time.perf_counter()
        if cmd == "write":
            i = int(arg[0])
            indexer.write([Document(d["url"], d["title"], d["text"], d["fetched_at"],
                                    [tuple(x) for x in d["links"]]) for d in docs[i:i + batch]])
            out = time.perf_counter() - t
        elif cmd == "catchup":  # up to 10 batches of stale pages; -1 when none is left
            out = -1.0
            for _ in range(10):
                if not index.anchors.stale(1):
                    break
                indexer.write([])
                out = time.perf_counter() - t
        elif cmd == "rank":
            indexer.maybe_rank(force=True)
            out = time.perf_counter() - t
        else:  # close: documents, and known item at rank 1 in-process at each PageRank weight
            n = index.num_docs()
            index.close()
            known = {}
            if weights:
                from crawlproj.search.searcher import Ranking, Searcher

                reader = PageIndex(Path(directory))
                sample, _ = queries(docs, 2000)
                for w in weights.split(","):
                    s = Searcher(reader, Ranking(pagerank_weight=float(w)))
                    known[w] = sum(bool(r.results) and r.results[0].url == d["url"]
                                   for d in sample for r in [s.search(d["title"])]) / len(sample)
            print(json.dumps({"docs": n, "known": known}), flush=True)
            return
        print(out, flush=True)


class Version:
    """crawlproj as of one commit (or this tree, rev None), in processes of its own."""

    def __init__(self, rev: str | None, root: Path):
        self.rev = rev or "tree"
        self.env = dict(os.environ)
        self.cwd = ROOT
        if rev:
            src = root / f"src-{rev}"
            src.mkdir()
            archive = subprocess.run(["git", "archive", rev, "crawlproj", "settings", "middlewares",
                                      "scrapy.cfg"],
                                     cwd=ROOT, check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
            # `python -m` puts its working directory first on sys.path
            self.env["PYTHONPATH"], self.cwd = str(src), src
        self.directory = root / f"index-{self.rev}"
        self.seconds = defaultdict(float)

    def start_indexer(self, docs_file: Path, args):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--indexer-worker", str(docs_file),
             str(self.directory), str(args.batch), args.weights if self.rev == "tree" else ""],
            cwd=ROOT, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, cmd: str) -> str:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def start_ui(self):
        self.port = free_port()
        env = dict(self.env, CRAWLPROJ_INDEX_DIR=str(self.directory))
        self.ui = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(self.port)], cwd=self.cwd,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.ui.stdout.readline()  # "crawlproj search on ..."
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def get(self, q, **params):
        t = time.perf_counter()
        self.conn.request("GET", "/api/search?" + urlencode({"q": q, **params}))
        body = json.loads(self.conn.getresponse().read())
        if "error" in body:
            raise SystemExit(f"[{self.rev}] {q!r}: {body['error']}")
        return time.perf_counter() - t, body


def product(docs, args, root: Path):
    """Each version (this tree, and every --src) indexes the same pages and
    serves them; the versions take turns batch by batch and query by query,
    so that a load that comes and goes on the machine hits them alike."""
    import msgpack

    docs_file = root / "docs.msgpack"
    docs_file.write_bytes(msgpack.packb([{k: d[k] for k in ("url", "title", "text", "fetched_at", "links")}
                                         for d in docs], use_bin_type=True))
    versions = [Version(None, root)] + [Version(rev, root) for rev in args.src]
    for v in versions:
        v.start_indexer(docs_file, args)
    turn = 0
    for i in range(0, len(docs), args.batch):
        for v in versions[turn % len(versions):] + versions[:turn % len(versions)]:
            v.seconds["index"] += float(v.ask(f"write {i}"))
        turn += 1
    for phase in ("catchup", "rank"):
        left = list(versions)
        while left:
            for v in list(left):
                dt = float(v.ask(phase))
                if dt < 0 or phase == "rank":
                    left.remove(v)
                if dt > 0:
                    v.seconds[phase] += dt
    for v in versions:
        v.figures = json.loads(v.ask("close"))
        v.proc.wait()
        size = du(v.directory)
        n = v.figures["docs"]
        print(f"[{v.rev}] indexer: {len(docs) / v.seconds['index']:,.0f} pages/s ({v.seconds['index']:.1f} s "
              f"for {len(docs):,} pages, batches of {args.batch}); anchor text catch-up "
              f"{v.seconds['catchup']:.1f} s, PageRank {v.seconds['rank']:.1f} s; {n:,} documents, "
              f"{size / n:,.0f} bytes/page ({size / 2**20:,.0f} MiB)", flush=True)
        for w, share in v.figures["known"].items():
            print(f"[{v.rev}] known item at rank 1, in-process, SEARCH_PAGERANK_WEIGHT {w}: {share:.1%}",
                  flush=True)
    try:
        for v in versions:
            v.start_ui()
        known, words = queries(docs, args.queries)
        for d in known[:50]:  # warm the page cache and the searcher, as a running server is
            for v in versions:
                v.get(d["title"])
        lat = {v.rev: [] for v in versions}
        lat_words = {v.rev: [] for v in versions}
        first = dict.fromkeys(lat, 0)
        for d in known:
            for v in versions:
                dt, r = v.get(d["title"])
                lat[v.rev].append(dt)
                first[v.rev] += bool(r["results"]) and r["results"][0]["url"] == d["url"]
        for q in words:
            for v in versions:
                lat_words[v.rev].append(v.get(q)[0])
        for v in versions:
            a, b = lat[v.rev], lat_words[v.rev]
            print(f"[{v.rev}] HTTP /api/search: known-item p50 {statistics.median(a) * 1e3:.2f} ms "
                  f"p95 {pct(a, 95) * 1e3:.2f} ms; words p50 {statistics.median(b) * 1e3:.2f} ms "
                  f"p95 {pct(b, 95) * 1e3:.2f} ms; all p50 {statistics.median(a + b) * 1e3:.2f} ms "
                  f"p95 {pct(a + b, 95) * 1e3:.2f} ms; known item at rank 1: {first[v.rev] / len(known):.1%} "
                  f"of {len(known):,}", flush=True)
    finally:
        for v in versions:
            if getattr(v, "ui", None):
                v.ui.terminate()
                v.ui.wait()


def freshness(docs, args, root: Path, version: Version, crawl: str):
    import redis as redis_lib

    from crawlproj.redis.embedded import spawn_server
    from crawlproj.redis.keyspace import Keyspace
    from crawlproj.search.handover import HandOver

    port = free_port()
    server = spawn_server(port, root / "redis", appendonly=False)
    procs = []
    try:
        url = f"redis://127.0.0.1:{port}"
        r = redis_lib.Redis.from_url(url)
        ks = Keyspace.open(r, crawl)
        env = dict(version.env, REDIS_URL=url, CRAWL_ID=crawl, CRAWLPROJ_INDEX_DIR=str(root / crawl))
        procs.append(subprocess.Popen([sys.executable, "-m", "scrapy", "index"], cwd=version.cwd, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        while r.get(ks.indexer_lock) is None or not (root / crawl / "meta.json").exists():
            time.sleep(0.1)
        ui_port = free_port()
        ui = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(ui_port)], cwd=version.cwd,
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
        print(f"[{version.rev}] freshness: {len(lags):,} pages pushed at {args.rate:,.0f}/s; handed over -> searchable "
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
    ap.add_argument("--src", action="append", default=[], metavar="REV",
                    help="also run crawlproj as of this git commit, side by side (repeatable)")
    ap.add_argument("--weights", default="0,0.1,0.2,0.5",
                    help="known item at rank 1 in-process at these SEARCH_PAGERANK_WEIGHTs ('' for none)")
    ap.add_argument("--rounds", type=int, default=1, help="--freshness: runs of each version")
    ap.add_argument("--indexer-worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.indexer_worker:
        _indexer_worker(*args.indexer_worker[:2], int(args.indexer_worker[2]), args.indexer_worker[3])
        return
    t = time.perf_counter()
    docs = documents(args.pages, args.hosts)
    text_bytes = sum(len(d["text"].encode()) for d in docs) / len(docs)
    print(f"{len(docs):,} pages prepared in {time.perf_counter() - t:.1f} s, "
          f"{text_bytes:,.0f} bytes of text per page; {os.cpu_count()} CPUs", flush=True)
    root = Path(tempfile.mkdtemp(prefix="search-bench-"))
    try:
        if args.freshness:
            # the versions take turns, a whole run each, --rounds times
            versions = [Version(None, root)] + [Version(rev, root) for rev in args.src]
            for n in range(args.rounds):
                for v in versions:
                    freshness(docs, args, root, v, f"fresh-{v.rev}-{n}")
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
