"""The ranker's memory on a crawl's data: one process runs Ranker.run_once
--runs times and reports its RSS after each run and its peak.

    .venv/bin/python bench/ranker_memory.py --dir DIR [--crawl-id long] [--runs 2]

DIR is a bench/long_crawl.py work directory: its server's data (DIR/redis)
is loaded by a server with the embedded configuration on a free port, and
the link store is read from DIR/data. The run rewrites the queued URLs'
scores there, as the crawl's ranker would.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import redis
from scrapy.settings import Settings

from crawlproj.ranker.process import build
from crawlproj.redis.embedded import free_port, spawn_server


def rss_mib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="a bench/long_crawl.py work directory")
    p.add_argument("--crawl-id", default="long")
    p.add_argument("--runs", type=int, default=2)
    a = p.parse_args()
    root = Path(a.dir)
    port = free_port()
    server = spawn_server(port, root / "redis", appendonly=True, timeout=600)
    try:
        r = redis.Redis(port=port)
        while True:
            try:
                if not r.info("persistence")["loading"]:
                    break
            except redis.BusyLoadingError:
                pass
            time.sleep(0.1)
        s = Settings()
        s.setmodule("settings.base", priority="project")
        s.setdict({"REDIS_URL": f"redis://127.0.0.1:{port}/0", "CRAWL_ID": a.crawl_id,
                   "CRAWL_DATA_DIR": str(root / "data"), "FRONTIER_PRIORITIZER": "pagerank"},
                  priority="cmdline")
        ranker, _ = build(s)
        start = rss_mib()
        for i in range(a.runs):
            run = ranker.run_once()
            print(json.dumps({"run": i + 1, "nodes": run.nodes, "links": run.edges,
                              "queued": run.queued, "start_rss_mib": start, "rss_mib": rss_mib(),
                              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                              "seconds": {k: round(v, 2) for k, v in run.seconds.items()}}), flush=True)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
