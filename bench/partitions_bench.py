"""The frontier's Redis commands for one crawl, by partition count and server.

    .venv/bin/python bench/partitions_bench.py [--workers 2] [--hosts 200 --pages 1500]
        [--servers single,cluster] [--partitions 64,auto] [--out FILE]

The web of `scrapy demo` (seed 1, 200 hosts, 1500 pages, 1-5 ms latency),
crawled under settings.cluster by --workers `scrapy crawl web` workers, on one
server (crawlproj.redis.embedded.spawn_server) and on a Redis Cluster of three
primaries on loopback (tests/test_cluster.py's start_cluster), once per
partition count: a fixed one (CRAWLPROJ_FRONTIER_PARTITIONS=N) or "auto", the
count the crawl's first worker fits to the server (FRONTIER_PARTITIONS None).

Per run: the partitions the crawl got, URLs fetched (the simulated web's
log, robots.txt aside) against the reachable set (pages, redirect and 404
targets, images), the frontier's script calls
(frontier/redis_commands in every worker's stats, summed), and every command
the server or the cluster's primaries ran (INFO commandstats after CONFIG
RESETSTAT, the commands inside scripts and the other stores' included).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis
import redis.cluster

from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import stat
from tests.test_cluster import start_cluster


def commands_run(clients) -> int:
    """Commands the servers ran since their last CONFIG RESETSTAT."""
    total = 0
    for c in clients:
        total += sum(v["calls"] for k, v in c.info("commandstats").items()
                     if k not in ("cmdstat_info", "cmdstat_config|resetstat"))
    return total


def crawl(server: str, url: str, clients, partitions: str, args, tmp: Path) -> dict:
    crawl_id = f"{server}-{partitions}"
    spec = {"seed": 1, "hosts": args.hosts, "pages": args.pages, "latency_ms": [1, 5],
            "crawl_delay": 0.2, "page_bytes": 4000}
    for c in clients:
        c.config_resetstat()
    with SimWebServer(spec, log_path=str(tmp / f"{crawl_id}.web.jsonl")) as sw:
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join(sw.web.seeds(3)) + "\n")
        env = {k: v for k, v in sw.env().items() if not k.startswith("CRAWLPROJ_")}
        env.update(SCRAPY_SETTINGS_MODULE="settings.cluster", REDIS_URL=url, CRAWL_ID=crawl_id,
                   CRAWL_DATA_DIR=str(tmp / crawl_id), PYTHONUNBUFFERED="1")
        if server == "cluster":
            env["REDIS_CLUSTER"] = "1"
        if partitions != "auto":
            env["CRAWLPROJ_FRONTIER_PARTITIONS"] = partitions
        procs, logs = [], []
        for i in range(args.workers):
            log = tmp / f"{crawl_id}.worker{i}.log"
            logs.append(log)
            with open(log, "wb") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}"],
                    cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
        codes = [p.wait() for p in procs]
        records = sw.settle_log()
        reachable = sw.web.reachable(sw.web.seeds(3), obey_robots=True)
    texts = [log.read_text(errors="replace") for log in logs]
    got = re.search(r"Frontier opened: crawl '[^']*', (\d+) partition", texts[0])
    fetched = set(checks.fetch_counts(records))
    return {"server": server, "partitions_asked": partitions,
            "partitions": int(got[1]) if got else None, "exit_codes": codes,
            "urls": len(fetched), "reachable": len(reachable),
            "missing": len(reachable - fetched),
            "frontier_script_calls": sum(stat(t, "frontier/redis_commands") for t in texts),
            "server_commands": commands_run(clients)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--servers", default="single,cluster")
    parser.add_argument("--partitions", default="64,auto")
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="partitions-bench-") as t:
        tmp = Path(t)
        for server in args.servers.split(","):
            if server == "single":
                port = free_port()
                procs = [spawn_server(port, tmp / "single")]
                url = f"redis://127.0.0.1:{port}/0"
                clients = [redis.Redis(port=port)]
            else:
                nodes = start_cluster(tmp / "cluster")
                procs = [n.proc for n in nodes]
                url = nodes[0].url
                clients = [n.client() for n in nodes]
            try:
                for partitions in args.partitions.split(","):
                    result = crawl(server, url, clients, partitions, args, tmp)
                    results.append(result)
                    print(json.dumps(result), flush=True)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    print(f"\n{'server':8} {'partitions':>10} {'URLs':>11} {'frontier calls':>15} "
          f"{'server commands':>16}  calls/URL")
    for r in results:
        print(f"{r['server']:8} {str(r['partitions']) + ' (' + r['partitions_asked'] + ')':>10} "
              f"{r['urls']:>5}/{r['reachable']:<5} {r['frontier_script_calls']:>15} "
              f"{r['server_commands']:>16}  {r['frontier_script_calls'] / max(r['urls'], 1):.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    os.environ.pop("REDIS_URL", None)
    main()
