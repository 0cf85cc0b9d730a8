"""The frontier alone: enqueue, lease + release, and Redis memory per queued URL.

    .venv/bin/python bench/frontier_bench.py [--urls 100000 --hosts 2000]
        [--batches 16,256,1024] [--lease-batches 1,32] [--leases 20000]
        [--dists zipf,uniform] [--no-aof] [--no-real-check] [--src HEAD]

crawlproj.frontier.frontier.Frontier against a fresh Redis-protocol server
(crawlproj.redis.embedded.spawn_server: the embedded server's configuration, AOF on
unless --no-aof), one partition, no Scrapy engine. The URLs are those of a
generated simulated web (real URL shapes and the web's host sizes: "zipf"), or
the same URLs dealt round-robin to the hosts ("uniform"). Each is queued as
the spider's link would be: a Request with callback parse, a Referer header
(Scrapy's RefererMiddleware sets it on every link before the scheduler sees
it) and meta depth (DepthMiddleware), through the scheduler's own admission
(crawlproj.frontier.admission.admit: URL filter, prioritizer score,
canonical URL, fingerprint, codec.encode). Unless --no-real-check, a short real
crawl first checks that these payloads look like the ones a real worker queues.

Phases, on a fresh crawl id each (after one unmeasured enqueue of all URLs,
so that the server's allocator is as warm for the first batch size as for
the others):
* admit: admission of every request (client CPU only: canonicalize,
  fingerprint, msgpack), URLs/s;
* enqueue: Frontier.sync with only enqueue entries, one call per batch of
  --batches URLs (one round trip each, as the scheduler sends them): URLs/s,
  and again with the same URLs (all duplicates: DUE test only); then, on a
  fresh crawl id, the same batches sent by --clients threads at once, each on
  its own connection (as many workers do): the shared frontier's enqueue rate,
  where one client's packing and waiting overlap another's script;
* memory: INFO used_memory delta over the enqueue of all URLs, per URL, and
  MEMORY USAGE summed over the key patterns (q:* back queues, seen:* DUE sets,
  the rest), with the back queues' encodings;
* lease+release: cycles of one sync that releases the hosts leased by the
  previous sync (delay 0, ok) and leases --lease-batches new ones, as a worker
  does; leases/s (each lease is later released) and the decode cost.
The Redis server's CPU (/proc) is reported per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the code under test (--src) and the helpers every bench shares
import msgpack
import redis
from crawl_bench import SRC, SRC_DESC, flush_sync, proc_cpu, scratch_server
from scrapy import Request

from crawlproj.frontier import codec
from crawlproj.frontier.admission import admit
from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.prioritizers import load_prioritizer
from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import SimWeb
from crawlproj.spiders.web import WebSpider


class _Crawler:
    """Just enough of a crawler for load_prioritizer (bfs reads request meta)."""

    def __init__(self):
        from scrapy.settings import Settings
        from scrapy.statscollectors import MemoryStatsCollector

        self.settings = Settings()
        self.stats = MemoryStatsCollector(self)
        self.spider = None


# ---------------------------------------------------------------------------
# The requests a spider queues
# ---------------------------------------------------------------------------

def spider_requests(web: SimWeb, spider, dist: str, n_hosts: int, limit: int) -> list[Request]:
    """One Request per page of the web as the web spider yields it after Scrapy's
    spider middlewares: Referer = the page it was found on, meta depth."""
    urls, referer, depth = [], {}, {}
    n = min(web.n_nodes, limit)
    for node in range(n):
        url = web.url(node)
        host, path = web.host_path(node)
        # the tree parent on the same host (page k hangs under (k-1)//8), else the root
        k = int(path.rsplit("p", 1)[1].split(".")[0]) if path.endswith(".html") else 0
        parent = f"http://{host}/" if k < 9 else f"http://{host}/s{((k - 1) // 8) % 5}/p{(k - 1) // 8}.html"
        d, kk = 1, k
        while kk > 0:
            kk = (kk - 1) // 8
            d += 1
        urls.append(url)
        referer[url] = parent
        depth[url] = d
    if dist == "uniform":
        # as many URLs, of the same shape, dealt round-robin to n_hosts equal hosts
        uni = []
        for i, url in enumerate(urls):
            host = f"u{i % n_hosts:05d}.example"
            k = i // n_hosts
            u = f"http://{host}/" if k == 0 else f"http://{host}/s{k % 5}/p{k}.html"
            referer[u], depth[u] = f"http://{host}/", depth[url]
            uni.append(u)
        urls = uni
    out = []
    for url in urls:
        out.append(Request(url, callback=spider.parse, headers={"Referer": referer[url]},
                           meta={"depth": depth[url]}))
    return out


def jsonable(x):
    if isinstance(x, bytes):
        return x.decode("latin-1")
    if isinstance(x, dict):
        return {jsonable(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def real_payloads(n_pages: int = 40) -> dict:
    """What a real worker queues: a short real crawl (scrapy crawl web, CLOSESPIDER),
    then the back queues' members read from Redis."""
    from crawlproj.simweb.testing import SimWebServer

    tmp = Path(tempfile.mkdtemp(prefix="payloads-"))
    port = free_port()
    proc = spawn_server(port, tmp / "redis", appendonly=False)
    try:
        with SimWebServer({"seed": 3, "hosts": 50, "pages": 2000, "page_bytes": 2000,
                           "crawl_delay_fraction": 0}) as sw:
            seeds = sw.web.seeds(3)
            (tmp / "seeds.txt").write_text("\n".join(seeds) + "\n")
            env = sw.env()
            env.update(REDIS_URL=f"redis://127.0.0.1:{port}/0", CRAWL_ID="payloads",
                       CRAWL_DATA_DIR=str(tmp / "data"))
            cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={tmp / 'seeds.txt'}",
                   "-s", f"CLOSESPIDER_PAGECOUNT={n_pages}", "-s", "FRONTIER_DELAY_FACTOR=0",
                   "-s", "CRAWL_SCOPE=any", "-s", "DEPTH_LIMIT=0", "-s", "LOG_LEVEL=WARNING"]
            env["PYTHONPATH"] = str(SRC)
            done = subprocess.run(cmd, cwd=SRC, env=env, timeout=300, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"payload check crawl failed: {done.stderr[-2000:]}")
        r = redis.Redis(port=port)
        sizes, keys, example = [], Counter(), None
        # the frontier keeps payloads in p:<host> hashes (fingerprint -> payload)
        # since 8206c2d; before that they were the q:<host> members themselves
        members = []
        keyspace = Keyspace.existing(r, "payloads")
        for key in r.scan_iter(match=keyspace.payloads_pattern(0), count=1000):
            members += r.hvals(key)
        if not members:
            for key in r.scan_iter(match=keyspace.queues_pattern(0), count=1000):
                members += r.zrange(key, 0, -1)
        for member in members:
            sizes.append(len(member))
            d = msgpack.unpackb(member, raw=False, strict_map_key=False)
            keys[tuple(sorted(d))] += 1
            if example is None or (len(member) > len(example[0]) and "headers" in d):
                example = (member, d)
        r.close()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"queued_payloads": len(sizes),
            "mean_bytes": round(sum(sizes) / max(len(sizes), 1), 1),
            "field_sets": {",".join(k): v for k, v in keys.most_common()},
            "example": jsonable(example[1]) if example else None}


