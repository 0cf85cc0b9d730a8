"""How many requests per second the simulated web serves.

    .venv/bin/python bench/simweb_bench.py [--hosts 300 --pages 3000 --page-bytes 1000]
        [--connections 32] [--duration 10] [--requests 200000]
        [--change-dist loguniform:0.00274:96 --day-seconds 10]

The server runs in its own process (testing.SimWebServer); this process is the
load generator: N keep-alive connections, one request in flight on each (as a
crawler does), absolute-form proxy requests.  The URL mix is what a crawler
would fetch: every URL reachable from the seeds (pages, redirects, 404s, 500s,
binary resources), shuffled.  Two phases:

* cold: each URL once, so every response is rendered (cache misses);
* warm: the same URLs again and again for --duration seconds (cache hits).

Reported per phase: requests/s, and the server's CPU seconds from
/proc/PID/stat, i.e. what one server core could do if it were saturated
(requests per server CPU-second).  When the client saturates its own core
first, the second figure is the server's capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from crawlproj.simweb.testing import SimWebServer


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client(asyncio.Protocol):
    """Keep-alive HTTP/1.1 client doing one request at a time from a shared
    URL iterator; parses only what it must (head end, Content-Length)."""

    def __init__(self, work, done: asyncio.Future, stats: dict):
        self.work, self.done, self.stats = work, done, stats
        self.buf = bytearray()
        self.need = -1  # total bytes of the current response once known

    def connection_made(self, transport):
        self.tr = transport
        self.next()

    def next(self):
        try:
            host, path = next(self.work)
        except StopIteration:
            self.tr.close()
            return
        self.t = time.perf_counter()
        self.tr.write(f"GET http://{host}{path} HTTP/1.1\r\nHost: {host}\r\n"
                      f"User-Agent: simweb-bench\r\n\r\n".encode())

    def data_received(self, data):
        self.buf += data
        if self.need < 0:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            i = self.buf.find(b"Content-Length: ", 0, end)
            length = int(self.buf[i + 16:self.buf.find(b"\r\n", i)])
            self.need = end + 4 + length
            self.stats["status"][int(self.buf[9:12])] = self.stats["status"].get(int(self.buf[9:12]), 0) + 1
        if len(self.buf) >= self.need:
            del self.buf[:self.need]
            self.stats["n"] += 1
            self.stats["bytes"] += self.need
            self.stats["lat"].append(time.perf_counter() - self.t)
            self.need = -1
            self.next()

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_result(None)


async def load(port: int, urls, connections: int, deadline: float, limit: int) -> dict:
    loop = asyncio.get_running_loop()
    stats = {"n": 0, "bytes": 0, "lat": [], "status": {}}

    def work():
        for i, u in enumerate(urls):
            if i >= limit or time.monotonic() > deadline:
                return
            yield u

    it = work()
    dones = []
    for _ in range(connections):
        fut = loop.create_future()
        await loop.create_connection(lambda fut=fut: Client(it, fut, stats), "127.0.0.1", port)
        dones.append(fut)
    await asyncio.gather(*dones)
    return stats


def phase(name: str, sw: SimWebServer, urls, connections: int, duration: float, limit: int) -> dict:
    c0, s0, t0 = time.process_time(), cpu_seconds(sw.pid), time.perf_counter()
    stats = asyncio.run(load(sw.port, urls, connections, time.monotonic() + duration, limit))
    wall = time.perf_counter() - t0
    c1, s1 = time.process_time(), cpu_seconds(sw.pid)
    lat = sorted(stats["lat"])
    out = {
        "phase": name,
        "requests": stats["n"],
        "seconds": round(wall, 2),
        "requests_per_s": round(stats["n"] / wall),
        "server_cpu_s": round(s1 - s0, 2),
        "server_cpu_pct": round(100 * (s1 - s0) / wall),
        "requests_per_server_cpu_s": round(stats["n"] / max(s1 - s0, 1e-9)),
        "client_cpu_pct": round(100 * (c1 - c0) / wall),
        "mb_per_s": round(stats["bytes"] / wall / 1e6, 1),
        "latency_ms_p50_p99": [round(1000 * lat[len(lat) // 2], 2),
                               round(1000 * lat[int(len(lat) * 0.99)], 2)] if lat else None,
        "statuses": dict(sorted(stats["status"].items())),
    }
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=300)
    p.add_argument("--pages", type=int, default=3000)
    p.add_argument("--page-bytes", type=int, default=1000, help="small pages (default 1000)")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--duration", type=float, default=10.0, help="seconds of the warm phase")
    p.add_argument("--requests", type=int, default=200000, help="at most this many warm requests")
    p.add_argument("--change-dist", help="serve changing pages (the spec's change_dist)")
    p.add_argument("--day-seconds", type=float, default=10.0, help="with --change-dist (default 10)")
    a = p.parse_args()
    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "page_bytes": a.page_bytes,
            "binary_bytes": min(4096, a.page_bytes), "latency_ms": 0, "crawl_delay_fraction": 0.0}
    if a.change_dist:
        spec.update(change_dist=a.change_dist, day_seconds=a.day_seconds)
    print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cpus, "
                      f"Python {platform.python_version()}", "spec": spec,
                      "connections": a.connections}), flush=True)
    with SimWebServer(spec) as sw:
        web = sw.web
        urls = sorted(web.reachable(web.seeds(1)))
        random.Random(a.seed).shuffle(urls)
        hp = [(u[7:].split("/", 1)[0], "/" + u[7:].split("/", 1)[1]) for u in urls]
        phase("cold", sw, hp, a.connections, 600.0, len(hp))

        def cycle():
            while True:
                yield from hp
        phase("warm", sw, cycle(), a.connections, a.duration, a.requests)


if __name__ == "__main__":
    main()
