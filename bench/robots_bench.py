"""robots.txt per host and Crawl-delay, counted from the simulated web's log.

    .venv/bin/python bench/robots_bench.py [--hosts 200 --pages 3000 --latency-ms 20-80]
        [--crawl-delay-fraction 0.1 --crawl-delay 0.5 --robots-fraction 0.2]
        [--workers 1,2,8] [--src HEAD] [--base main]

Real `scrapy crawl web` workers (1, 2 and 8 by default) crawl one simulated
web whose hosts answer after --latency-ms, a --crawl-delay-fraction of them
with a Crawl-delay in their robots.txt, on the code of --src and, in the same
invocation, on the code of --base (the robots.txt handling before: Scrapy's
RobotsTxtMiddleware in each worker). From the web's own request log, per run:

* robots.txt requests per host: the most any host got, how many hosts got more
  than one, and the total against the hosts contacted (one per host per crawl
  is the target, whatever the number of workers);
* Crawl-delay violations: consecutive requests to a Crawl-delay host, robots.txt
  included, closer than the delay (the target is 0);
* politeness violations: consecutive requests to any host, robots.txt included,
  closer than FRONTIER_DELAY_FACTOR x the earlier one's duration (server
  times; tolerance 5 ms), and overlapping requests;
* pages/s (pages fetched between the first request and the last response),
  and reachable pages missed.
The stores are off (crawl_bench.STORES_OFF); the rest as in crawl_bench.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crawl_bench import SRC_DESC, STORES_OFF, Bench, machine, tree  # sets up the code under test

from crawlproj.simweb import checks

ROBOTS = "/robots.txt"


def figures(records: list[dict], web, factor: float) -> dict:
    robots = Counter(r["host"] for r in records if r["path"] == ROBOTS)
    hosts = {r["host"] for r in records}
    delayed = {h for h in hosts if web.crawl_delay(h)}
    cd = checks.politeness_violations(records, factor=0.0, crawl_delay_of=web.crawl_delay,
                                      ignore_paths=(), tolerance=0.005)
    polite = checks.politeness_violations(records, factor=factor, crawl_delay_of=web.crawl_delay,
                                          ignore_paths=(), tolerance=0.005)
    return {
        "hosts": len(hosts),
        "robots_requests": sum(robots.values()),
        "robots_max_per_host": max(robots.values(), default=0),
        "hosts_with_several_robots": sum(1 for n in robots.values() if n > 1),
        "hosts_without_robots": len(hosts - set(robots)),
        "crawl_delay_hosts": len(delayed),
        "crawl_delay_violations": len(cd),
        "crawl_delay_violations_after_robots": sum(1 for v in cd if v.prev["path"] == ROBOTS),
        "politeness_violations": len(polite),
        "politeness_violations_after_robots": sum(1 for v in polite if v.prev["path"] == ROBOTS),
        "overlaps": len(checks.overlaps(records)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--pages", type=int, default=3000)
    p.add_argument("--page-bytes", type=int, default=2000)
    p.add_argument("--latency-ms", default="20-80", help="a number, or lo-hi drawn per host")
    p.add_argument("--crawl-delay-fraction", type=float, default=0.1)
    p.add_argument("--crawl-delay", type=float, default=0.5)
    p.add_argument("--robots-fraction", type=float, default=0.2)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--factor", type=float, default=2.0)
    p.add_argument("--workers", default="1,2,8", help="worker counts, comma-separated")
    p.add_argument("--src", default="HEAD", help="git revision to benchmark, or 'worktree'")
    p.add_argument("--base", default="main", help="git revision to compare with ('' for none)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    lat = [float(x) for x in a.latency_ms.split("-")] if "-" in a.latency_ms else float(a.latency_ms)
    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "page_bytes": a.page_bytes,
            "latency_ms": lat, "crawl_delay_fraction": a.crawl_delay_fraction,
            "crawl_delay": a.crawl_delay, "robots_fraction": a.robots_fraction}
    # the whole web: every host, at any depth (as tests/e2e.py crawls it)
    common = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": a.concurrency, "CRAWL_SCOPE": "any",
              "DEPTH_LIMIT": 0, "FRONTIER_DELAY_FACTOR": a.factor, "FRONTIER_MIN_DELAY": 0, "RETRY_TIMES": 0,
              **STORES_OFF}
    workdir = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="robots-bench-"))
    head = {"machine": machine(), "code": SRC_DESC, "base": a.base, "spec": spec,
            "settings": common, "argv": sys.argv, "workdir": str(workdir)}
    print(json.dumps(head), flush=True)
    bench = Bench(spec, workdir, a.seeds, common)
    trees = [("src", None)] + ([(f"@{a.base}", tree(a.base)[0])] if a.base else [])
    out = {}
    try:
        for n in [int(x) for x in a.workers.split(",")]:
            for label, src in trees:
                name = f"{label}-{n}w"
                res = bench.run(name.replace("@", "at-"), n, {}, src=src)
                f = figures(bench.last_records, bench.web, a.factor)
                f.update({k: res[k] for k in ("pages", "missing", "crawl_s", "pages_per_s",
                                              "exit_codes", "load_avg_before")})
                out[name] = f
                print(json.dumps({name: f}), flush=True)
        (workdir / "results.json").write_text(json.dumps({**head, **out}, indent=1))
        cols = ("hosts", "robots_requests", "robots_max_per_host", "crawl_delay_violations",
                "politeness_violations", "overlaps", "missing", "pages_per_s")
        print("| run | " + " | ".join(cols) + " |", file=sys.stderr)
        for name, f in out.items():
            print(f"| {name} | " + " | ".join(str(f[c]) for c in cols) + " |", file=sys.stderr)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
