"""The crawl's indexer in a process of its own, started by a worker.

Pinkerton's WebCrawler kept its database (the full-text index and the graph)
apart from the agents that fetch, each agent a process, so that a fault in one
does not take the other down. A worker that takes the crawl's indexer lock
(crawlproj/search/indexer.py) starts the indexer as a child process
(IndexerChild) and hands it the lock: the child renews it and writes the
index, on a core of its own and at a lower priority than the crawl
(NICENESS), while the worker's reactor crawls. In the worker's threads the
indexer's Python and tantivy's calls would pass the worker's GIL back and
forth (docs/benchmarks.md, "What each setting is measured to give").

The worker writes one JSON line to the child's standard input: the crawl's
settings (every value JSON can carry), the crawl whose index it writes, the
lock's token and its own pid. The child answers a JSON line on its standard
output for each batch it writes, which the worker counts in its stats (the
dashboard's "indexer" figures); its log goes to the worker's standard error
or LOG_FILE. It stops, writing and committing what is waiting, when the
worker sends SIGTERM (the worker's spider closed) or when the worker is gone
(its parent pid changes: a worker killed with kill -9), and it exits when
another process holds the lock. It ignores SIGINT: a Ctrl-C in the terminal
reaches the whole process group, and the worker, which finishes its pages
first, stops the child after them.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import os
import signal
import sys
import threading
import time

from crawlproj import child

# not __name__: run with -m, this module is __main__
logger = logging.getLogger("crawlproj.search.process")

# Settings the indexer process reads: one JSON cannot carry is an error, not
# a silent default.
READ = ("INDEX_", "REDIS_", "CRAWL_", "PAGERANK_", "LOG_")


def settings_order(settings, crawl_id: str, token: str) -> dict:
    """What the child is told: the settings, the crawl, the lock's token."""
    return child.settings_order(settings, READ, crawl_id=crawl_id, token=token)


class IndexerChild:
    """A running indexer process, and the thread that reads its reports.

    on_batch(dict) is called in that thread for each batch the child wrote:
    {"taken", "written", "refreshed", "committed"} (search.indexer.Batch).
    """

    def __init__(self, order: dict, on_batch):
        self.proc = child.spawn("crawlproj.search.process", order)
        self.pid = self.proc.pid
        self.on_batch = on_batch
        self._reader = threading.Thread(target=self._read, name="indexer-reports", daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            self.on_batch(report)

    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> int:
        """SIGTERM, then wait for the child to write what is waiting and
        exit; returns its exit code once its reports are read."""
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait()
        self._reader.join()
        return code


def _serve(settings, order: dict, reports) -> None:
    from redis import RedisError

    from crawlproj.redis.client import OutageLog
    from crawlproj.redis.keyspace import Keyspace
    from crawlproj.search.runner import IndexerRunner

    parent = order["parent"]

    def report(batch):
        try:
            reports.write(json.dumps(batch.__dict__).encode() + b"\n")
        except OSError:  # the worker is gone: the batch is written all the same
            pass

    runner = IndexerRunner.from_settings(settings, Keyspace(order["crawl_id"], 1))
    runner.lock.token = order["token"]
    runner.on_batch = report
    # after get_redis: an embedded server it starts must not inherit the niceness
    os.nice(child.NICENESS)
    logger.info("Indexer process %d of worker %d (crawlproj from %s)", os.getpid(), parent,
                importlib.resources.files("crawlproj"))
    tick = settings.getfloat("INDEX_TICK")
    outage = OutageLog()  # an outage is said when it starts, now and then, and when it ends
    try:
        while not _stop and os.getppid() == parent:
            try:
                if runner.tick() is None:
                    logger.info("Indexer lock held by %s; the indexer process leaves",
                                runner.lock.holder())
                    break
                outage.ok("indexer")
            except RedisError as exc:  # out of reach a while: the next tick tries again
                outage.failed("indexer", str(exc), tick)
            until = time.monotonic() + tick
            while not _stop and time.monotonic() < until:
                time.sleep(min(0.1, tick))
        if os.getppid() != parent:
            logger.warning("Indexer: worker %d is gone; writing what is waiting, then leaving", parent)
    finally:
        runner.drain_and_release()


# Set by SIGTERM: the loop ends between two ticks, never inside a write (a
# plain flag: an Event set from a signal handler can deadlock on its lock).
_stop = False


def _terminated(signum, frame):
    global _stop
    _stop = True


def main() -> int:
    signal.signal(signal.SIGTERM, _terminated)  # before run() unblocks it
    return child.run("indexer", "crawlproj.search.extension", "scrapy index", _serve)


if __name__ == "__main__":
    sys.exit(main())
