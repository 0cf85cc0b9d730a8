"""What each trap of the simulated web costs a crawl: the measurements behind
the trap guard's defaults (docs/hardening.md).

    .venv/bin/python bench/traps_bench.py [--traps all] [--hosts 60 --pages 1200]
        [--workers 1] [-s NAME=VALUE ...] [--json]

One crawl of an ordinary simulated web with the trap hosts beside it
(crawlproj/simweb/traps.py), workers on a throw-away Redis server, settings
as given. Reported from the simulated web's request log: per trap host its
fetches and the wasted ones (beyond those worth making); the ordinary pages
fetched of those reachable; and from the workers' stats: refusals per rule
and each worker's peak memory over its start (memusage/max - startup). With
rules switched off a trap never ends: give CLOSESPIDER_TIMEOUT.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.redis.embedded import free_port, spawn_server  # noqa: E402
from crawlproj.simweb import checks  # noqa: E402
from crawlproj.simweb.testing import SimWebServer  # noqa: E402


def stats_of(log: str) -> dict[str, int]:
    if "Dumping Scrapy stats" not in log:
        return {}
    dump = log[log.index("Dumping Scrapy stats"):]
    return {k: int(v) for k, v in re.findall(r"'([^']+)': (\d+)[,}]", dump)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traps", default="all")
    ap.add_argument("--hosts", type=int, default=60)
    ap.add_argument("--pages", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("-s", dest="settings", action="append", default=[],
                    help="a setting for the workers, NAME=VALUE")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    spec = {"seed": opts.seed, "hosts": opts.hosts, "pages": opts.pages, "page_bytes": 4000,
            "latency_ms": [1, 4], "traps": opts.traps}
    settings = {"CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0, "MEMUSAGE_CHECK_INTERVAL_SECONDS": 1}
    settings.update(dict(s.split("=", 1) for s in opts.settings))
    with tempfile.TemporaryDirectory() as tmp_, SimWebServer(spec, log_path=f"{tmp_}/web.jsonl") as sw:
        tmp = Path(tmp_)
        port = free_port()
        server = spawn_server(port, tmp / "redis", appendonly=False)
        try:
            seeds = sw.web.seeds(3) + sw.web.trap_seeds()
            (tmp / "seeds.txt").write_text("\n".join(seeds) + "\n")
            env = sw.env()
            env.update(REDIS_URL=f"redis://127.0.0.1:{port}/0", CRAWL_ID="traps", CRAWL_DATA_DIR=str(tmp / "data"))
            cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={tmp}/seeds.txt"]
            for k, v in settings.items():
                cmd += ["-s", f"{k}={v}"]
            t0 = time.monotonic()
            procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(tmp / f"w{i}.log", "wb"),
                                      stderr=subprocess.STDOUT) for i in range(opts.workers)]
            codes = [p.wait() for p in procs]
            took = time.monotonic() - t0
            records = sw.settle_log()
        finally:
            server.kill()
            server.wait()
        logs = [(tmp / f"w{i}.log").read_text(errors="replace") for i in range(opts.workers)]
    stats: Counter = Counter()
    for log in logs:
        stats.update(stats_of(log))
    memory = [(s.get("memusage/max", 0) - s.get("memusage/startup", 0)) >> 20
              for s in map(stats_of, logs)]
    by_host = defaultdict(list)
    for r in records:
        by_host[r["host"]].append(r["path"])
    traps = {}
    for host in sw.web.traps.hosts():
        paths = by_host.get(host, [])
        traps[host.split(".")[0]] = {"fetches": len(paths),
                                     "wasted": sw.web.traps.wasted(host, paths)}
    ordinary = sw.web.reachable(sw.web.seeds(3))
    fetched = set(checks.fetch_counts(r for r in records if not r["host"].endswith(".trap.example")))
    out = {"settings": settings, "exit_codes": codes, "seconds": round(took, 1),
           "ordinary_reachable": len(ordinary), "ordinary_fetched": len(fetched & ordinary),
           "refused": {k.split("/", 2)[2]: v for k, v in sorted(stats.items())
                       if k.startswith("trapguard/refused/")},
           "near_duplicate_pages": stats.get("trapguard/near_duplicate_pages", 0),
           "timeouts": stats.get("record/failed/DownloadTimeoutError", 0),
           "links_capped": stats.get("web/links/capped", 0),
           "memory_growth_mb": memory, "traps": traps}
    if opts.json:
        print(json.dumps(out, indent=1))
        return
    for k, v in out.items():
        if k != "traps":
            print(f"{k}: {v}")
    print(f"{'trap':<18} {'fetches':>8} {'wasted':>7}")
    for name, t in out["traps"].items():
        print(f"{name:<18} {t['fetches']:>8} {t['wasted']:>7}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
