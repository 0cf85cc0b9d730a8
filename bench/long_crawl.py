"""A long crawl, measured as it goes: does a page cost the same at the end as
near the start, and does a stopped crawl come back whole?

    .venv/bin/python bench/long_crawl.py [--hosts 10000 --pages 1200000 --page-bytes 10000]
        [--latency-ms 50-200] [--workers 2] [--concurrency 32] [--target 500000]
        [--sample-s 10] [--resume-pages 20000] [--census] [--set NAME=VALUE] [--src HEAD]
        [--out DIR]

One simulated web (Zipf host sizes, each host answering after a latency drawn
from --latency-ms, no Crawl-delay) and one Redis-protocol server with the
embedded server's configuration (AOF on), as bench/crawl_bench.py's Bench
builds them. --workers `scrapy crawl web` processes with the project's default
stack (every store, the content-seen test, the index hand-over; politeness
off as in crawl_bench, so that the crawl is bound by CPU, not by the hosts)
crawl until the web has served --target pages, then stop (SIGINT: Scrapy's
graceful close).

Every --sample-s seconds: pages served (the web's log, robots.txt left out),
the CPU seconds of the workers (with their indexer and ranker processes), of the Redis
server and of the web, each worker's RSS, the server's used_memory, the
frontier's counters (URLs enqueued = seen and new, queued now), the bytes on
disk under the crawl's data directory by store (WARC, link store, index,
the rest) and the index hand-over's waiting documents. The ranker's runs are
read from the workers' logs. The crawl is cut into tenths by pages served;
per tenth: pages/s, CPU per page (workers, Redis, both), worker RSS at its end,
used_memory per URL seen and per queued URL, disk per page, the indexer's lag
(documents waiting, mean and max) and the ranker's runs (count, longest).

Then the restart: the server is shut down (SHUTDOWN, which writes the AOF
out) and started again on the same directory; its load time is the time until
it answers with loading done. Before the workers come back, the URLs queued
in the frontier are read out (every queued host's queue, decoded): every URL
that a fetched page links to, that the web serves and robots.txt allows,
must have been fetched or be queued ("lost" counts those that are neither),
and none fetched may be queued again. Then the workers crawl --resume-pages
more pages: pages/s, and how many of them the web had served before.

Written as JSON lines to stdout and DIR/long.jsonl; the summary last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# crawl_bench extracts the code under test (--src) and puts it first on sys.path
import redis
from crawl_bench import (
    CLK,
    PY,
    SRC,
    SRC_DESC,
    STORES_OFF,
    Bench,
    children_cpu,
    cpu_between,
    loadavg,
    machine,
    proc_cpu,
    proc_memory,
)

from crawlproj.frontier import codec
from crawlproj.frontier.frontier import Frontier
from crawlproj.redis.embedded import spawn_server
from crawlproj.redis.keyspace import Keyspace

CRAWL_ID = "long"
# --census: each worker, on SIGUSR1, appends to its LONGCRAWL_CENSUS file a count of the
# objects Python's collector tracks, by type, and the allocator's blocks in
# use (what grows in a worker's heap between two tenths)
CENSUS_SHIM = r'''
import gc, json, os, signal, sys, time
from collections import Counter
_out = os.environ.get("LONGCRAWL_CENSUS")
if _out:
    def _census(signum, frame):
        kinds = Counter(type(o).__name__ for o in gc.get_objects())
        with open(_out, "a") as f:
            f.write(json.dumps({"t": time.time(), "blocks": sys.getallocatedblocks(),
                                "objects": dict(kinds.most_common(25))}) + "\n")
    signal.signal(signal.SIGUSR1, _census)
'''
RETRY_STATUS = {500, 502, 503, 504, 522, 524, 408, 429}
RANKER_RE = re.compile(r"^(\S+ \S+) \[crawlproj\.ranker\.extension\] INFO: Ranker: ([\d,]+) nodes.*?"
                       r"graph ([\d.]+) s, rank ([\d.]+) s, rescore ([\d.]+) s")


class WebLog:
    """The simulated web's request log, read as it grows."""

    def __init__(self, path: str, offset: int = 0):
        self.f = open(path, "rb")
        self.f.seek(offset)
        self.rest = b""
        self.counts: Counter = Counter()   # URL -> requests
        self.status: dict[str, int] = {}
        self.pages = 0

    def read(self) -> None:
        chunk = self.rest + self.f.read()
        lines = chunk.split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            rec = json.loads(line)
            if rec["path"] == "/robots.txt":
                continue
            url = f"http://{rec['host']}{rec['path']}"
            self.counts[url] += 1
            self.status[url] = rec["status"]
            self.pages += 1


