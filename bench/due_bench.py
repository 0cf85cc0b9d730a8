"""The DUE: Redis memory per URL and URL-seen checks per second, side by side
with scrapy-redis's dupefilter, on the same URLs and the same server.

    .venv/bin/python bench/due_bench.py [--sizes 1000000,10000000]
        [--throughput 200000] [--rounds 3] [--probes 2000000] [--out FILE.json]

A fresh server (crawlproj.redis.embedded.spawn_server: the embedded server's
configuration, set-max-intset-entries 4096; no AOF, so that memory and speed
are the data structures' own) on 127.0.0.1. The URLs are generated, realistic
in shape (100,000 hosts, paths, a query), all distinct, the same for every
contender.

memory  For each size N and each structure, on an emptied server: insert N
        URLs, then used_memory (INFO memory) minus its value before, per URL;
        MEMORY USAGE summed over the structure's keys is reported beside it.
        * exact: crawlproj.due, DUE_MODE=exact, 64-bit fingerprints of the
          canonical URLs, inserted in batches of 10,000 (one EVALSHA each);
        * bloom: DUE_MODE=bloom, DUE_BLOOM_CAPACITY=N, error rate 1e-7; its
          false-positive rate is measured twice: from the filter itself (the
          fill of every block, read back from Redis, gives the rate a new URL
          meets: mean over blocks of fill^k) and by testing --probes URLs never
          inserted (test only, nothing marked);
        * scrapy-redis: scrapy_redis.dupefilter.RFPDupeFilter's set of
          fingerprints (its own request_fingerprint of each URL: 40-character
          SHA1 hex), loaded with SADD of 10,000 members per command: the set's
          content is what request_seen() would have made of the same URLs, one
          round trip per URL, which at 10M URLs would take hours.
        * exact-128 (first size only): DUE_FINGERPRINT_BITS=128;
        * bloom-1e-4 (first size only): error rate 1e-4, where --probes find
          enough false positives to check the rate read from the blocks.
throughput  On --throughput URLs, --rounds rounds alternating the contenders,
        medians reported; server CPU time from /proc beside the wall time:
        * scrapy-redis request_seen(request), one per URL (its fingerprint + one
          SADD round trip), on a fresh key: first all new, then all seen;
        * crawlproj RedisDupeFilter.request_seen(request), one per URL: the same
          interface, canonicalisation and a script call per URL;
        * crawlproj RedisDupeFilter.urls_seen(batch of 10,000 URLs): the batched
          path the frontier uses (canonicalise, fingerprint, one round trip);
        * fingerprint checks: URLSeen.check of precomputed fingerprints in batches
          of 10,000: the server's side of the test, new and seen; exact mode
          also from two client threads, so that the server is never idle while
          a client encodes its next batch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis
from scrapy import Request
from scrapy_redis.dupefilter import RFPDupeFilter

from crawlproj.due import bloom
from crawlproj.due.dupefilter import RedisDupeFilter
from crawlproj.due.urlseen import DueConfig, URLSeen
from crawlproj.redis.embedded import find_server_binary, free_port, spawn_server
from crawlproj.redis.keyspace import Keyspace

SECTIONS = ["news", "sport", "blog", "shop", "wiki", "forum", "docs", "about",
            "products", "category/books", "category/music", "archive/2019", "archive/2020",
            "people", "events", "search"]
BATCH = 10_000


def url(i: int) -> str:
    host = (i * 2654435761) % 100_003
    return (f"http://www.site{host}.example.com/{SECTIONS[i % 16]}/item-{i}.html"
            f"?page={i % 13}&ref=r{i % 7}")


def urls(start: int, n: int):
    return (url(i) for i in range(start, start + n))


class Server:
    def __init__(self, directory: Path):
        self.port = free_port()
        self.proc = spawn_server(self.port, directory, appendonly=False)
        self.r = redis.Redis(host="127.0.0.1", port=self.port)
        self.r.config_set("save", "")

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def used(self) -> int:
        return int(self.r.info("memory")["used_memory"])

    def empty(self):
        self.r.flushall()
        self.r.script_flush()
        time.sleep(0.2)  # lazy frees

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def memory_usage(r, pattern: str) -> int:
    total = 0
    for key in r.scan_iter(pattern, count=10_000):
        total += r.memory_usage(key, samples=0) or 0
    return total


def due_for(r, crawl: str, **config) -> URLSeen:
    return URLSeen(r, Keyspace.open(r, crawl, 1), DueConfig(**config))


# -- memory ------------------------------------------------------------------------------

def fill_due(due: URLSeen, n: int) -> dict:
    t0, fps = time.perf_counter(), []
    check_time = 0.0
    for i in range(0, n, BATCH):
        fps = [due.fingerprint(u) for u in urls(i, min(BATCH, n - i))]
        t = time.perf_counter()
        due.check({0: fps})
        check_time += time.perf_counter() - t
    return {"seconds": time.perf_counter() - t0, "check_seconds": check_time}


def bloom_rates(server: Server, due: URLSeen, n: int, probes: int) -> dict:
    """The filter's false-positive rate, from its blocks and from probes."""
    r, c = server.r, due.config
    layer = bloom.layer(c.capacity, c.error_rate)
    fills = []
    for key in sorted(r.scan_iter(due.keyspace.bloom_pattern(0, 0))):
        data = r.get(key)
        for off in range(0, len(data), bloom.BLOCK_BITS // 8):
            block = data[off:off + bloom.BLOCK_BITS // 8]
            fills.append(int.from_bytes(block, "big").bit_count() / bloom.BLOCK_BITS)
    from_blocks = bloom.measured_rate(fills, layer.k)
    hits, t0 = 0, time.perf_counter()
    start = 10 * n + 1_000_000_000  # URLs never inserted
    for i in range(0, probes, BATCH):
        fps = [due.fingerprint(u) for u in urls(start + i, min(BATCH, probes - i))]
        hits += sum(not new for new in due.check({0: fps}, mark=False)[0])
    return {"k": layer.k, "bits_per_url_configured": layer.bits_per_url,
            "mean_fill": sum(fills) / len(fills), "rate_from_blocks": from_blocks,
            "probes": probes, "probe_false_positives": hits,
            "probe_rate": hits / probes if probes else None,
            "probe_seconds": time.perf_counter() - t0}


def fill_scrapy_redis(r, n: int) -> dict:
    df = RFPDupeFilter(r, "sr:dupefilter")
    t0 = time.perf_counter()
    for i in range(0, n, BATCH):
        members = [df.request_fingerprint(SimpleNamespace(method="GET", url=u, body=b""))
                   for u in urls(i, min(BATCH, n - i))]
        r.sadd(df.key, *members)
    assert r.scard(df.key) == n
    return {"seconds": time.perf_counter() - t0}


def memory(server: Server, sizes: list[int], probes: int) -> list[dict]:
    out = []
    for idx, n in enumerate(sizes):
        contenders = [("exact", dict(mode="exact")),
                      ("bloom", dict(mode="bloom", capacity=n, error_rate=1e-7)),
                      ("scrapy-redis", None)]
        if idx == 0:
            contenders.append(("exact-128", dict(mode="exact", bits=128)))
            # at a rate that probes can measure: does the block estimate hold?
            contenders.append(("bloom-1e-4", dict(mode="bloom", capacity=n, error_rate=1e-4)))
        for name, config in contenders:
            server.empty()
            before = server.used()
            row = {"urls": n, "structure": name}
            if config is None:
                row.update(fill_scrapy_redis(server.r, n))
                pattern = "sr:*"
            else:
                crawl = "b" if name.startswith("bloom") else "e"
                due = due_for(server.r, crawl, **config)
                row.update(fill_due(due, n))
                pattern = due.keyspace.partitions_pattern()
                row["due_stats"] = due.stats()
            row["used_memory_delta"] = server.used() - before
            row["bytes_per_url"] = row["used_memory_delta"] / n
            row["memory_usage_sum"] = memory_usage(server.r, pattern)
            row["memory_usage_per_url"] = row["memory_usage_sum"] / n
            if name == "exact":
                encodings = {}
                sizes_ = []
                for key in server.r.scan_iter(due.keyspace.seen_pattern(0), count=10_000):
                    enc = server.r.object("encoding", key).decode()
                    encodings[enc] = encodings.get(enc, 0) + 1
                    sizes_.append(server.r.scard(key))
                row["encodings"] = encodings
                row["bucket_sizes"] = {"min": min(sizes_), "mean": sum(sizes_) / len(sizes_),
                                       "max": max(sizes_)}
            if name.startswith("bloom"):
                row["false_positives"] = bloom_rates(server, due, n, probes)
            print(json.dumps(row), flush=True)
            out.append(row)
    server.empty()
    return out


# -- throughput ------------------------------------------------------------------------

def timed(server: Server, fn) -> dict:
    cpu, t = server.cpu(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    return {"wall": wall, "server_cpu": server.cpu() - cpu}


def throughput(server: Server, n: int, rounds: int) -> dict:
    url_list = list(urls(0, n))
    requests = [Request(u) for u in url_list]
    results: dict[str, list[dict]] = {}

    def record(name, m):
        results.setdefault(name, []).append(m)

    for rnd in range(rounds):
        server.empty()
        # scrapy-redis: one SADD round trip per request
        sr = RFPDupeFilter(server.r, f"sr:{rnd}")
        record("scrapy-redis request_seen, new", timed(server, lambda: [sr.request_seen(q) for q in requests]))
        record("scrapy-redis request_seen, seen", timed(server, lambda: [sr.request_seen(q) for q in requests]))

        # crawlproj's dupefilter through Scrapy's interface: one call per request
        df = RedisDupeFilter(due_for(server.r, f"one{rnd}"))
        record("crawlproj request_seen, new", timed(server, lambda: [df.request_seen(q) for q in requests]))
        record("crawlproj request_seen, seen", timed(server, lambda: [df.request_seen(q) for q in requests]))

        # batched: what the frontier does per page of links, here 10,000 a call
        df = RedisDupeFilter(due_for(server.r, f"batch{rnd}"))

        def batched():
            for i in range(0, n, BATCH):
                df.urls_seen(url_list[i:i + BATCH])
        record("crawlproj urls_seen batched, new", timed(server, batched))
        record("crawlproj urls_seen batched, seen", timed(server, batched))

        # the fingerprint checks alone (fingerprints computed beforehand)
        for mode in ("exact", "bloom"):
            due = due_for(server.r, f"fp{mode}{rnd}", mode=mode, capacity=n, error_rate=1e-7)
            fps = [due.fingerprint(u) for u in url_list]

            def checks():
                for i in range(0, n, BATCH):
                    due.check({0: fps[i:i + BATCH]})
            record(f"fingerprint checks ({mode}), new", timed(server, checks))
            record(f"fingerprint checks ({mode}), seen", timed(server, checks))
            if mode == "exact":
                # two clients: one builds its next batch while the server answers
                # the other's (the server is one thread either way)
                due2 = due_for(server.r, f"fp2{rnd}", mode=mode)
                fps2 = [due2.fingerprint(u) for u in url_list]

                def two_clients():
                    halves = [fps2[: n // 2], fps2[n // 2:]]
                    threads = [threading.Thread(target=lambda h=h: [
                        due2.check({0: h[i:i + BATCH]}) for i in range(0, len(h), BATCH)])
                        for h in halves]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                record("fingerprint checks (exact, 2 clients), new", timed(server, two_clients))
                record("fingerprint checks (exact, 2 clients), seen", timed(server, two_clients))
        print(f"throughput round {rnd + 1}/{rounds} done", flush=True)

    summary = {}
    for name, ms in results.items():
        wall = statistics.median(m["wall"] for m in ms)
        cpu = statistics.median(m["server_cpu"] for m in ms)
        summary[name] = {"per_second": n / wall, "wall_us": wall / n * 1e6,
                         "server_cpu_us": cpu / n * 1e6, "rounds": len(ms)}
        print(f"{name:40s} {n / wall:12,.0f}/s  server CPU {cpu / n * 1e6:6.2f} us/URL",
              flush=True)
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--throughput", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--probes", type=int, default=2_000_000)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip()
    binary = find_server_binary()
    info = {"python": platform.python_version(), "cpus": os.cpu_count(), "rev": rev,
            "server": subprocess.run([binary, "--version"], capture_output=True,
                                     text=True).stdout.strip(),
            "load_before": os.getloadavg(), "argv": sys.argv[1:]}
    print(json.dumps(info), flush=True)
    with tempfile.TemporaryDirectory(prefix="due-bench-") as tmp:
        server = Server(Path(tmp))
        try:
            result = {"info": info}
            if args.throughput:
                result["throughput"] = throughput(server, args.throughput, args.rounds)
            if not args.skip_memory:
                result["memory"] = memory(server, sizes, args.probes)
            result["info"]["load_after"] = os.getloadavg()
        finally:
            server.stop()
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
