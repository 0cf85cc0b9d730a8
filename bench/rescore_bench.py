"""How long the ranker's bulk priority rewrite takes (Frontier.rescore).

    .venv/bin/python bench/rescore_bench.py [--urls 1000000] [--hosts 10000]
        [--partitions 1]

Fills a fresh server's frontier with --urls queued URLs over --hosts hosts
(payloads as the web spider's requests are stored: URL, Referer, depth), then
gives every one a new score from a dict fingerprint -> rank, as the PageRank ranker
does, and reports the time of the rewrite, its throughput and the ranker
process's peak RSS. Target (issue #5): 1 million queued URLs in <= 10 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import redis
from scrapy import Request

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.frontier import codec
from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.redis.keyspace import Keyspace


def fill(f: Frontier, n: int, hosts: int, batch: int = 20_000) -> list[str]:
    rnd = random.Random(1)
    urls = []
    batches: dict[int, Batch] = {}
    for i in range(n):
        host = f"h{rnd.randrange(hosts):05d}.example"
        url = f"http://{host}/s{i % 7}/p{i}.html"
        urls.append(url)
        req = Request(url, headers={"Referer": f"http://{host}/"}, meta={"depth": 2})
        batches.setdefault(f.partition_of(host), Batch()).enqueue.append(
            f.entry(host, url, 2e10 + i, codec.encode(req)))
        if (i + 1) % batch == 0:
            f.sync(batches)
            batches = {}
    if batches:
        f.sync(batches)
    return urls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = spawn_server(port, tmp, appendonly=False)
        try:
            r = redis.Redis(port=port)
            f = Frontier(r, Keyspace.open(r, "bench", a.partitions))
            t0 = time.perf_counter()
            urls = fill(f, a.urls, a.hosts)
            t_fill = time.perf_counter() - t0
            # the ranker's new order, keyed by URL fingerprint as the link store is
            rank = {url_fingerprint(u): -random.random() for u in urls}

            def score(fps):
                return [rank[fp] for fp in fps]

            t0 = time.perf_counter()
            totals = f.rescore(score)
            t_rescore = time.perf_counter() - t0
            queued = f.status().queued
        finally:
            server.kill()
            server.wait()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine: {platform.node()} {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"filled {a.urls:,} URLs over {a.hosts:,} hosts, {a.partitions} partition(s) "
          f"in {t_fill:.1f} s; queued {queued:,}")
    print(f"rescore: {totals['urls']:,} URLs read, {totals['changed']:,} changed in "
          f"{t_rescore:.2f} s = {totals['urls'] / t_rescore:,.0f} URLs/s; "
          f"ranker peak RSS {rss_mb:,.0f} MB")


if __name__ == "__main__":
    main()