def disk(root: Path) -> dict:
    """Bytes under root by store (its first-level directory)."""
    out: Counter = Counter()
    for dirpath, _, files in os.walk(root):
        rel = Path(dirpath).relative_to(root).parts
        store = rel[0] if rel else "other"
        for name in files:
            with contextlib.suppress(OSError):
                out[store] += os.stat(os.path.join(dirpath, name)).st_size
    return dict(out)


class Crawl:
    """The workers of one stretch of the crawl, and their samples."""

    def __init__(self, bench: Bench, settings: dict, workers: int, data: Path, logdir: Path,
                 census: bool = False):
        env = bench.sw.env()
        env.update(REDIS_URL=bench.redis_url, CRAWL_ID=CRAWL_ID, CRAWL_DATA_DIR=str(data),
                   PYTHONUNBUFFERED="1", PYTHONPATH=str(SRC))
        if census:
            shim = logdir / "census-shim"
            shim.mkdir(exist_ok=True)
            (shim / "sitecustomize.py").write_text(CENSUS_SHIM)
            env["PYTHONPATH"] = os.pathsep.join([str(shim), str(SRC)])
        cmd = [PY, "-m", "scrapy", "crawl", "web", "-a", f"seeds={bench.seeds_file}"]
        for k, v in settings.items():
            cmd += ["-s", f"{k}={v}"]
        self.logs = [logdir / f"worker{i}.log" for i in range(workers)]
        self.procs = []
        for i, log in enumerate(self.logs):
            wenv = dict(env, LONGCRAWL_CENSUS=str(logdir / f"census{i}.jsonl")) if census else env
            with open(log, "ab") as out:
                self.procs.append(subprocess.Popen(cmd, cwd=SRC, env=wenv, stdout=out,
                                                   stderr=subprocess.STDOUT))
        self.cpu = [0.0 for _ in self.procs]
        self.children = [0.0 for _ in self.procs]   # their indexer and ranker processes

    def worker_cpu(self) -> tuple[float, float]:
        """CPU seconds of the workers' own processes, and of their children:
        the reaped ones (a ranker run's process each) from the worker's
        cutime and cstime, the live ones (the indexer) sampled now."""
        for i, p in enumerate(self.procs):
            if p.poll() is None:
                with contextlib.suppress(OSError):
                    own, reaped = proc_cpu_with_children(p.pid)
                    live: dict = {}
                    children_cpu(p.pid, live)
                    self.cpu[i], self.children[i] = own, reaped + sum(live.values())
        return sum(self.cpu), sum(self.children)

    def census(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGUSR1)

    def rss_kib(self) -> list[int]:
        return [(proc_memory(p.pid) or (0, 0))[0] for p in self.procs]

    def stop(self, timeout: float = 600.0) -> list[int]:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return [p.returncode for p in self.procs]


