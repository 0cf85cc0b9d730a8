"""What the operator's view costs, and how fast it answers.

    .venv/bin/python bench/operator_bench.py [--workers 2,10] [--hosts 10000]
        [--rounds 20] [--src REV] [--parts history,records,app]

1. History, Redis bytes: a fresh server (crawlproj.redis.embedded.spawn_server)
   where W simulated workers send the real heartbeat (Heartbeat.command(),
   with ~120 counters and the default rings' layout) into a ring of 1,440
   slots of 20 ms, all W in every slot: MEMORY USAGE of the ring is one day
   of the default 1-minute ring; the 10 s ring is bounded at 360 samples (an
   hour), so a day of crawl costs the first, a crawl of a week 7x it plus
   the second, never more.
2. History, worker CPU: Heartbeat.command() with the default rings against
   none (2,000 each, 150 growing counters): the microseconds one heartbeat's
   history adds, and that as a share of a core at one heartbeat per 5 s.
3. Host records, Redis: the frontier's script (lua/sync.lua) of this tree
   against --src's (default main), both loaded in one server, the same
   rounds of work on --hosts hosts (enqueue 5 URLs each, lease and release
   every host once per round), in the order this, src, src, this, twice: server
   microseconds per lease and release (INFO commandstats, evalsha) for each
   run, and MEMORY USAGE of the ``hs`` hash per host.
4. The web app with --hosts hosts: a crawl of that many hosts (5 URLs each,
   200 leased, every host released once so each has a record, a history of
   60 samples), `scrapy ui` against it, and the time of GET /api/status,
   /api/hosts (sorted by queue, and by wait with a search) and /api/host:
   median and max of --rounds requests each (urllib on loopback).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import redis as redis_lib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy.utils.test import get_crawler  # noqa: E402

from crawlproj.due.urlseen import SEEN_LUA  # noqa: E402
from crawlproj.frontier.frontier import SYNC_LUA, SYNC_PARTS, Batch, Frontier, Host, Release  # noqa: E402
from crawlproj.monitor.heartbeat import Heartbeat  # noqa: E402
from crawlproj.redis.embedded import free_port, spawn_server  # noqa: E402
from crawlproj.redis.keyspace import Keyspace  # noqa: E402

DEFAULT_RINGS = [(10_000, 360), (60_000, 10_080)]


def _server(tmp: Path):
    port = free_port()
    proc = spawn_server(port, tmp / f"redis-{port}")
    return proc, redis_lib.Redis(port=port)


def _beats(r, crawl: str, workers: int, rings) -> list[Heartbeat]:
    beats = []
    for w in range(workers):
        beat = Heartbeat(get_crawler(), r, Keyspace(crawl, 1), 5.0, 30.0, rings)
        beat.worker = f"worker-{w}.example:{40000 + w}:5f3a9c"  # host:pid:random, as the scheduler names it
        for k in range(120):
            beat.stats.set_value(f"counter/{k}", k)
        beats.append(beat)
    return beats


def history_bytes(workers: int, tmp: Path) -> dict:
    proc, r = _server(tmp)
    try:
        Keyspace.open(r, "h", 1)
        slot_ms, kept = 20, 1440
        beats = _beats(r, "h", workers, [(slot_ms, kept)])
        for i in range(kept + 20):
            t0 = time.monotonic()
            for beat in beats:
                for name in ("figures/attempts", "figures/document_bytes", "figures/errors/4xx"):
                    beat.stats.inc_value(name, 1 + i % 5)
                beat.answered(r.execute_command(*beat.command()))
            time.sleep(max(0.0, slot_ms / 1000 - (time.monotonic() - t0)))
        ring = Keyspace("h", 1).history_ring(slot_ms)
        samples = r.hlen(ring)
        size = r.memory_usage(ring, samples=0)
        return {"workers": workers, "samples": samples, "ring_bytes": size,
                "bytes_per_sample": round(size / samples), "bytes_per_day_1min": size * 1440 // samples,
                "bytes_1h_of_10s": size * 360 // samples}
    finally:
        proc.kill()
        proc.wait()


def worker_cpu() -> dict:
    out = {}
    for name, rings in (("none", []), ("default rings", DEFAULT_RINGS)):
        beat = Heartbeat(get_crawler(), None, Keyspace("bench", 1), 5.0, 30.0, rings)
        beat.worker = "w0"
        n = 2000
        t0 = time.process_time()
        for i in range(n):
            for k in range(150):
                beat.stats.inc_value(f"counter/{k}", 1 + (i + k) % 3)
            beat.command()
            beat.answered(0)
        out[name] = (time.process_time() - t0) / n
    extra = out["default rings"] - out["none"]
    return {"us_per_heartbeat_without": round(out["none"] * 1e6, 1),
            "us_per_heartbeat_with": round(out["default rings"] * 1e6, 1),
            "history_us_per_heartbeat": round(extra * 1e6, 1),
            "history_share_of_a_core_at_5s": extra / 5.0}


def _show(rev: str, path: str) -> str | None:
    run = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True)
    return run.stdout if run.returncode == 0 else None


def _script_of(rev: str) -> str:
    """The sync script of revision rev: its parts (SYNC_PARTS) where it has
    them, else the one file of older trees after the DUE's seen test."""
    parts = [_show(rev, "/".join(package.split(".")) + "/lua/" + name) for package, name in SYNC_PARTS]
    if all(part is not None for part in parts):
        return "".join(parts)
    return SEEN_LUA + _show(rev, "crawlproj/frontier/lua/sync.lua")


