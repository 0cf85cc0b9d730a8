"""How far one Redis goes: the server's CPU and memory per crawled page, and the
frontier's work spread over a Redis Cluster.

    .venv/bin/python bench/scale_bench.py [--phases crawl,alone,frontier]
        [--hosts 300 --pages 6000 --stop-at 4000 --repeat 1]
        [--urls 100000 --url-hosts 2000 --clients 1,2,4,8 --frontier-repeat 1]
        [--due-urls 1000000] [--src HEAD] [--out FILE.json]

crawl     Real crawls of the simulated web (bench/crawl_bench.py's Bench: one
          web in its own process, one fresh server with the embedded server's
          configuration, AOF on; politeness off), interleaved: cp1 (the
          frontier alone, the stores off) and full1 (the default stack: every
          store, the content-seen test, the index hand-over), one worker each,
          stopped after --stop-at responses (CLOSESPIDER_PAGECOUNT) so that
          the frontier still holds queued URLs when its keys are measured.
          Per crawled page: the server's CPU (INFO cpu used_cpu_sys +
          used_cpu_user, before and after), by command from INFO commandstats
          (usec; a script's usec includes the commands it runs, which are
          counted again under their own names), the commands' share and the
          rest (reading, parsing and answering requests, the AOF); then every
          key of the crawl, MEMORY USAGE (exact) summed by structure
          (`classify`), each divided by what it holds (queued URLs, URLs seen,
          pages with metadata, pages in the link store's working set,
          documents in the content-seen set, hosts).
alone     Each structure built alone, at a size where its encoding is the
          one of a large crawl, used_memory before and after (and MEMORY
          USAGE): the DUE in exact mode and in Bloom mode (growing layers, the
          default; and sized to the URLs) for --due-urls URLs; a page
          metadata bucket at the size a crawl of 1M URLs and one of 1B URLs
          gives it on one partition, filled with the values the crawl wrote;
          content-seen keys, one per document, with the crawl's URLs' shape.
frontier  The frontier workload of bench/frontier_bench.py (the same
          generated web's URLs, Zipf hosts, admitted as the scheduler admits
          them) sent by 1, 2, 4 and 8 client processes at once: each enqueues
          its share in batches of 256 URLs (one sync each, split over the
          partitions by host), then lease + release cycles (32 hosts per sync,
          over every partition, delay 0) until --leases leases in all. Three
          set-ups, interleaved: one server with one partition, one server with
          the partitions a 3-primary cluster fits, and a real 3-node Redis
          Cluster on loopback (tests/test_cluster.py's start_cluster) with that
          partition count. Per run: operations/s, each server's CPU per
          operation (INFO cpu), its script calls and its share, MOVED/ASK
          replies (INFO errorstats), and memory per queued URL.

The machine has 2 cores: 8 client processes (and 3 nodes) contend for them,
so those rates measure contention as much as the servers; CPU per operation
is the figure to scale from. Reported with the load average.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import redis
import redis.cluster

# crawl_bench extracts the code under test (--src) and puts it first on sys.path,
# before crawlproj is imported
from crawl_bench import CONFIGS, SRC_DESC, Bench, config, flush_sync, loadavg, scrapy_stats, scratch_server
from redis.crc import key_slot

from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import SimWeb

SLOTS = 16384

# -- what a key is -----------------------------------------------------------------

# The structures a crawl keeps in Redis, and what each one's size is divided by.
UNITS = {
    "frontier queues": "queued URLs",
    "frontier host state": "hosts",
    "DUE (exact)": "URLs seen",
    "DUE (bloom)": "URLs seen",
    "page metadata": "pages with metadata",
    "link store working set": "pages in the working set",
    "content-seen": "documents",
    "robots.txt rules": "hosts",
    "trap guard": "hosts",
    "recrawl schedule": "scheduled URLs",
    "index hand-over": "documents waiting",
    "crawl-wide": "crawl",
}


def prefixes(keyspace: Keyspace) -> list[tuple[str, str, bool]]:
    """(name or prefix, structure, exact name?) for every key the crawl may
    hold, names made by the keyspace itself; longest prefixes first."""
    out = [(keyspace.index_queue, "index hand-over", True)]
    for p in range(keyspace.partitions):
        exact = {keyspace.links(p): "link store working set",
                 keyspace.link_segments(p): "link store working set",
                 keyspace.links_lock(p): "link store working set",
                 keyspace.due(p): "DUE (exact)",
                 keyspace.trapped(p): "trap guard", keyspace.host_pages(p): "trap guard",
                 keyspace.recrawl_ready(p): "recrawl schedule",
                 keyspace.rate_buckets(p): "recrawl schedule",
                 keyspace.budget(p): "recrawl schedule"}
        out += [(k, v, True) for k, v in exact.items()]
        # content-seen keys end in 16 hex digits; their partition is h mod P
        starts = {keyspace.queue(p, ""): "frontier queues",
                  keyspace.payloads(p, ""): "frontier queues",
                  keyspace.recrawl_queue(p, ""): "recrawl schedule",
                  keyspace.pagemeta(p, ""): "page metadata",
                  keyspace.robots(p, ""): "robots.txt rules",
                  keyspace.trap_hashes(p, ""): "trap guard",
                  keyspace.content(p)[:-16]: "content-seen",
                  keyspace.near_band(p)[:-16]: "content-seen",
                  keyspace.sketch(p)[:-16]: "content-seen",
                  keyspace.seen_pattern(p)[:-1]: "DUE (exact)",
                  keyspace.bloom_pattern(p, 0)[:-3]: "DUE (bloom)",
                  keyspace.prefix(p): "frontier host state"}
        out += [(k, v, False) for k, v in starts.items()]
    out.append((keyspace.monitor_prefix, "crawl-wide", False))
    return sorted(out, key=lambda t: (not t[2], -len(t[0])))


def classify(keys, keyspace: Keyspace) -> dict[str, list[str]]:
    """The crawl's keys by structure (UNITS); keys of no structure under 'other'."""
    rules = prefixes(keyspace)
    out: dict[str, list[str]] = {}
    for key in keys:
        key = key.decode() if isinstance(key, bytes) else key
        kind = next((kind for name, kind, exact in rules
                     if (key == name if exact else key.startswith(name))), "other")
        out.setdefault(kind, []).append(key)
    return out


