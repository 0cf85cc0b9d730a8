"""Link-store compaction in a process of its own, started by the worker
whose write filled a partition's working set (crawlproj/pipelines/links.py).

A compaction decodes LINKSTORE_SEGMENT_PAGES pages and writes them to Parquet
(stores/linkstore.py). In a worker's thread the heap it grew stayed with the
worker for the rest of the crawl, and its Python held the worker's GIL
(docs/scale.md, "A long crawl"); in a child that exits after it, the memory
goes back to the machine, as with the ranker's runs (crawlproj/ranker/
process.py). The child takes the partition's compaction lock itself,
segment after segment while the working set holds one, and answers one JSON
line: the pages it moved, or the error writing a segment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys

from crawlproj import child
from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.linkstore import LinkStore

# not __name__: run with -m, this module is __main__
logger = logging.getLogger("crawlproj.stores.compaction")

MODULE = "crawlproj.stores.compaction"
# Settings the compaction process reads.
READ = ("LINKSTORE_", "REDIS_", "CRAWL_", "LOG_")


class Compactor:
    """Compacts a partition in a child process; compact() blocks (a thread's
    work, as LinkStore.compact was)."""

    def __init__(self, settings):
        self.order = child.settings_order(settings, READ)

    def compact(self, p: int) -> tuple[int, int]:
        """(segments written, pages moved); (0, 0): another process holds the
        lock, or too few pages. Raises OSError when the segment cannot be written, and
        CrawlprojError when the child fails otherwise (its line is on the
        worker's standard error); the pages stay in Redis either way."""
        try:
            proc = child.spawn(MODULE, dict(self.order, partition=p))
            line = proc.stdout.read()
        except OSError as exc:  # no process (EAGAIN, EMFILE): not the disk's fault
            raise CrawlprojError(f"compaction process not started: {exc}") from None
        code = proc.wait()
        if code:
            raise CrawlprojError(f"compaction process {proc.pid} exited with code {code}")
        try:
            answer = json.loads(line)
        except ValueError:
            raise CrawlprojError(f"compaction process {proc.pid} gave no answer") from None
        if "oserror" in answer:
            errno, message, filename = answer["oserror"]
            raise OSError(errno, message, filename) if errno else OSError(message)
        return int(answer["segments"]), int(answer["moved"])


def _run(settings, order: dict, reports) -> None:
    redis = get_redis(settings)
    keyspace = Keyspace.from_settings(settings, redis)
    store = LinkStore(redis, keyspace, LinkStore.directory_of(settings, keyspace.crawl_id),
                      settings.getint("LINKSTORE_SEGMENT_PAGES"))
    logger.info("Link store compaction process %d of worker %d", os.getpid(), order["parent"])
    # stopped (a process group's SIGTERM): the segment's cleanup and the
    # lock's release run, as on an error
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    segments = moved = 0
    try:
        # until the working set is below a segment (pages come in while one
        # is written, and a child's start is worth more than one segment),
        # while the worker that started it is there to count them
        while os.getppid() == order["parent"] and (n := store.compact(order["partition"])):
            segments += 1
            moved += n
        answer = {"segments": segments, "moved": moved}
    except OSError as exc:  # the worker stops the crawl on it (StoreGuard)
        answer = {"oserror": [exc.errno, exc.strerror or str(exc), exc.filename]}
    reports.write(json.dumps(answer).encode() + b"\n")


def main() -> int:
    return child.run("link store compaction", "crawlproj.pipelines.links",
                     "scrapy crawl web", _run)


if __name__ == "__main__":
    sys.exit(main())