def host_records(hosts: int, src: str, tmp: Path, rounds: int = 3) -> dict:
    proc, r = _server(tmp)
    try:
        result = {}
        ours, theirs = ("this tree", SYNC_LUA), (src, _script_of(src))
        for k, (name, script) in enumerate((ours, theirs, theirs, ours) * 2):  # ABBA: drift cancels
            crawl = f"rec-{k}"
            f = Frontier(r, Keyspace.open(r, crawl, 1), lease_ttl=60)
            f._sha = r.script_load(script)
            f.due.set_up()
            entries = [f.entry(f"h{i}.ex", f"http://h{i}.ex/{j}", float(j), b"x" * 60)
                       for i in range(hosts) for j in range(5)]
            for i in range(0, len(entries), 2000):
                f.sync({0: Batch(enqueue=entries[i:i + 2000])})
            r.config_resetstat()
            releases = 0
            for _ in range(rounds):
                leased = []
                while len(leased) < hosts:
                    got = f.sync({0: Batch(lease=500)})[0].leased
                    if not got:
                        break
                    leased += got
                for i in range(0, len(leased), 500):
                    f.sync({0: Batch(release=[Release(x.host, x.token, Host.OK, "done", 0)
                                              for x in leased[i:i + 500]])})
                releases += len(leased)
            stats = r.info("commandstats").get("cmdstat_evalsha", {})
            result.setdefault(name, []).append(round(stats.get("usec", 0) / max(1, releases), 2))
            if name == "this tree":
                hs = f.keyspace.host_records(0)
                result["hs_bytes_per_host"] = round(r.memory_usage(hs, samples=0) / r.hlen(hs), 1)
            r.flushall()
        result["usec_per_release_and_lease"] = {name: result.pop(name) for name in (ours[0], src)}
        result["medians"] = {name: statistics.median(v)
                             for name, v in result["usec_per_release_and_lease"].items()}
        return result
    finally:
        proc.kill()
        proc.wait()


def _get(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as res:
        body = res.read()
    return time.perf_counter() - t0, len(body)


def app_answer_time(hosts: int, rounds: int, tmp: Path) -> dict:
    proc, r = _server(tmp)
    port = free_port()
    ui = None
    try:
        f = Frontier(r, Keyspace.open(r, "big", 1), lease_ttl=600)
        entries = [f.entry(f"h{i}.ex", f"http://h{i}.ex/{j}", float(j), b"x" * 60)
                   for i in range(hosts) for j in range(5)]
        for i in range(0, len(entries), 2000):
            f.sync({0: Batch(enqueue=entries[i:i + 2000])})
        leased = []
        while len(leased) < hosts:  # every host released once: each has a record
            got = f.sync({0: Batch(lease=1000)})[0].leased
            if not got:
                break
            leased += got
        for i in range(0, len(leased) - 200, 1000):
            chunk = leased[i:min(i + 1000, len(leased) - 200)]
            f.sync({0: Batch(release=[Release(x.host, x.token, Host.OK, "return", 2000)
                                      for x in chunk])})
        beats = _beats(r, "big", 2, [(1000, 3600), (60_000, 10_080)])
        for _ in range(60):
            for beat in beats:
                beat.stats.inc_value("figures/attempts", 10)
                beat.answered(r.execute_command(*beat.command()))
            time.sleep(1.0)
        env = dict(os.environ, REDIS_URL=f"redis://127.0.0.1:{r.connection_pool.connection_kwargs['port']}/0",
                   CRAWL_ID="big", CRAWL_DATA_DIR=str(tmp / "data"))
        ui = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ui.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        out = {"hosts": hosts, "rounds": rounds}
        for name, path in (("status", "/api/status"), ("status_since", "/api/status?since=%d"),
                           ("hosts_by_queue", "/api/hosts?sort=queue&n=100"),
                           ("hosts_by_wait_searched", "/api/hosts?sort=wait&q=h99&n=100"),
                           ("host", "/api/host?name=h4242.ex"), ("metrics", "/metrics")):
            times, size = [], 0
            for _ in range(rounds):
                url = base + (path % (int(time.time() * 1000) - 5000) if "%d" in path else path)
                took, size = _get(url)
                times.append(took)
            out[name] = {"median_ms": round(statistics.median(times) * 1000, 1),
                         "max_ms": round(max(times) * 1000, 1), "bytes": size}
        return out
    finally:
        if ui is not None:
            ui.terminate()
            ui.wait(30)
        proc.kill()
        proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="2,10")
    p.add_argument("--hosts", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--src", default="main", help="the frontier script to compare with (a git rev)")
    p.add_argument("--parts", default="history,records,app", help="which of the four to run")
    args = p.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {}
        if "history" in parts:
            out["history_bytes"] = [history_bytes(int(w), tmp) for w in args.workers.split(",")]
            out["history_worker_cpu"] = worker_cpu()
        if "records" in parts:
            out["host_records"] = host_records(args.hosts, args.src, tmp)
        if "app" in parts:
            out["app"] = app_answer_time(args.hosts, args.rounds, tmp)
        out["load"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
