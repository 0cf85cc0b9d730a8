"""How far to trust the dashboard's ETA: its estimates during real crawls of
the simulated web against when each crawl really ended.

    .venv/bin/python bench/eta_bench.py [--webs "hosts=60,pages=3000,seed=1;..."]
        [--workers 2] [--every 1.0] [--set FRONTIER_DELAY_FACTOR=1,...]

For each web: a fresh Redis server, `scrapy crawl web` workers (tests/e2e.py
Workers, MONITOR_INTERVAL 1, history one sample a second), and the crawl's
status read every --every seconds (crawlproj/monitor/status.py, as the
dashboard does) until the workers exit. The crawl's end is its last fetch in
the simulated web's own request log. At each read, the time truly left
against the ETA (eta.py: the drain rate of the work left, and the busiest
host's pace) and against the queue divided by the pages/s of now (what the
dashboard said before): at the reads nearest each tenth of the crawl, and
the median of |estimate - truth| / truth over the reads after the first
tenth, with how often each was within a quarter of the truth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.monitor.status import crawl_status  # noqa: E402
from crawlproj.redis.keyspace import Keyspace, NoSuchCrawl  # noqa: E402
from crawlproj.simweb.testing import SimWebServer  # noqa: E402
from tests.conftest import RedisServer  # noqa: E402
from tests.e2e import Workers  # noqa: E402


def _web(text: str) -> dict:
    spec = {"latency_ms": [2, 20], "page_bytes": 2000}
    for part in text.split(","):
        k, v = part.split("=")
        spec[k] = float(v) if "." in v else int(v)
    return spec


def one(spec: dict, workers: int, every: float, tmp: Path, extra: dict) -> dict:
    server = RedisServer(tmp / "redis")
    r = server.client()
    reads = []
    try:
        with SimWebServer(spec, log_path=str(tmp / "web.jsonl")) as sw:
            w = Workers(sw, server.url, tmp, sw.web.seeds(3), "eta",
                        {"MONITOR_INTERVAL": 1, "MONITOR_HISTORY": "[[1, 3600], [60, 10080]]",
                         "LOG_LEVEL": "WARNING", **extra})
            w.start(workers)
            while any(p.poll() is None for p in w.procs):
                time.sleep(every)
                try:
                    s = crawl_status(r, Keyspace.found(r, "eta"), pages_per_host=False,
                                     with_history=False)
                except NoSuchCrawl:
                    continue
                now = s["rates"]["pages_s_now"]
                reads.append({"t": time.time(), "eta": s["eta"]["eta_s"],
                              "lower": s["eta"]["lower_bound"], "basis": s["eta"]["basis"],
                              "naive": s["queued"] / now if now > 0 else None,
                              "fetched": s["fetched"], "state": s["state"]})
            codes = w.wait()
            records = sw.settle_log()
    finally:
        server.stop()
    start = min(x["t0"] for x in records)
    end = max(x["t1"] for x in records)
    duration = end - start
    rows, errs = [], {"eta": [], "naive": []}
    within = {"eta": 0, "naive": 0}
    counted = 0
    for x in reads:
        left = end - x["t"]
        share = (x["t"] - start) / duration
        x["left"], x["share"] = left, share
        if share < 0.1 or left <= 1.0:
            continue
        counted += 1
        for k in ("eta", "naive"):
            if x[k] is not None:
                e = abs(x[k] - left) / left
                errs[k].append(e)
                within[k] += e <= 0.25
    for tenth in range(1, 10):
        near = min(reads, key=lambda x: abs(x["share"] - tenth / 10), default=None)
        if near is not None:
            rows.append({"tenth": tenth, "left_s": round(near["left"], 1), "eta_s": near["eta"],
                         "lower_bound": near["lower"],
                         "naive_s": None if near["naive"] is None else round(near["naive"], 1),
                         "basis": near["basis"]})
    return {"web": spec, "settings": extra, "workers": workers, "codes": codes, "pages": len(records),
            "duration_s": round(duration, 1), "reads": len(reads), "reads_counted": counted,
            "median_rel_error": {k: round(statistics.median(v), 3) if v else None
                                 for k, v in errs.items()},
            "within_25pct": {k: f"{within[k]}/{counted}" for k in within},
            "unknown": {k: counted - len(errs[k]) for k in errs},
            "tenths": rows}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--webs", default="hosts=60,pages=3000,seed=1;hosts=20,pages=2000,seed=2")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--every", type=float, default=1.0)
    p.add_argument("--set", default="", help="worker settings, NAME=VALUE,...")
    args = p.parse_args()
    extra = dict(x.split("=", 1) for x in args.set.split(",") if x)
    out = []
    for text in args.webs.split(";"):
        with tempfile.TemporaryDirectory() as d:
            out.append(one(_web(text), args.workers, args.every, Path(d), extra))
    print(json.dumps({"runs": out, "load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
