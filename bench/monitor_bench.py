"""What watching a crawl costs the Redis server: heartbeats, the dashboard,
and an idle (paused) crawl.

    .venv/bin/python bench/monitor_bench.py [--workers 10] [--seconds 60]
        [--hosts 2000 --urls 20000] [--idle-seconds 30]

1. Dashboard: one fresh server (crawlproj.redis.embedded.spawn_server, AOF on)
   holds a crawl with --urls queued URLs on --hosts hosts. --workers
   simulated workers send the real heartbeat (Heartbeat.command(): one
   heartbeat.lua call with the growth of ~120 counters, as a worker's Scrapy
   stats have) every MONITOR_INTERVAL (5 s), and a dashboard reads the crawl's
   status (crawlproj/monitor/status.py) every second, pages per host every
   30 s as `scrapy ui` does. The server's CPU (utime + stime from
   /proc/PID/stat) over --seconds, as a share of one core: first heartbeats
   alone, then heartbeats and the dashboard.
2. Worker side: the CPU one heartbeat costs a worker (Heartbeat.command()
   and answered() over 150 growing counters, 2,000 times), as a share of a
   core at one heartbeat per MONITOR_INTERVAL: the bound on what heartbeats
   take from a worker's pages/s, which a shared machine's noise hides in
   whole crawls (bench/crawl_bench.py, docs/benchmarks.md).
3. Idle: two real `scrapy crawl web` workers on a simulated web, paused with
   crawlproj.monitor.control after they start; over --idle-seconds, each
   worker's round trips (frontier/redis_writes from its heartbeats, server
   clock) per second, and the server's CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis as redis_lib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy.utils.test import get_crawler  # noqa: E402

from crawlproj.frontier.frontier import Batch, Frontier  # noqa: E402
from crawlproj.monitor import control  # noqa: E402
from crawlproj.monitor.heartbeat import Heartbeat  # noqa: E402
from crawlproj.monitor.status import crawl_status  # noqa: E402
from crawlproj.redis.embedded import free_port, spawn_server  # noqa: E402
from crawlproj.redis.keyspace import Keyspace  # noqa: E402
from crawlproj.simweb.testing import SimWebServer  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def share(pid: int, seconds: float, work) -> float:
    """The server's CPU over `seconds` of work(now) calls, as a share of a core."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - t0 < seconds:
        work(time.monotonic() - t0)
        time.sleep(0.05)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def dashboard(args, tmp: Path) -> dict:
    port = free_port()
    proc = spawn_server(port, tmp / "redis")
    r = redis_lib.Redis(port=port)
    try:
        f = Frontier(r, Keyspace.open(r, "bench", 1))
        entries = [f.entry(f"h{i % args.hosts}.ex", f"http://h{i % args.hosts}.ex/{i}", float(i),
                           b"x" * 60) for i in range(args.urls)]
        for i in range(0, len(entries), 2000):
            f.sync({0: Batch(enqueue=entries[i:i + 2000])})
        f.sync({0: Batch(lease=200)})  # some hosts leased, some on the heap
        beats = []
        for w in range(args.workers):
            beat = Heartbeat(get_crawler(), r, Keyspace("bench", 1), 5.0, 30.0)
            beat.worker = f"w{w}"
            beats.append(beat)
        next_beat = [w * 5.0 / args.workers for w in range(args.workers)]
        step = [0]

        def heartbeats(now):
            for w, beat in enumerate(beats):
                if now >= next_beat[w]:
                    step[0] += 1
                    for k in range(120):  # a worker's counters, growing
                        beat.stats.inc_value(f"counter/{k}", k + step[0] % 7)
                    beat.answered(r.execute_command(*beat.command()))
                    next_beat[w] += 5.0

        last = [-1.0, -30.0]

        def with_dashboard(now):
            heartbeats(now)
            if now - last[0] >= 1.0:
                last[0] = now
                fresh = now - last[1] >= 30.0
                if fresh:
                    last[1] = now
                crawl_status(r, Keyspace.found(r, "bench"), pages_per_host=fresh)

        alone = share(proc.pid, args.seconds, heartbeats)
        both = share(proc.pid, args.seconds, with_dashboard)
        return {"workers": args.workers, "hosts": args.hosts, "urls": args.urls,
                "seconds": args.seconds, "heartbeats_cpu": round(alone, 4),
                "heartbeats_and_dashboard_cpu": round(both, 4),
                "dashboard_cpu": round(both - alone, 4)}
    finally:
        proc.kill()
        proc.wait()


