"""Chaos counts: two workers crawl the simulated web while Redis or a worker fails.

    .venv/bin/python bench/chaos_bench.py [--scenarios none,redis-down,...] [--ttl 10]
        [--hosts 200 --pages 3000] [--out chaos.json]

The web: 3,000 pages on 200 hosts (host sizes ~ 1/rank^0.5), 10 % of the
hosts with a Crawl-delay of 1 s, latency 20-80 ms a host (the web of issue
18's measurements). Two real `scrapy crawl web` workers (tests/e2e.py
Workers: the whole web, FRONTIER_DELAY_FACTOR=2, FRONTIER_LEASE_TTL=--ttl,
project defaults otherwise) on a real Redis server with AOF (everysec), one
fault each, a third of the way into the crawl:

  none            no fault (the control)
  redis-down      Redis killed, restarted from its AOF 2 TTLs + 5 s later
  redis-paused    Redis stopped (SIGSTOP) for 20 s
  worker-stopped  worker 0 stopped (SIGSTOP) for 3 TTLs
  redis-oom       maxmemory set to 1 byte (noeviction); when both workers
                  have ended, set back, and a third worker finishes the crawl
  redis-empty     Redis (no AOF) killed and restarted empty
  embedded-killed one worker on the embedded server (REDIS_URL unset); the
                  server SIGKILLed

Counted from the simulated web's own request log (crawlproj.simweb.checks):
pages fetched of those reachable, requests, URLs fetched twice, of them those
whose first fetch began after the workers could know of the fault (the fault
+ LONGEST_SLEEP, + STALLED when the server hangs: tests/test_chaos.py), pairs
of requests to one host at once (overlaps), and politeness gap violations
(a request sooner after the host's previous one than FRONTIER_DELAY_FACTOR x
its duration or its Crawl-delay, less 5 ms). For the stop cases: how long after the
fault the workers had ended, and their finish reasons.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.frontier.sync import LONGEST_SLEEP  # noqa: E402
from crawlproj.redis.groupcommit import STALLED  # noqa: E402
from crawlproj.simweb import checks  # noqa: E402
from crawlproj.simweb.testing import SimWebServer  # noqa: E402
from tests.conftest import RedisServer, _force_stop_embedded  # noqa: E402
from tests.e2e import Workers, stat  # noqa: E402
from tests.test_chaos import twice_after  # noqa: E402

WEB = {"seed": 1818, "hosts": 200, "pages": 3000, "page_bytes": 1500, "latency_ms": [20, 80],
       "crawl_delay_fraction": 0.1, "crawl_delay": 1.0, "p500": 0.0, "host_zipf": 0.5}
FACTOR = 2.0
SCENARIOS = ["none", "redis-down", "redis-paused", "worker-stopped", "redis-oom",
             "redis-empty", "embedded-killed"]
STOPPED_UA = "crawlproj-bench stopped"


def run(name: str, ttl: float, web: dict, work: Path) -> dict:
    tmp = work / name
    tmp.mkdir(parents=True)
    aof = name != "redis-empty"
    server = None if name == "embedded-killed" else RedisServer(tmp / "redis", appendonly=aof)
    settings = {"FRONTIER_LEASE_TTL": ttl, "RETRY_TIMES": 0, "FRONTIER_DELAY_FACTOR": FACTOR}
    if name == "embedded-killed":
        settings["CRAWL_DATA_DIR"] = str(tmp / "embedded")
    out: dict = {"scenario": name}
    try:
        with SimWebServer(web, log_path=str(tmp / "web.jsonl")) as sw:
            seeds = sw.web.seeds(2)
            reachable = sw.web.reachable(seeds, obey_robots=True)
            workers = Workers(sw, server.url if server else "", tmp, seeds, name, settings)
            n = 1 if name == "embedded-killed" else 2
            workers.start(1, settings={"USER_AGENT": STOPPED_UA} if name == "worker-stopped"
                          else None)
            if n == 2:
                workers.start(1)
            sw.wait_log(len(reachable) // 3, timeout=300)
            fault_at = time.time()
            known_at = fault_at + LONGEST_SLEEP
            ended_s = None
            if name == "redis-down":
                server.kill()
                time.sleep(2 * ttl + 5)
                server.restart()
            elif name == "redis-paused":
                server.proc.send_signal(signal.SIGSTOP)
                time.sleep(20)
                server.proc.send_signal(signal.SIGCONT)
                known_at += STALLED
            elif name == "worker-stopped":
                known_at = fault_at
                Workers.signal(workers.procs[0], signal.SIGSTOP)
                time.sleep(3 * ttl)
                Workers.signal(workers.procs[0], signal.SIGCONT)
            elif name == "redis-oom":
                with server.client() as c:
                    c.config_set("maxmemory", "1")
            elif name == "redis-empty":
                server.kill()
                time.sleep(0.5)
                server.restart()
            elif name == "embedded-killed":
                state = json.loads((tmp / "embedded" / "redis" / "server.json").read_text())
                os.kill(state["pid"], signal.SIGKILL)
            if name in ("redis-oom", "redis-empty"):
                for p in workers.procs:
                    p.wait(300)
                ended_s = round(time.time() - fault_at, 1)
                if name == "redis-oom":
                    with server.client() as c:
                        c.config_set("maxmemory", "0")
                    time.sleep(ttl + 0.5)  # the stopped workers' leases expire
                    workers.start(1, seeds=False)
            codes = workers.wait(900)
            records = sw.settle_log()
            logs = [workers.log(i) for i in range(len(workers.procs))]
            counts = checks.fetch_counts(records)
            pages = [r for r in records if r["path"] not in checks.ROBOTS]
            out.update(
                reachable=len(reachable), fetched=len(set(counts) & reachable),
                requests=len(pages), fetched_twice=sum(1 for c in counts.values() if c > 1),
                twice_after_known=len(twice_after(records, known_at)),
                overlaps=len(checks.overlaps(records)),
                politeness_violations=len(checks.politeness_violations(
                    records, factor=FACTOR, crawl_delay_of=sw.web.crawl_delay, tolerance=0.005)),
                exit_codes=codes, ended_s=ended_s,
                finish_reasons=[m[1] if (m := re.search(r"'finish_reason': '([^']+)'", log))
                                else None for log in logs],
                expired_dropped=[stat(log, "frontier/expired_dropped") for log in logs],
                redis_errors=[stat(log, "frontier/redis_errors") for log in logs],
                duration_s=round(max(r["t1"] for r in records) - min(r["t0"] for r in records), 1),
            )
            if name == "worker-stopped":
                resumed = fault_at + 3 * ttl
                taken = {checks.url_of(r) for r in pages
                         if r["ua"] != STOPPED_UA and r["t0"] > fault_at}
                # pages the resumed worker fetched after another took them over
                out["stale_fetches"] = sum(1 for r in pages if r["ua"] == STOPPED_UA
                                           and r["t0"] > resumed and checks.url_of(r) in taken)
    finally:
        if server is not None:
            server.stop()
        if name == "embedded-killed":
            _force_stop_embedded(tmp / "embedded")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--ttl", type=float, default=10.0)
    ap.add_argument("--hosts", type=int, default=WEB["hosts"])
    ap.add_argument("--pages", type=int, default=WEB["pages"])
    ap.add_argument("--out", help="write the results as JSON here too")
    ap.add_argument("--keep", help="run in this directory and keep the logs (default: a "
                    "temporary one, removed)")
    args = ap.parse_args()
    web = {**WEB, "hosts": args.hosts, "pages": args.pages}
    results = []
    with tempfile.TemporaryDirectory(prefix="chaos-bench-") as work:
        if args.keep:
            work = args.keep
        for name in args.scenarios.split(","):
            res = run(name, args.ttl, web, Path(work))
            print(json.dumps(res), flush=True)
            results.append(res)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
