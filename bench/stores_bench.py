"""What the stores cost: bytes per edge and per URL, records per second, and
crawl throughput with the stores on and off.

    .venv/bin/python bench/stores_bench.py [--hosts 100 --pages 3000 --page-bytes 2000]
        [--micro-pages 20000] [--skip-crawl] [--json]

Three parts, each on a private Redis-protocol server (the embedded one's
configuration, crawlproj.redis.embedded.spawn_server) and the simulated web:

* micro: a synthetic crawl's worth of pages (links drawn from a SimWeb) into
  the link store and page metadata directly: bytes per edge in Redis (MEMORY
  USAGE of the working-set lists), in Parquet segments and in the exported
  graph; bytes per URL of page metadata; Redis round trips per page with
  batches of 32 pages (what group commit gives a loaded worker).
* warc: the WARC writer alone, records and MB per second (gzip per record),
  and its CPU time per page (request + response record, digests, CDXJ line).
* crawl: one `scrapy crawl web` worker on the simulated web, twice: all
  stores on (the default) and all off; pages per second from Scrapy's own
  start/finish times, and the stores' Redis batches per page from its stats.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis

from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import SimWeb
from crawlproj.simweb.testing import SimWebServer
from crawlproj.stores.exchange import Exchange
from crawlproj.stores.graph import export_graph
from crawlproj.stores.linkstore import LinkStore, encode_page
from crawlproj.stores.pagemeta import PageMetaStore
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import WarcWriter


def server(tmp: Path):
    port = free_port()
    proc = spawn_server(port, tmp / "redis", appendonly=False)
    return proc, f"redis://127.0.0.1:{port}/0"


def fake_exchange(url: str, body: bytes, status: int = 200):
    from scrapy.http import HtmlResponse, Request
    req = Request(url, headers={"User-Agent": "bench", "Accept": "text/html"})
    resp = HtmlResponse(url, status=status, body=body, request=req,
                        headers={"Content-Type": "text/html; charset=utf-8", "Server": "simweb"})
    t = time.time()
    return Exchange.capture(req, resp, t, t + 0.01)


def micro(args, tmp: Path) -> dict:
    proc, url = server(tmp)
    try:
        r = redis.Redis.from_url(url)
        web = SimWeb.generate(seed=5, hosts=args.hosts, pages=args.micro_pages, page_bytes=1000)
        keyspace = Keyspace.open(r, "bench", 1)
        links = LinkStore(r, keyspace, tmp / "segments", segment_pages=10**9)
        meta = PageMetaStore(r, keyspace)
        pages = [(web.url(n), web.links(n)) for n in range(args.micro_pages)]
        edges = sum(len(ls) for _, ls in pages)
        base = r.info("memory")["used_memory"]
        t0 = time.perf_counter()
        batch, batches = [], 0
        for src, ls in pages:
            value, _ = encode_page(src, time.time(), [{"url": u, "anchor": a} for u, a in ls])
            batch.append((links.partition_of(src), value))
            if len(batch) == 32:
                links.append(batch)
                batch, batches = [], batches + 1
        if batch:
            links.append(batch)
            batches += 1
        t_links = time.perf_counter() - t0
        redis_bytes = int(r.memory_usage(keyspace.links(0), samples=0))
        after_links = r.info("memory")["used_memory"]
        t0 = time.perf_counter()
        body = b"x" * 1000
        entries = []
        for src, _ in pages:
            entries.append(meta.entry(fake_exchange(src, body)))
            if len(entries) == 32:
                meta.write(entries)
                entries = []
        if entries:
            meta.write(entries)
        t_meta = time.perf_counter() - t0
        meta_bytes = r.info("memory")["used_memory"] - after_links
        t0 = time.perf_counter()
        links.compact(0, force=True)
        t_compact = time.perf_counter() - t0
        seg = links.segments(0)[0]
        seg_bytes = sum(os.path.getsize(f) for f in seg["files"].values())
        edge_seg = os.path.getsize(seg["files"]["edges"])
        out = export_graph(links, tmp / "graph")
        return {"pages": len(pages), "edges": edges,
                "redis_bytes_per_edge": round(redis_bytes / edges, 2),
                "redis_used_memory_per_edge": round((after_links - base) / edges, 2),
                "segment_bytes_per_edge": round(seg_bytes / edges, 2),
                "segment_edge_file_bytes_per_edge": round(edge_seg / edges, 2),
                "export_bytes_per_edge": round((out["edges_bytes"] + out["urls_bytes"]) / edges, 2),
                "export_edges_file_bytes_per_edge": round(out["edges_bytes"] / edges, 2),
                "pagemeta_bytes_per_url": round(meta_bytes / len(pages), 1),
                "link_pages_per_s": round(len(pages) / t_links),
                "meta_pages_per_s": round(len(pages) / t_meta),
                "compact_pages_per_s": round(len(pages) / t_compact),
                "round_trips_per_page_batch32": round(batches / len(pages), 4)}
    finally:
        proc.terminate()
        proc.wait()


def warc(args, tmp: Path) -> dict:
    rnd = random.Random(1)
    words = [("".join(rnd.choice("abcdefghij") for _ in range(6))).encode() for _ in range(500)]
    bodies = [b"<html>" + b" ".join(rnd.choice(words) for _ in range(args.page_bytes // 7)) + b"</html>"
              for _ in range(50)]
    exs = [fake_exchange(f"http://h{i % 50}.example/p{i}.html", bodies[i % 50])
           for i in range(args.warc_records)]
    w = WarcWriter(LocalStorage(tmp / "warc"), "bench", "bench:1:x", max_size=1 << 30)
    t0, c0 = time.perf_counter(), time.process_time()
    for ex in exs:
        w.write(ex)
    w.close()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    size = sum(p.stat().st_size for p in (tmp / "warc").glob("*.warc.gz"))
    raw = sum(len(e.body) for e in exs)
    return {"records": len(exs), "pages_per_s": round(len(exs) / dt),
            "cpu_us_per_page": round(1e6 * cpu / len(exs), 1),
            "body_mb_per_s": round(raw / dt / 1e6, 1), "warc_bytes_per_page": round(size / len(exs)),
            "body_bytes_per_page": round(raw / len(exs))}


def crawl(args, tmp: Path, stores: bool) -> dict:
    proc, url = server(tmp / ("on" if stores else "off"))
    # no Crawl-delay: the tail of a crawl would then measure politeness, not the stores
    spec = {"seed": 3, "hosts": args.hosts, "pages": args.pages, "page_bytes": args.page_bytes,
            "crawl_delay_fraction": 0}
    try:
        with SimWebServer(spec) as sw:
            seeds = tmp / "seeds.txt"
            seeds.write_text("\n".join(sw.web.seeds(3)) + "\n")
            env = sw.env()
            env.update(REDIS_URL=url, CRAWL_ID="bench", CRAWL_DATA_DIR=str(tmp / "data"))
            cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
                   "-s", "FRONTIER_DELAY_FACTOR=0", "-s", "LOG_LEVEL=INFO",
                   "-s", "CONCURRENT_REQUESTS=32", "-s", "CRAWL_SCOPE=any", "-s", "DEPTH_LIMIT=0"]
            if not stores:
                cmd += ["-s", "ITEM_PIPELINES={}", "-s",
                        'DOWNLOADER_MIDDLEWARES={"middlewares.record.RecordMiddleware": null}']
            run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            log = run.stderr + run.stdout
            elapsed = float(re.search(r"'elapsed_time_seconds': ([\d.]+)", log).group(1))
            pages = int(re.search(r"'downloader/response_count': (\d+)", log).group(1))

            def stat(name):
                m = re.search(rf"'{re.escape(name)}': (\d+)", log)
                return int(m.group(1)) if m else 0

            return {"stores": stores, "responses": pages, "seconds": round(elapsed, 2),
                    "responses_per_s": round(pages / elapsed, 1),
                    # the link store, page metadata and the index hand-over
                    # share one round trip per batch (crawlproj/stores/commit.py)
                    "stores_round_trips_per_response": round(stat("stores/redis_writes") / pages, 3),
                    "frontier_syncs_per_response": round(stat("frontier/redis_writes") / pages, 3)}
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp / "data", ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--pages", type=int, default=3000)
    p.add_argument("--page-bytes", type=int, default=2000)
    p.add_argument("--micro-pages", type=int, default=20000)
    p.add_argument("--warc-records", type=int, default=5000)
    p.add_argument("--skip-crawl", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stores-bench-"))
    try:
        out = {"micro": micro(args, tmp), "warc": warc(args, tmp)}
        if not args.skip_crawl:
            out["crawl"] = [crawl(args, tmp, True), crawl(args, tmp, False)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