# ---------------------------------------------------------------------------
# Memory by key pattern
# ---------------------------------------------------------------------------

def memory_by_pattern(r: redis.Redis, keyspace: Keyspace, partition: int) -> dict:
    """MEMORY USAGE (SAMPLES 0: exact) of every key of a partition, summed by
    kind: q:* (back queues), p:* (per-host payloads, if the frontier keeps
    them apart), seen:* (the DUE), and the rest; with their encodings."""
    groups, enc = Counter(), Counter()
    prefix = keyspace.prefix(partition)
    keys = list(r.scan_iter(match=keyspace.partition_pattern(partition), count=2000))
    pipe = r.pipeline(transaction=False)
    for k in keys:
        pipe.memory_usage(k, samples=0)
        pipe.object("encoding", k)
    replies = pipe.execute()
    for i, k in enumerate(keys):
        usage, encoding = replies[2 * i], replies[2 * i + 1]
        rest = k.decode()[len(prefix):]
        kind = rest.split(":", 1)[0] + ":*" if ":" in rest else "other"
        groups[kind] += usage or 0
        enc[f"{kind} {encoding.decode() if isinstance(encoding, bytes) else encoding}"] += 1
    return {"bytes": dict(groups), "key_encodings": dict(enc)}


# ---------------------------------------------------------------------------