def proc_cpu_with_children(pid: int) -> tuple[float, float]:
    """(utime + stime, cutime + cstime) of a live process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK, (int(fields[13]) + int(fields[14])) / CLK


def sample(bench: Bench, crawl: Crawl, log: WebLog, frontier: Frontier, ks: Keyspace,
           data: Path, t0: float) -> dict:
    log.read()
    c = frontier.counters()
    info = bench.r.info("memory")
    own, indexer = crawl.worker_cpu()
    return {"t": round(time.time() - t0, 2), "pages": log.pages,
            "cpu_workers": round(own + indexer, 2), "cpu_indexer": round(indexer, 2),  # and ranker
            "cpu_each": [[round(c, 2), round(k, 2)] for c, k in zip(crawl.cpu, crawl.children)],
            "cpu_redis": round(proc_cpu(bench.redis_proc.pid), 2),
            "cpu_web": round(proc_cpu(bench.sw.pid), 2),
            "rss_kib": crawl.rss_kib(), "used_memory": info["used_memory"],
            "enqueued": c.get("enqueued", 0), "queued": c.get("queued", 0),
            "index_waiting": bench.r.llen(ks.index_queue),
            # the hand-over's documents come and go: left out of bytes per URL
            "index_queue_bytes": bench.r.memory_usage(ks.index_queue) or 0, "disk": disk(data),
            "load": loadavg()}


def ranker_runs(logs: list[Path], t0_wall: float) -> list[dict]:
    runs = []
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            m = RANKER_RE.match(line)
            if m:
                at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() - t0_wall
                runs.append({"t": round(at, 1), "nodes": int(m.group(2).replace(",", "")),
                             "s": round(sum(float(m.group(i)) for i in (3, 4, 5)), 2)})
    return sorted(runs, key=lambda r: r["t"])


def tenths(samples: list[dict], target: int, runs: list[dict]) -> list[dict]:
    """Per tenth of the crawl (by pages served): the figures of its stretch."""
    def at(pages):  # the time the web had served `pages`, interpolated
        for a, b in zip(samples, samples[1:]):
            if b["pages"] >= pages:
                if b["pages"] == a["pages"]:
                    return b["t"]
                return a["t"] + (b["t"] - a["t"]) * (pages - a["pages"]) / (b["pages"] - a["pages"])
        return samples[-1]["t"]

    def series(key):
        return [(s["t"], s[key]) for s in samples]

    def last_before(t):
        return max((s for s in samples if s["t"] <= t), key=lambda s: s["t"])

    out = []
    step = target / 10
    for k in range(10):
        t0, t1 = at(k * step), at((k + 1) * step)
        pages = step
        w = cpu_between(series("cpu_workers"), t0, t1)
        r = cpu_between(series("cpu_redis"), t0, t1)
        ix = cpu_between(series("cpu_indexer"), t0, t1)
        end = last_before(t1)
        inside = [s for s in samples if t0 <= s["t"] <= t1] or [end]
        total_disk = sum(end["disk"].values())
        out.append({
            "tenth": k + 1, "pages_per_s": round(pages / max(t1 - t0, 1e-9), 1),
            "worker_cpu_ms_per_page": round(1000 * w / pages, 3),
            "redis_cpu_ms_per_page": round(1000 * r / pages, 3),
            "indexer_cpu_ms_per_page": round(1000 * ix / pages, 3),
            "cpu_ms_per_page": round(1000 * (w + r) / pages, 3),
            "worker_rss_mib": [round(x / 1024) for x in end["rss_kib"]],
            "used_memory_mib": round(end["used_memory"] / 2 ** 20, 1),
            "bytes_per_url_seen": round((end["used_memory"] - end["index_queue_bytes"])
                                        / max(end["enqueued"], 1), 1),
            "queued": end["queued"], "seen": end["enqueued"],
            "disk_bytes_per_page": round(total_disk / max(end["pages"], 1)),
            "disk_by_store_per_page": {k2: round(v / max(end["pages"], 1))
                                       for k2, v in sorted(end["disk"].items())},
            "index_waiting_mean": round(sum(s["index_waiting"] for s in inside) / len(inside)),
            "index_waiting_max": max(s["index_waiting"] for s in inside),
            "ranker_runs": sum(1 for x in runs if t0 <= x["t"] < t1),
            "ranker_longest_s": max([x["s"] for x in runs if t0 <= x["t"] < t1], default=0),
            "ranker_nodes": max([x["nodes"] for x in runs if t0 <= x["t"] < t1], default=0),
            "load": end["load"]})
    return out


def queued_urls(frontier: Frontier) -> set[str]:
    """Every URL queued in the frontier, read from each queued host's queue."""
    out = set()
    for p in range(frontier.partitions):
        for host in frontier.queued_hosts(p):
            host = host.decode() if isinstance(host, bytes) else host
            for payload in frontier.queued_urls(host, 10 ** 9):
                out.add(codec.decode(payload, None, host).url)
    return out