def memory_by_structure(r, keyspace: Keyspace) -> dict[str, dict]:
    """MEMORY USAGE (SAMPLES 0: exact) of every key of the crawl, by structure:
    bytes, keys, and their encodings."""
    keys = list(r.scan_iter(match=keyspace.partitions_pattern(), count=5000))
    keys += list(r.scan_iter(match=keyspace.monitor_prefix + "*", count=5000))
    out = {}
    for kind, ks in classify(keys, keyspace).items():
        pipe = r.pipeline(transaction=False)
        for k in ks:
            pipe.memory_usage(k, samples=0)
            pipe.object("encoding", k)
        replies = pipe.execute()
        enc = Counter(e.decode() if isinstance(e, bytes) else str(e) for e in replies[1::2])
        out[kind] = {"bytes": sum(x or 0 for x in replies[0::2]), "keys": len(ks),
                     "encodings": dict(enc)}
    return out


# -- the server's side ---------------------------------------------------------------

def server_cpu(r) -> float:
    """Seconds of CPU the server has used (all its threads): INFO cpu."""
    cpu = r.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def command_usec(r) -> dict[str, tuple[int, int]]:
    """command -> (calls, usec) since the last CONFIG RESETSTAT."""
    return {k[8:]: (int(v["calls"]), int(v["usec"])) for k, v in r.info("commandstats").items()}


SCRIPT_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall")


def per_page_cpu(cpu_s: float, commands: dict[str, tuple[int, int]], client_calls: dict,
                 pages: int) -> dict:
    """The server's CPU per page, split into the scripts (their usec includes
    the commands they run), the commands clients sent outside scripts (each
    command's usec shared by its client calls out of all its calls: a command
    also run inside scripts is counted there too), and the rest (I/O, parsing,
    the AOF, the event loop)."""
    mine = {"info", "config|resetstat", "flushall", "memory|usage", "object|encoding", "scan",
            "config|get", "script|load"}
    scripts = sum(us for c, (_, us) in commands.items() if c in SCRIPT_COMMANDS)
    direct, by = 0.0, {}
    client = {k.lower(): v for k, v in client_calls.items()}
    for c, (calls, us) in commands.items():
        if c in mine or c in SCRIPT_COMMANDS:
            continue
        sent = min(client.get(c, 0), calls)
        if sent:
            direct += us * sent / calls
            by[c] = round(us * sent / calls / pages, 2)
    total = 1e6 * cpu_s
    return {"us_per_page": round(total / pages, 1),
            "scripts_us_per_page": round(scripts / pages, 1),
            "direct_commands_us_per_page": round(direct / pages, 1),
            "rest_us_per_page": round((total - scripts - direct) / pages, 1),
            "direct_by_command_us_per_page": dict(sorted(by.items(), key=lambda kv: -kv[1])),
            "script_calls_per_page": round(sum(n for c, (n, _) in commands.items()
                                               if c in SCRIPT_COMMANDS) / pages, 3),
            "usec_by_command_per_page": {c: round(us / pages, 2) for c, (_, us) in sorted(
                commands.items(), key=lambda kv: -kv[1][1]) if c not in mine and us}}


