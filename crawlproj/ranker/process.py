"""One ranker run in a process of its own, started by the worker that holds
the crawl's ranker lock (crawlproj/ranker/extension.py).

A run builds the whole link graph in memory (docs/benchmarks.md, "A long
crawl": over a gigabyte at 1.3M nodes), and a process keeps the heap it grew:
run in a worker's thread, the ranker left that worker several times the other
worker's size for the rest of the crawl. In a child that exits after its run
the memory goes back to the machine, and the run's Python never holds the
worker's GIL. The worker renews the lock while the child runs and reads the
run's summary, one JSON line on the child's standard output. The PageRank
vector is kept in the link store's directory between runs for the next run's
warm start (Cho et al. recompute IR'(P) as the crawl grows, §4).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time

from crawlproj import child
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Frontier
from crawlproj.ranker.loop import Ranker, RankerLock
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.linkstore import LinkStore

# not __name__: run with -m, this module is __main__
logger = logging.getLogger("crawlproj.ranker.process")

# Settings the ranker process reads (crawlproj/ranker/extension.py, build).
READ = ("RANKER_", "PAGERANK_", "PRIORITIZER_", "REDIS_", "CRAWL_", "LINKSTORE_", "LOG_")
VECTOR = "ranker-vector.npz"


def build(settings):
    """(Ranker, RankerLock) of the crawl the settings name."""
    redis = get_redis(settings)
    keyspace = Keyspace.from_settings(settings, redis)
    # The frontier for its bulk rewrite of queued scores (Frontier.rescore), the
    # ranker's one use of it; the DUE's configuration is the workers' to fix.
    frontier = Frontier(redis, keyspace)
    links = LinkStore(redis, keyspace, LinkStore.directory_of(settings, keyspace.crawl_id))
    ranker = Ranker(frontier, links, damping=settings.getfloat("PAGERANK_DAMPING"),
                    cross_host_only=settings.getbool("PRIORITIZER_CROSS_HOST_ONLY"))
    return ranker, RankerLock(redis, keyspace, settings.getfloat("RANKER_LOCK_TTL"))


class RankerChild:
    """A ranker run in a child process."""

    def __init__(self, settings, crawl_id: str):
        self.proc = child.spawn("crawlproj.ranker.process",
                                child.settings_order(settings, READ, crawl_id=crawl_id))
        self.pid = self.proc.pid

    def wait(self, tick: float, renew) -> dict:
        """The run's summary (RankRun's fields); renew() is called every
        `tick` seconds while the child runs, and stops it by returning False
        (another process holds the lock)."""
        try:
            while True:
                try:
                    code = self.proc.wait(tick)
                    break
                except subprocess.TimeoutExpired:
                    if not renew():
                        raise CrawlprojError(
                            f"ranker process {self.pid} stopped: the lock was lost") from None
        except BaseException:  # the lock lost, or out of reach: no run nobody renews
            self.stop()
            raise
        line = self.proc.stdout.read()
        if code:
            raise CrawlprojError(f"ranker process {self.pid} exited with code {code}")
        try:
            return json.loads(line)
        except ValueError:
            raise CrawlprojError(f"ranker process {self.pid} gave no summary") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait()


def _run(settings, order: dict, reports) -> None:
    settings.set("CRAWL_ID", order["crawl_id"], priority="cmdline")
    ranker, _ = build(settings)
    vector = LinkStore.directory_of(settings, order["crawl_id"]) / VECTOR
    ranker.load(vector)
    logger.info("Ranker process %d of worker %d", os.getpid(), order["parent"])
    threading.Thread(target=_leave_with, args=(order["parent"],), daemon=True).start()
    run = ranker.run_once()
    vector.parent.mkdir(parents=True, exist_ok=True)
    ranker.save(vector)
    reports.write(json.dumps(run.__dict__).encode() + b"\n")


def _leave_with(parent: int) -> None:
    """A worker killed (kill -9) stops renewing the lock, and another worker
    starts a run of its own: this one ends with it."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)


def main() -> int:
    return child.run("ranker", "crawlproj.ranker.extension", "scrapy rank", _run)


if __name__ == "__main__":
    sys.exit(main())