def concurrent_enqueue(r, entries: list, b: int, clients: int, dist: str, expected: int) -> int:
    """URLs/s when `clients` threads, each with its own connection, enqueue the
    batches of one fresh crawl at once (batch i goes to thread i mod clients)."""
    flush_sync(r)
    conns = [redis.Redis(connection_pool=redis.ConnectionPool(**r.connection_pool.connection_kwargs))
             for _ in range(clients)]
    keyspace = Keyspace.open(r, f"fb-{dist}-{b}-c{clients}")
    frs = [Frontier(c, keyspace) for c in conns]
    chunks = [entries[i:i + b] for i in range(0, len(entries), b)]
    frs[0].sync({0: Batch()})  # the crawl's DUE set up once, not raced
    barrier = threading.Barrier(clients + 1)

    def work(k: int):
        barrier.wait()
        for chunk in chunks[k::clients]:
            frs[k].sync({0: Batch(enqueue=chunk)})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    added = int(r.hget(keyspace.stats(0), "enqueued") or 0)
    for c in conns:
        c.close()
    if added != expected:  # as many new URLs as one client found
        raise RuntimeError(f"{clients} clients enqueued {added} URLs, one client {expected}")
    return round(len(entries) / wall)


def run_dist(r, rproc, dist: str, requests: list[Request], spider, batches: list[int],
             lease_batches: list[int], n_leases: int, aof: bool, clients: int = 2) -> dict:
    out = {"dist": dist, "urls": len(requests)}
    hosts = Counter(req.url.split("/")[2] for req in requests)
    sizes = sorted(hosts.values(), reverse=True)
    out["hosts"] = len(hosts)
    out["urls_per_host"] = {"max": sizes[0], "median": sizes[len(sizes) // 2], "min": sizes[-1],
                            "hosts_over_256": sum(1 for s in sizes if s > 256),
                            "urls_in_hosts_over_256": sum(s for s in sizes if s > 256)}
    crawler = _Crawler()
    prioritizer = load_prioritizer("bfs", crawler)

    # admission: client CPU
    flush_sync(r)
    fr = Frontier(r, Keyspace.open(r, f"fb-{dist}-admit"))
    c0, t0 = time.process_time(), time.perf_counter()
    entries = [admit(fr, prioritizer, req, spider, 2083)[1] for req in requests]
    wall = time.perf_counter() - t0
    out["admit"] = {"urls_per_s": round(len(entries) / wall), "us_per_url": round(1e6 * wall / len(entries), 1),
                    "cpu_us_per_url": round(1e6 * (time.process_time() - c0) / len(entries), 1),
                    "mean_payload_bytes": round(sum(len(e[4]) for e in entries) / len(entries), 1),
                    "mean_url_chars": round(sum(len(q.url) for q in requests) / len(requests), 1)}
    payload_only = [codec.encode(req, spider) for req in requests[:2000]]
    out["admit"]["example_payload"] = jsonable(msgpack.unpackb(payload_only[-1], raw=False))
    # what admission spends its time on (same 5,000 requests each)
    from crawlproj.due.canonical import canonicalize
    from crawlproj.due.fingerprint import url_fingerprint
    from crawlproj.urls import host_of, refusal

    sample = requests[:5000]
    parts = {
        "refusal_check+host_of": lambda q: (refusal(q.url, 2083), host_of(q.url)),
        "canonicalize": lambda q: canonicalize(q.url),
        "fingerprint (canonicalize+mmh3)": lambda q: url_fingerprint(q.url),
        "prioritizer.score": lambda q: prioritizer.score(q),
        "codec.encode (to_dict+msgpack)": lambda q: codec.encode(q, spider),
    }
    out["admit"]["us_per_url_by_step"] = {}
    for name, fn in parts.items():
        t = time.perf_counter()
        for q in sample:
            fn(q)
        out["admit"]["us_per_url_by_step"][name] = round(1e6 * (time.perf_counter() - t) / len(sample), 1)
    # decoding a leased payload back into a Request (the scheduler does it per lease)
    t = time.perf_counter()
    for pl in payload_only:
        codec.decode(pl, spider)
    out["admit"]["decode_us_per_payload"] = round(1e6 * (time.perf_counter() - t) / len(payload_only), 1)

    # warm-up: the server's allocator gets the memory of one full enqueue once,
    # so that the first batch size measured does not pay for it alone
    flush_sync(r)
    warm = Frontier(r, Keyspace.open(r, f"fb-{dist}-warm"))
    for i in range(0, len(entries), 1024):
        warm.sync({0: Batch(enqueue=entries[i:i + 1024])})

    out["enqueue"] = []
    for b in batches:
        flush_sync(r)
        fr = Frontier(r, Keyspace.open(r, f"fb-{dist}-{b}"))
        mem0 = r.info("memory")["used_memory"]
        rc0, c0, t0 = proc_cpu(rproc.pid), time.process_time(), time.perf_counter()
        added = 0
        for i in range(0, len(entries), b):
            res = fr.sync({0: Batch(enqueue=entries[i:i + b])})
            added += res[0].added
        wall = time.perf_counter() - t0
        rcpu, ccpu = proc_cpu(rproc.pid) - rc0, time.process_time() - c0
        mem1 = r.info("memory")["used_memory"]
        # again: every URL is a duplicate now
        rc1, t1 = proc_cpu(rproc.pid), time.perf_counter()
        dups = 0
        for i in range(0, len(entries), b):
            dups += fr.sync({0: Batch(enqueue=entries[i:i + b])})[0].duplicates
        wall_d = time.perf_counter() - t1
        rcpu_d = proc_cpu(rproc.pid) - rc1
        row = {"batch": b, "added": added, "urls_per_s": round(len(entries) / wall),
               "round_trips": -(-len(entries) // b),
               "redis_cpu_us_per_url": round(1e6 * rcpu / len(entries), 2),
               "client_cpu_us_per_url": round(1e6 * ccpu / len(entries), 2),
               "duplicates": dups, "dup_urls_per_s": round(len(entries) / wall_d),
               "dup_redis_cpu_us_per_url": round(1e6 * rcpu_d / len(entries), 2)}
        if b == batches[-1] or len(batches) == 1:
            mem = memory_by_pattern(r, fr.keyspace, 0)
            n = len(entries)
            row["memory"] = {
                "used_memory_delta": mem1 - mem0,
                "bytes_per_url_used_memory": round((mem1 - mem0) / n, 1),
                "bytes_per_url_by_pattern": {k: round(v / n, 1) for k, v in mem["bytes"].items()},
                "key_encodings": mem["key_encodings"],
                "used_memory_dataset_bytes": r.info("memory").get("used_memory_dataset"),
            }
        if clients > 1:
            row[f"urls_per_s_{clients}_clients"] = concurrent_enqueue(r, entries, b, clients, dist, added)
        out["enqueue"].append(row)
        print(json.dumps({"dist": dist, "enqueue": row}), file=sys.stderr, flush=True)

    # lease + release cycles on the last enqueued frontier (all URLs queued)
    out["lease_release"] = []
    for lb in lease_batches:
        flush_sync(r)
        fr = Frontier(r, Keyspace.open(r, f"fb-{dist}-lease{lb}"))
        for i in range(0, len(entries), 1024):
            fr.sync({0: Batch(enqueue=entries[i:i + 1024])})
        held: list = []
        leased = released = syncs = 0
        rc0, c0, t0 = proc_cpu(rproc.pid), time.process_time(), time.perf_counter()
        while leased < n_leases:
            batch = Batch(release=[Release(h, tok, Host.OK, URL.DONE) for h, tok in held], lease=lb)
            res = fr.sync({0: batch})[0]
            syncs += 1
            released += len(held)
            held = [(x.host, x.token) for x in res.leased]
            leased += len(held)
            if not held and res.queued == 0:
                break
        fr.sync({0: Batch(release=[Release(h, tok, Host.OK, URL.DONE) for h, tok in held])})
        released += len(held)
        wall = time.perf_counter() - t0
        rcpu, ccpu = proc_cpu(rproc.pid) - rc0, time.process_time() - c0
        row = {"lease_batch": lb, "leased": leased, "released": released, "syncs": syncs,
               "leases_per_s": round(leased / wall), "syncs_per_s": round(syncs / wall),
               "redis_cpu_us_per_lease": round(1e6 * rcpu / max(leased, 1), 2),
               "client_cpu_us_per_lease": round(1e6 * ccpu / max(leased, 1), 2)}
        out["lease_release"].append(row)
        print(json.dumps({"dist": dist, "lease_release": row}), file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--urls", type=int, default=100000)
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--batches", default="16,256,1024", help="URLs per enqueue round trip")
    p.add_argument("--lease-batches", default="1,32", help="hosts leased (and released) per round trip")
    p.add_argument("--leases", type=int, default=20000, help="leases per lease+release phase")
    p.add_argument("--dists", default="zipf,uniform")
    p.add_argument("--clients", type=int, default=2,
                   help="client threads for the concurrent enqueue (1: skip it)")
    p.add_argument("--no-aof", action="store_true")
    p.add_argument("--no-real-check", action="store_true")
    p.add_argument("--src", default="HEAD", help="git revision to benchmark, or 'worktree'")
    a = p.parse_args()

    import scrapy

    head = {"machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
                       f"Scrapy {scrapy.__version__}, redis-py {redis.__version__}",
            "load_avg": " ".join(f"{x:.2f}" for x in os.getloadavg()), "argv": sys.argv,
            "code": SRC_DESC}
    print(json.dumps(head), flush=True)
    if not a.no_real_check:
        print(json.dumps({"real_crawl_payloads": real_payloads()}), flush=True)

    web = SimWeb.generate(seed=a.seed, hosts=a.hosts, pages=a.urls)
    spider = WebSpider()
    with scratch_server(aof=not a.no_aof, prefix="frontier-bench-") as (r, rproc):
        server = r.info("server")
        print(json.dumps({"server": f"{server.get('server_name', 'redis')} "
                                    f"{server.get('valkey_version') or server.get('redis_version')}",
                          "aof": not a.no_aof}), flush=True)
        for dist in a.dists.split(","):
            reqs = spider_requests(web, spider, dist, a.hosts, a.urls)
            res = run_dist(r, rproc, dist, reqs, spider,
                           [int(x) for x in a.batches.split(",")],
                           [int(x) for x in a.lease_batches.split(",")], a.leases, not a.no_aof,
                           a.clients)
            res["load_avg_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