# -- phase: crawl --------------------------------------------------------------------

def crawl_counts(r, keyspace: Keyspace) -> dict:
    """What the crawl's structures hold: the divisors of memory_by_structure."""
    out = Counter()
    for p in range(keyspace.partitions):
        st = {k.decode(): int(v) for k, v in r.hgetall(keyspace.stats(p)).items()}
        out["URLs seen"] += st.get("enqueued", 0)
        out["queued URLs"] += st.get("queued", 0)
        out["duplicates"] += st.get("duplicates", 0)
        out["leased"] += st.get("leased", 0)
        for state in (keyspace.heap, keyspace.ready, keyspace.leases):
            out["hosts"] += r.zcard(state(p))
        out["pages in the working set"] += r.llen(keyspace.links(p))
        for key in r.scan_iter(match=keyspace.pagemeta_pattern(p), count=5000):
            out["pages with metadata"] += r.hlen(key)
        for _ in r.scan_iter(match=keyspace.content_pattern(p), count=5000):
            out["documents"] += 1
    out["documents waiting"] = r.llen(keyspace.index_queue)
    out["crawl"] = 1
    return dict(out)


def crawl_phase(a, out: list) -> bytes | None:
    """The crawls; returns a page metadata value one of them wrote (the
    median length), for the bucket built alone."""
    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "page_bytes": a.page_bytes,
            "latency_ms": 0, "crawl_delay_fraction": 0.0}
    common = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
              "DOWNLOAD_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0,
              "RETRY_TIMES": 2, "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0,
              "ITEM_PIPELINES": "{}", "CONTENTSEEN_ENABLED": "False", "RANKER_ENABLED": "False"}
    workdir = Path(tempfile.mkdtemp(prefix="scale-bench-crawl-"))
    bench = Bench(spec, workdir, 10, common, aof=True)
    pm_values: list[bytes] = []
    try:
        emit(out, {"phase": "crawl", "reachable": len(bench.reachable), "warm": bench.warm()})
        for rnd in range(a.repeat):
            for name in a.configs.split(","):
                c = config(name)
                settings = dict(c["settings"], CLOSESPIDER_PAGECOUNT=a.stop_at)
                flush_sync(bench.r)  # the last crawl's keys freed outside the measure
                cpu0, load = server_cpu(bench.r), loadavg()
                used0 = bench.r.info("memory")["used_memory"]
                res = bench.run(name, c["workers"], settings, src=c["src"], stores=c["stores"])
                cpu = server_cpu(bench.r) - cpu0
                commands = command_usec(bench.r)
                keyspace = Keyspace.existing(bench.r, f"bench{bench.n_run}")
                mem = memory_by_structure(bench.r, keyspace)
                counts = crawl_counts(bench.r, keyspace)
                pages = max(res["pages"], 1)
                st = Counter()
                for i in range(c["workers"]):
                    st.update({k: v for k, v in scrapy_stats(
                        (Path(res["dir"]) / f"worker{i}.log").read_text(errors="replace")).items()
                        if isinstance(v, (int, float))})
                # links the spider followed: dropped in the worker as sent lately,
                # or handed to the scheduler (which sends the new ones to Redis)
                links = st["frontier/recent_links_dropped"] + st["frontier/enqueue_requests"]
                row = {"phase": "crawl", "round": rnd + 1, "config": name, "load_avg_before": load,
                       "load_avg_after": loadavg(), "pages": res["pages"],
                       "pages_per_s": res["pages_per_s"],
                       "pages_per_worker_cpu_s": res["pages_per_worker_cpu_s"],
                       "worker_cpu_s": res["cpu_s"]["workers"], "exit_codes": res["exit_codes"],
                       "redis_cpu_s_proc": res["cpu_s"]["redis"], "redis_cpu_s_info": round(cpu, 3),
                       "server": per_page_cpu(cpu, commands, res["redis"]["client_by_command"], pages),
                       "client_commands_per_page": res["redis"]["client_commands_per_page"],
                       "round_trips_per_page": res["redis"]["round_trips_per_page"],
                       "counts": counts,
                       "followed_links_per_page": round(links / pages, 2),
                       "links_dropped_in_worker_per_page": round(
                           st["frontier/recent_links_dropped"] / pages, 2),
                       "frontier_script_calls_per_page": round(st["frontier/redis_commands"] / pages, 3),
                       "new_urls_per_page": round(counts["URLs seen"] / pages, 3),
                       "duplicates_reaching_redis_per_page": round(counts["duplicates"] / pages, 3),
                       "used_memory_delta": bench.r.info("memory")["used_memory"] - used0,
                       "memory": {kind: dict(m, per=UNITS.get(kind, "?"),
                                             bytes_per_unit=round(m["bytes"] / counts[UNITS[kind]], 1)
                                             if counts.get(UNITS.get(kind)) else None)
                                  for kind, m in mem.items()}}
                row["memory_usage_sum"] = sum(m["bytes"] for m in mem.values())
                emit(out, row)
                for key in bench.r.scan_iter(match=keyspace.pagemeta_pattern(0), count=5000):
                    pm_values += bench.r.hvals(key)
    finally:
        bench.close()
    pm_values.sort(key=len)
    return pm_values[len(pm_values) // 2] if pm_values else None


# -- phase: structures built alone -----------------------------------------------------

def spread_fp(i: int) -> int:
    """The i-th of distinct signed 64-bit fingerprints spread over the range
    (Fibonacci hashing), as the DUE's mmh3 fingerprints are."""
    x = (i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return x - (1 << 64) if x >> 63 else x


def used(r) -> int:
    time.sleep(0.2)  # lazy frees of the last flush
    return int(r.info("memory")["used_memory"])


def alone_phase(a, out: list, pm_value: bytes | None) -> None:
    from due_bench import due_for, fill_due

    from crawlproj.due import bloom
    from crawlproj.stores.pagemeta import fp_bytes

    with scratch_server(aof=False, prefix="scale-bench-alone-") as (r, _):
        for name, cfg in (("DUE (exact)", dict(mode="exact")),
                          ("DUE (bloom), growing layers", dict(mode="bloom", error_rate=1e-7)),
                          ("DUE (bloom), sized to the URLs",
                           dict(mode="bloom", capacity=a.due_urls, error_rate=1e-7))):
            flush_sync(r)
            r.script_flush()
            before, cpu0 = used(r), server_cpu(r)
            due = due_for(r, "alone", **cfg)
            took = fill_due(due, a.due_urls)
            delta = used(r) - before
            row = {}
            if cfg["mode"] == "bloom":  # the layer table's bitmaps, computed: a crawl of
                # n URLs, its capacity (if sized) set to n
                row["computed_bytes_per_url"] = {
                    f"{n:.0e}": round(bloom.bytes_per_url(bloom.layers(
                        n if "capacity" in cfg else None, cfg["error_rate"]), n), 2)
                    for n in (a.due_urls, 10 ** 9)}
            emit(out, {"phase": "alone", "structure": name, "urls": a.due_urls, **row,
                       "bytes_per_url": round(delta / a.due_urls, 2),
                       "server_cpu_us_per_new_url": round(1e6 * (server_cpu(r) - cpu0) / a.due_urls, 2),
                       "seconds": round(took["seconds"], 1), "load_avg": loadavg()})
        # a page metadata bucket (PAGEMETA_BUCKETS 4096 per partition) as full as
        # 1M and 1B pages make it on one partition, with a value the crawl wrote
        value = pm_value or bytes(40)
        keyspace = Keyspace("alone", 1)
        for pages in (1_000_000, 1_000_000_000):
            n = min(pages // 4096, a.bucket_cap)
            flush_sync(r)
            before = used(r)
            key = keyspace.pagemeta(0, 0)
            for i in range(0, n, 5000):
                r.hset(key, mapping={fp_bytes(spread_fp(j)): value
                                     for j in range(i, min(n, i + 5000))})
            delta = used(r) - before
            emit(out, {"phase": "alone", "structure": "page metadata", "pages": pages,
                       "bucket_entries": n, "value_bytes": len(value),
                       "encoding": r.object("encoding", key).decode(),
                       "bytes_per_page": round(delta / n, 1),
                       "memory_usage_per_page": round(r.memory_usage(key, samples=0) / n, 1)})
        # content-seen: one key per document, SET <cs:fp> <first URL> NX
        web = SimWeb.generate(seed=a.seed, hosts=a.url_hosts, pages=a.content_docs)
        urls = [web.url(i) for i in range(min(web.n_nodes, a.content_docs))]
        flush_sync(r)
        before = used(r)
        pipe = r.pipeline(transaction=False)
        for i, u in enumerate(urls):
            pipe.set(keyspace.content(spread_fp(i)), u, nx=True)
            if len(pipe) >= 5000:
                pipe.execute()
        pipe.execute()
        delta = used(r) - before
        emit(out, {"phase": "alone", "structure": "content-seen", "documents": len(urls),
                   "mean_url_bytes": round(sum(map(len, urls)) / len(urls), 1),
                   "bytes_per_document": round(delta / len(urls), 1)})


# -- phase: the frontier workload, many clients, one server or a cluster ---------------------

def slot_spread(n_primaries: int, crawl_id: str, count: int) -> Counter:
    """Partitions per primary of a cluster whose n primaries hold even slot
    ranges (as start_cluster makes them)."""
    per = SLOTS // n_primaries
    ks = Keyspace(crawl_id, count)
    return Counter(min(key_slot(ks.prefix(p).encode()) // per, n_primaries - 1)
                   for p in range(count))


def fitted_partitions(n_primaries: int, crawl_id: str = "scale") -> dict:
    """What Keyspace.fitted_partitions gives a crawl on n primaries with even
    slot ranges, computed without a cluster: the count, the primaries it
    uses, and the busiest one's share of the partitions."""
    per = SLOTS // n_primaries
    count = Keyspace.fitted_count(crawl_id, set(range(n_primaries)),
                                  lambda key: min(key_slot(key.encode()) // per, n_primaries - 1))
    on = slot_spread(n_primaries, crawl_id, count)
    return {"partitions": count, "primaries_used": len(on),
            "busiest_primary_partition_share": round(max(on.values()) / count, 4)}


def spread_at(n_primaries: int, count: int, crawl_ids: int = 200) -> dict:
    """A fixed partition count over many crawl ids: how often every primary
    gets a partition, and the busiest primary's mean share."""
    spreads = [slot_spread(n_primaries, f"crawl{i}", count) for i in range(crawl_ids)]
    return {"partitions": count,
            "all_primaries_used": round(sum(len(on) == n_primaries for on in spreads) / crawl_ids, 3),
            "busiest_share_mean": round(mean([max(on.values()) / count for on in spreads]), 4)}


def fitted_spread(n_primaries: int, crawl_ids: int = 200) -> dict:
    """fitted_partitions over many crawl ids: how often every primary gets a
    partition, and the busiest primary's share (mean, worst)."""
    fits = [fitted_partitions(n_primaries, f"crawl{i}") for i in range(crawl_ids)]
    shares = [f["busiest_primary_partition_share"] for f in fits]
    return {"crawl_ids": crawl_ids,
            "all_primaries_used": round(sum(f["primaries_used"] == n_primaries for f in fits)
                                        / crawl_ids, 3),
            "primaries_used_mean": round(mean([f["primaries_used"] for f in fits]), 2),
            "busiest_share_mean": round(mean(shares), 4), "busiest_share_worst": max(shares),
            "even_share": round(1 / n_primaries, 4)}


def busiest_share(hosts: Counter, keyspace: Keyspace, n_primaries: int) -> float:
    """The busiest primary's share of the URLs, with hosts weighted by their URLs."""
    per = SLOTS // n_primaries
    node_of = [min(key_slot(keyspace.prefix(p).encode()) // per, n_primaries - 1)
               for p in range(keyspace.partitions)]
    on = Counter()
    for host, n in hosts.items():
        on[node_of[keyspace.partition_of(host)]] += n
    return max(on.values()) / sum(on.values())


def _client(k, n, url, cluster, crawl_id, partitions, entries, batch, quota, lease_batch,
            barrier, results):
    """One client process: its share of the enqueue batches, then its leases."""
    from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release

    r = redis.cluster.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    fr = Frontier(r, Keyspace(crawl_id, partitions))
    fr.sync({})  # loads the script
    chunks = [entries[i:i + batch] for i in range(0, len(entries), batch)][k::n]
    cpu0 = time.process_time()
    barrier.wait()
    for chunk in chunks:
        split: dict[int, Batch] = {}
        for e in chunk:
            split.setdefault(fr.partition_of(e[0]), Batch()).enqueue.append(e)
        fr.sync(split)
    enq_cpu = time.process_time() - cpu0
    barrier.wait()  # every client done enqueueing
    barrier.wait()  # the parent has read the servers
    share = max(1, math.ceil(lease_batch / partitions))
    held: dict[int, list] = {}
    leased = syncs = empty = 0
    cpu0 = time.process_time()
    while leased < quota and empty < 200:
        batches = {p: Batch(release=[Release(h, t, Host.OK, URL.DONE) for h, t in held.get(p, ())],
                            lease=share) for p in range(partitions)}
        res = fr.sync(batches)
        syncs += 1
        held = {p: [(x.host, x.token) for x in rr.leased] for p, rr in res.items()}
        got = sum(len(v) for v in held.values())
        leased += got
        empty = 0 if got else empty + 1
    fr.sync({p: Batch(release=[Release(h, t, Host.OK, URL.DONE) for h, t in v])
             for p, v in held.items() if v})
    results.put({"k": k, "leased": leased, "syncs": syncs, "end": time.monotonic(),
                 "enqueue_cpu_s": enq_cpu, "lease_cpu_s": time.process_time() - cpu0})


def frontier_run(setup: dict, clients: int, entries: list, a) -> dict:
    """One run of the workload on one set-up (a fresh crawl id)."""
    nodes = setup["nodes"]  # plain clients of each server (the cluster's primaries)
    for c in nodes:
        flush_sync(c)
        c.config_resetstat()
    crawl_id = "scale"  # one id: the partitions' slots, hence their nodes, stay the same
    from crawlproj.frontier.frontier import Batch, Frontier

    main = setup["client"]()
    keyspace = Keyspace.open(main, crawl_id, setup["partitions"])
    Frontier(main, keyspace).sync({p: Batch() for p in range(keyspace.partitions)})  # the DUE set up
    mem0 = sum(int(c.info("memory")["used_memory"]) for c in nodes)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(clients + 1), ctx.Queue()
    quota = -(-a.leases // clients)
    procs = [ctx.Process(target=_client, args=(k, clients, setup["url"], setup["cluster"], crawl_id,
                                               keyspace.partitions, entries, a.batch, quota,
                                               a.lease_batch, barrier, results))
             for k in range(clients)]
    for p in procs:
        p.start()
    load = loadavg()
    cpu0 = [server_cpu(c) for c in nodes]
    barrier.wait()
    t0 = time.monotonic()
    barrier.wait()
    t1 = time.monotonic()
    cpu1 = [server_cpu(c) for c in nodes]
    cmd1 = [command_usec(c) for c in nodes]
    mem1 = sum(int(c.info("memory")["used_memory"]) for c in nodes)
    queued = sum(int(main.hget(keyspace.stats(p), "queued") or 0) for p in range(keyspace.partitions))
    barrier.wait()
    t2 = time.monotonic()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    t3 = max(g["end"] for g in got)
    cpu2 = [server_cpu(c) for c in nodes]
    cmd2 = [command_usec(c) for c in nodes]
    errors = [{k: v for k, v in c.info("errorstats").items()} for c in nodes]
    main.close()
    n, leased = len(entries), sum(g["leased"] for g in got)

    def calls(cmds):
        return sum(v[0] for k, v in cmds.items() if k in SCRIPT_COMMANDS)

    enq_cpu = [b - a_ for a_, b in zip(cpu0, cpu1)]
    lease_cpu = [b - a_ for a_, b in zip(cpu1, cpu2)]
    enq_calls = [calls(c) for c in cmd1]
    lease_calls = [calls(c2) - calls(c1) for c1, c2 in zip(cmd1, cmd2)]
    return {
        "phase": "frontier", "setup": setup["name"], "servers": len(nodes),
        "partitions": keyspace.partitions, "clients": clients, "load_avg_before": load,
        "load_avg_after": loadavg(), "urls": n, "queued": queued,
        "enqueue": {"urls_per_s": round(n / (t1 - t0)),
                    "server_cpu_us_per_url": round(1e6 * sum(enq_cpu) / n, 2),
                    "per_server_cpu_us_per_url": [round(1e6 * c / n, 2) for c in enq_cpu],
                    "per_server_share": [round(c / max(sum(enq_cpu), 1e-9), 3) for c in enq_cpu],
                    "script_calls_per_server": enq_calls,
                    "client_cpu_us_per_url": round(1e6 * sum(g["enqueue_cpu_s"] for g in got) / n, 2),
                    "bytes_per_queued_url": round((mem1 - mem0) / max(queued, 1), 1)},
        "lease_release": {"leases": leased, "syncs": sum(g["syncs"] for g in got),
                          "leases_per_s": round(leased / (t3 - t2)),
                          "server_cpu_us_per_lease": round(1e6 * sum(lease_cpu) / max(leased, 1), 2),
                          "per_server_cpu_us_per_lease": [round(1e6 * c / max(leased, 1), 2)
                                                          for c in lease_cpu],
                          "per_server_share": [round(c / max(sum(lease_cpu), 1e-9), 3)
                                               for c in lease_cpu],
                          "script_calls_per_server": lease_calls,
                          "client_cpu_us_per_lease": round(
                              1e6 * sum(g["lease_cpu_s"] for g in got) / max(leased, 1), 2)},
        "moved": sum(int(e.get("errorstat_MOVED", {}).get("count", 0)) for e in errors),
        "ask": sum(int(e.get("errorstat_ASK", {}).get("count", 0)) for e in errors),
        "errors": [e for e in errors if e],
    }


def frontier_phase(a, out: list) -> None:
    from frontier_bench import _Crawler, spider_requests

    from crawlproj.frontier.admission import admit
    from crawlproj.frontier.frontier import Frontier
    from crawlproj.prioritizers import load_prioritizer
    from crawlproj.spiders.web import WebSpider
    from tests.test_cluster import start_cluster

    web = SimWeb.generate(seed=a.seed, hosts=a.url_hosts, pages=a.urls)
    spider = WebSpider()
    requests = spider_requests(web, spider, "zipf", a.url_hosts, a.urls)
    prioritizer = load_prioritizer("bfs", _Crawler())
    with tempfile.TemporaryDirectory(prefix="scale-bench-frontier-") as tmp, \
            scratch_server(aof=True, prefix="scale-bench-single-") as (single, _):
        fr = Frontier(single, Keyspace("admit", 1))
        entries = [admit(fr, prioritizer, q, spider, 2083)[1] for q in requests]
        hosts = Counter(e[0] for e in entries)
        nodes = start_cluster(Path(tmp) / "cluster")
        try:
            cluster_url = nodes[0].url
            rc = redis.cluster.RedisCluster.from_url(cluster_url)
            partitions = Keyspace.fitted_partitions(rc, "scale")  # as a crawl's first worker
            rc.close()
            computed = fitted_partitions(len(nodes))["partitions"]
            if computed != partitions:
                raise RuntimeError(f"fitted_partitions computed {computed}, the cluster {partitions}")
            p16 = fitted_partitions(16)["partitions"]
            single_url = f"redis://127.0.0.1:{single.connection_pool.connection_kwargs['port']}/0"
            setups = {
                "single-1": dict(name="single-1", url=single_url, cluster=False, partitions=1,
                                 nodes=[single], client=lambda: redis.Redis.from_url(single_url)),
                f"single-{partitions}": dict(name=f"single-{partitions}", url=single_url,
                                             cluster=False, partitions=partitions, nodes=[single],
                                             client=lambda: redis.Redis.from_url(single_url)),
                # the partitions a crawl gets on 16 primaries, on one server: the
                # cost of splitting the work that finely, measured
                f"single-{p16}": dict(name=f"single-{p16}", url=single_url, cluster=False,
                                      partitions=p16, nodes=[single],
                                      client=lambda: redis.Redis.from_url(single_url)),
                f"cluster3-{partitions}": dict(
                    name=f"cluster3-{partitions}", url=cluster_url, cluster=True,
                    partitions=partitions, nodes=[n.client() for n in nodes],
                    client=lambda: redis.cluster.RedisCluster.from_url(cluster_url)),
            }
            spread = {}
            for n in (3, 16):
                fit = fitted_partitions(n)
                fit["busiest_primary_url_share_this_web"] = round(
                    busiest_share(hosts, Keyspace("scale", fit["partitions"]), n), 3)
                fit["over_crawl_ids"] = fitted_spread(n)
                fit["fixed_counts"] = [spread_at(n, c) for c in (4 * n, 8 * n, 16 * n)]
                spread[f"{n} primaries"] = fit
            emit(out, {"phase": "frontier", "urls": len(entries), "hosts": len(hosts),
                       "biggest_host_share": round(hosts.most_common(1)[0][1] / len(entries), 3),
                       "cluster_partitions": partitions,
                       "spread": spread, "server": single.info("server").get("server_name", "redis")})
            for rnd in range(a.frontier_repeat):
                for clients in [int(x) for x in a.clients.split(",")]:
                    for setup in setups.values():
                        row = frontier_run(setup, clients, entries, a)
                        row["round"] = rnd + 1
                        emit(out, row)
        finally:
            for node in nodes:
                node.stop()


# -- scale on paper ------------------------------------------------------------------------

def capacity(us_per_page: float, cores: float, pages_per_worker_s: float,
             efficiency: float = 1.0) -> dict:
    """Pages/s and workers that `cores` Redis cores carry at us_per_page of
    server CPU per page, the cores' work spread with `efficiency` (1: the
    busiest core carries no more than its share)."""
    pages = cores * efficiency * 1e6 / us_per_page
    return {"pages_per_s": round(pages), "workers": round(pages / pages_per_worker_s, 1)}


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def project(rows: list) -> dict:
    """Scale on paper from one invocation's rows: the server's CPU per page of
    the default stack (full1) carried by one core, by the 3-node cluster as
    measured (its CPU per operation against one server's, and its busiest
    node's share), and by 16 primaries (the
    busiest primary's share of the partitions over many crawl ids, hosts
    assumed many and even; the finer split's cost measured on one server)."""
    crawls = [r for r in rows if r.get("phase") == "crawl" and "server" in r]
    full = [r for r in crawls if r["config"].startswith("full")] or crawls
    if not full:
        return {}
    us_page = mean([r["server"]["us_per_page"] for r in full])
    worker = mean([r["pages_per_s"] / len(r["worker_cpu_s"]) for r in full])  # per worker
    out = {"us_per_page": round(us_page, 1), "pages_per_worker_s": round(worker, 1),
           "one core": capacity(us_page, 1, worker)}
    runs = [r for r in rows if r.get("phase") == "frontier" and "enqueue" in r and r["clients"] == 1]
    head = next((r for r in rows if r.get("phase") == "frontier" and "spread" in r), None)

    def per_op(setup):  # server CPU per enqueued URL plus per lease, all servers
        got = [r["enqueue"]["server_cpu_us_per_url"] + r["lease_release"]["server_cpu_us_per_lease"]
               for r in runs if r["setup"] == setup]
        return mean(got)

    cluster = next((r for r in runs if r["setup"].startswith("cluster")), None)
    if cluster and head and per_op("single-1"):
        p3 = cluster["partitions"]
        p16 = head["spread"]["16 primaries"]["partitions"]
        base = per_op("single-1")
        overhead3 = per_op(cluster["setup"]) / base
        busiest = mean([max(r["enqueue"]["per_server_share"]) for r in runs
                        if r["setup"] == cluster["setup"]])
        out["cluster_cpu_per_op_over_single"] = round(overhead3, 2)
        out["3 primaries"] = capacity(us_page * overhead3, 3, worker, (1 / 3) / busiest)
        out["3 primaries"]["busiest_share"] = round(busiest, 3)
        # 16 primaries: the finer split measured on one server, times what the
        # cluster's client and network added to the 3-node split
        cluster_factor = per_op(cluster["setup"]) / per_op(f"single-{p3}")
        overhead16 = per_op(f"single-{p16}") / base * cluster_factor
        share16 = head["spread"]["16 primaries"]["over_crawl_ids"]["busiest_share_mean"]
        out["16 primaries"] = capacity(us_page * overhead16, 16, worker, (1 / 16) / share16)
        out["16 primaries"].update(busiest_share=round(share16, 3),
                                   cpu_per_op_over_single=round(overhead16, 2))
    return out


def emit(out: list, row: dict) -> None:
    out.append(row)
    print(json.dumps(row), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--phases", default="crawl,alone,frontier")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=300, help="the crawled web's hosts")
    p.add_argument("--pages", type=int, default=6000, help="the crawled web's pages")
    p.add_argument("--page-bytes", type=int, default=10000)
    p.add_argument("--stop-at", type=int, default=4000, help="CLOSESPIDER_PAGECOUNT of each crawl")
    p.add_argument("--configs", default="cp1,full1", help=f"of {', '.join(CONFIGS)}")
    p.add_argument("--repeat", type=int, default=1, help="rounds of the crawls")
    p.add_argument("--urls", type=int, default=100000, help="the frontier workload's URLs")
    p.add_argument("--url-hosts", type=int, default=2000)
    p.add_argument("--batch", type=int, default=256, help="URLs per enqueue sync")
    p.add_argument("--lease-batch", type=int, default=32, help="leases asked per sync")
    p.add_argument("--leases", type=int, default=20000, help="leases per run, all clients")
    p.add_argument("--clients", default="1,2,4,8")
    p.add_argument("--frontier-repeat", type=int, default=1)
    p.add_argument("--due-urls", type=int, default=1000000)
    p.add_argument("--bucket-cap", type=int, default=250000,
                   help="most entries of the page metadata bucket built alone")
    p.add_argument("--content-docs", type=int, default=200000)
    p.add_argument("--src", default="HEAD", help="git revision to benchmark, or 'worktree'")
    p.add_argument("--out", default=None, help="also write every row here (JSON)")
    a = p.parse_args()
    out: list = []
    emit(out, {"argv": sys.argv, "code": SRC_DESC, "load_avg": loadavg(),
               "cpus": os.cpu_count()})
    phases = a.phases.split(",")
    try:
        pm = crawl_phase(a, out) if "crawl" in phases else None
        if "alone" in phases:
            alone_phase(a, out, pm)
        if "frontier" in phases:
            frontier_phase(a, out)
        emit(out, {"projection": project(out), "load_avg": loadavg()})
    finally:
        if a.out:
            Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