def lost(bench: Bench, fetched: Counter, queued: set[str]) -> dict:
    """URLs a fetched page links to, served and allowed, neither fetched nor queued."""
    web = bench.web
    linked = set()
    for url in fetched:
        node = web.node_of(url)
        if node is not None:
            linked.update(web.url(t) for t in web.out_links(node))
    linked &= bench.reachable
    missing = linked - set(fetched) - queued
    return {"linked": len(linked), "fetched": len(fetched), "queued": len(queued),
            "lost": len(missing), "lost_sample": sorted(missing)[:10],
            "queued_and_fetched": len(queued & set(fetched)),
            "queued_and_fetched_sample": sorted(queued & set(fetched))[:10]}


def emit(out, row: dict) -> None:
    line = json.dumps(row)
    print(line, flush=True)
    out.write(line + "\n")
    out.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=43)
    p.add_argument("--hosts", type=int, default=10000)
    p.add_argument("--pages", type=int, default=1200000)
    p.add_argument("--page-bytes", type=int, default=10000)
    p.add_argument("--latency-ms", default="50-200", help="a number, or lo-hi drawn per host")
    p.add_argument("--seeds", type=int, default=20, help="start URLs (roots of the biggest hosts)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=32, help="CONCURRENT_REQUESTS a worker")
    p.add_argument("--target", type=int, default=500000, help="pages served before the stop")
    p.add_argument("--sample-s", type=float, default=10.0)
    p.add_argument("--resume-pages", type=int, default=20000)
    p.add_argument("--timeout-s", type=float, default=4 * 3600)
    p.add_argument("--census", action="store_true",
                   help="at each tenth, each worker writes the objects in its heap by type "
                        "(DIR/census<i>.jsonl)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--src", default="HEAD", help="git revision to run, or 'worktree'")
    p.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    a = p.parse_args()

    lat = [float(x) for x in a.latency_ms.split("-")]
    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "page_bytes": a.page_bytes,
            "latency_ms": lat[0] if len(lat) == 1 else lat, "crawl_delay_fraction": 0.0}
    settings = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": a.concurrency,
                "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": 0,
                "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0, "RETRY_TIMES": 2,
                "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0}
    for kv in a.set:
        k, _, v = kv.partition("=")
        settings[k] = v
    workdir = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="long-crawl-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out = open(workdir / "long.jsonl", "a")
    emit(out, {"machine": machine(), "code": SRC_DESC, "spec": spec, "settings": settings,
               "argv": sys.argv, "workdir": str(workdir)})
    t = time.perf_counter()
    bench = Bench(spec, workdir, a.seeds, {k: v for k, v in settings.items() if k not in STORES_OFF},
                  cache_mb=64)
    emit(out, {"reachable": len(bench.reachable), "hosts": a.hosts, "setup_s": round(time.perf_counter() - t, 1)})
    data = workdir / "data"
    try:
        ks_probe = None
        log = WebLog(bench.sw.log_path, bench.log_offset())
        t0, t0_wall = time.time(), time.time()
        crawl = Crawl(bench, settings, a.workers, data, workdir, census=a.census)
        samples = []
        next_census = a.target / 10
        deadline = time.monotonic() + a.timeout_s
        frontier = None
        while True:
            time.sleep(a.sample_s)
            if frontier is None:   # the crawl's keyspace exists once a worker joined it
                ks_probe = Keyspace.existing(bench.r, CRAWL_ID)
                if ks_probe is None:
                    continue
                frontier = Frontier(bench.r, ks_probe)
            s = sample(bench, crawl, log, frontier, ks_probe, data, t0)
            samples.append(s)
            emit(out, {"sample": s})
            if a.census and s["pages"] >= next_census:
                crawl.census()
                next_census += a.target / 10
            if s["pages"] >= a.target:
                break
            if any(pr.poll() is not None for pr in crawl.procs):
                raise SystemExit(f"a worker ended early (exit codes "
                                 f"{[pr.poll() for pr in crawl.procs]}); logs in {workdir}")
            if time.monotonic() > deadline:
                raise SystemExit(f"no {a.target} pages in {a.timeout_s} s")
        t_stop = time.perf_counter()
        codes = crawl.stop()
        stop_s = time.perf_counter() - t_stop
        samples.append(sample(bench, crawl, log, frontier, ks_probe, data, t0))
        runs = ranker_runs(crawl.logs, t0_wall)
        rows = tenths(samples, a.target, runs)
        for row in rows:
            emit(out, {"tenth": row})
        first, last = rows[1], rows[-1]
        rss_after_first = [max(x) for x in zip(*(r["worker_rss_mib"] for r in rows[1:]))]
        emit(out, {"crawl": {
            "pages": log.pages, "seconds": samples[-1]["t"], "stop_s": round(stop_s, 1),
            "exit_codes": codes, "ranker_runs": runs,
            "last_vs_second_pages_per_s": round(last["pages_per_s"] / first["pages_per_s"], 3),
            "last_vs_second_cpu_per_page": round(last["cpu_ms_per_page"] / first["cpu_ms_per_page"], 3),
            "rss_growth_after_first_tenth": [round(m / f - 1, 3) for m, f in
                                             zip(rss_after_first, rows[0]["worker_rss_mib"])],
            "refetched": sum(1 for u, n in log.counts.items()
                             if n > (3 if log.status.get(u) in RETRY_STATUS else 1))}})

        # -- stop everything and start again -------------------------------
        before = frontier.counters()
        used_before = bench.r.info("memory")["used_memory"]
        keys_before = bench.r.dbsize()
        with contextlib.suppress(redis.ConnectionError):
            bench.r.shutdown()
        bench.redis_proc.wait(120)
        aof = sum(f.stat().st_size for f in (workdir / "redis").rglob("*") if f.is_file()
                  and ("aof" in f.name or f.suffix == ".rdb"))
        t = time.perf_counter()
        bench.redis_proc = spawn_server(bench.port, workdir / "redis", appendonly=True, timeout=600)
        while True:
            try:
                if not bench.r.info("persistence")["loading"]:
                    break
            except redis.BusyLoadingError:
                pass
            time.sleep(0.05)
        load_s = time.perf_counter() - t
        after = frontier.counters()
        queued = queued_urls(frontier)
        check = lost(bench, log.counts, queued)
        emit(out, {"restart": {
            "load_s": round(load_s, 2), "persistence_bytes": aof,
            "used_memory_before": used_before, "used_memory_after": bench.r.info("memory")["used_memory"],
            "keys_before": keys_before, "keys_after": bench.r.dbsize(),
            "counters_same": {k: before.get(k) == after.get(k) for k in ("enqueued", "queued", "leased")},
            "queued_counter": after.get("queued"), **check}})

        # -- resume ----------------------------------------------------------
        before_pages = log.pages
        seen_before = set(log.counts)
        t1 = time.time()
        crawl2 = Crawl(bench, settings, a.workers, data, workdir)
        first_page = None
        while log.pages < before_pages + a.resume_pages:
            time.sleep(1.0)
            log.read()
            if first_page is None and log.pages > before_pages:
                first_page = time.time() - t1
            if any(pr.poll() is not None for pr in crawl2.procs) or time.monotonic() > deadline:
                break
        took = time.time() - t1
        codes2 = crawl2.stop()
        log.read()
        again = [u for u in log.counts if u in seen_before and log.counts[u] > 1
                 and log.status.get(u) not in RETRY_STATUS]
        emit(out, {"resume": {
            "pages": log.pages - before_pages, "seconds": round(took, 1),
            "first_page_s": round(first_page, 1) if first_page else None,
            "pages_per_s": round((log.pages - before_pages) / max(took - (first_page or 0), 1e-9), 1),
            "fetched_before_and_again": len(again), "sample": again[:10], "exit_codes": codes2}})
    finally:
        bench.close()
        out.close()


if __name__ == "__main__":
    main()