def worker_side(args) -> dict:
    beat = Heartbeat(get_crawler(), None, Keyspace("bench", 1), 5.0, 30.0)
    beat.worker = "w0"
    n = 2000
    t0 = time.process_time()
    for i in range(n):
        for k in range(150):
            beat.stats.inc_value(f"counter/{k}", 1 + (i + k) % 3)
        beat.command()
        beat.answered(0)
    per_round = (time.process_time() - t0) / n
    t0 = time.process_time()
    for i in range(n):
        for k in range(150):
            beat.stats.inc_value(f"counter/{k}", 1 + (i + k) % 3)
    growth_only = (time.process_time() - t0) / n
    per_beat = per_round - growth_only
    return {"us_per_heartbeat": round(per_beat * 1e6, 1),
            "share_of_a_core_at_5s": per_beat / 5.0}


def idle(args, tmp: Path) -> dict:
    port = free_port()
    proc = spawn_server(port, tmp / "redis-idle")
    url = f"redis://127.0.0.1:{port}/0"
    r = redis_lib.Redis(port=port)
    web = {"seed": 7, "hosts": 200, "pages": 2000, "page_bytes": 2000, "latency_ms": [2, 8]}
    workers = []
    try:
        with SimWebServer(web) as sw:
            seeds = tmp / "seeds.txt"
            seeds.write_text("\n".join(sw.web.seeds(3)) + "\n")
            env = sw.env()
            env.update(REDIS_URL=url, CRAWL_ID="idle", CRAWL_DATA_DIR=str(tmp / "data"))
            for i in range(2):
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
                     "-s", "CRAWL_SCOPE=any", "-s", "DEPTH_LIMIT=0", "-s", "MONITOR_INTERVAL=5",
                     "-s", "LOG_LEVEL=WARNING"], cwd=ROOT, env=env,
                    stdout=subprocess.DEVNULL, stderr=open(tmp / f"idle{i}.log", "wb")))
            while len(sw.read_log()) < 200:
                time.sleep(0.2)
            ks = Keyspace.found(r, "idle")
            control.control(r, ks, "pause")
            time.sleep(8)  # the downloads under way end; every worker has heard

            def writes():
                s = crawl_status(r, ks, pages_per_host=False)
                return {w["id"]: (w["last_heartbeat_ms"], w["counters"].get("frontier/redis_writes", 0))
                        for w in s["workers"]}

            before = writes()
            cpu = share(proc.pid, args.idle_seconds, lambda now: None)
            after = writes()
            rates = [round((after[w][1] - before[w][1]) / ((after[w][0] - before[w][0]) / 1000), 3)
                     for w in before if w in after and after[w][0] > before[w][0]]
            control.control(r, ks, "stop")
            for p in workers:
                p.wait(60)
        return {"workers": 2, "seconds": args.idle_seconds, "round_trips_per_s": rates,
                "redis_cpu": round(cpu, 4)}
    finally:
        for p in workers:
            if p.poll() is None:
                p.kill()
        proc.kill()
        proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=10)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--urls", type=int, default=20000)
    p.add_argument("--idle-seconds", type=float, default=30)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = {"worker": worker_side(args), "dashboard": dashboard(args, Path(d)),
               "idle": idle(args, Path(d)),
               "loadavg": os.getloadavg()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
