"""A worker's memory across one link-store compaction.

Appends --pages pages of --links links each (URLs and anchors of the long
crawl's web's shape) to one partition of a fresh server, then compacts the
partition while another thread keeps allocating, as a worker's reactor
does, and reports the process's RSS before and after and its peak: with
the compaction in this process's thread (--in thread), or in a child process
as a worker runs it (--in child, crawlproj/stores/compaction.py: the child's
peak is reported too).

    .venv/bin/python bench/compaction_memory.py [--pages 20000 --links 14] [--in child]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis  # noqa: E402
from scrapy.settings import Settings  # noqa: E402

import settings.base  # noqa: E402
from crawlproj.redis.embedded import spawn_server  # noqa: E402
from crawlproj.redis.keyspace import Keyspace  # noqa: E402
from crawlproj.stores.compaction import Compactor  # noqa: E402
from crawlproj.stores.linkstore import LinkStore, encode_page  # noqa: E402


def status(field: str) -> int:
    """A /proc/self/status figure in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=20000)
    ap.add_argument("--links", type=int, default=14)
    ap.add_argument("--in", dest="where", choices=("thread", "child"), default="thread")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        port = 17000 + os.getpid() % 1000
        proc = spawn_server(port, d, appendonly=False)
        try:
            r = redis.Redis(port=port)
            store = LinkStore(r, Keyspace.open(r, "mem", 1), Path(d) / "seg", segment_pages=a.pages)
            s = Settings()
            s.setmodule(settings.base)
            s.setdict({"REDIS_URL": f"redis://127.0.0.1:{port}/0", "CRAWL_ID": "mem",
                       "LINKSTORE_DIR": str(Path(d) / "seg"), "LINKSTORE_SEGMENT_PAGES": a.pages,
                       "LOG_LEVEL": "WARNING"})
            compact = ((lambda p: Compactor(s).compact(p)[1]) if a.where == "child"
                       else store.compact)
            rnd = random.Random(1)
            for i in range(a.pages):
                links = [{"url": f"http://h{rnd.randrange(10000):05d}.example/s{rnd.randrange(50)}"
                                 f"/p{rnd.randrange(10**6)}.html",
                          "anchor": f"anchor text {rnd.randrange(10**6)} of some words"}
                         for _ in range(a.links)]
                value, _ = encode_page(f"http://h{i % 10000:05d}.example/p{i}.html", 1000.0 + i, links)
                store.append([(0, value)])
            gc.collect()
            keep: list = []
            stop = threading.Event()

            def churn():
                while not stop.is_set():
                    keep.append([str(i) * 3 for i in range(200)])
                    if len(keep) > 500:
                        del keep[:250]
                    time.sleep(0.001)

            t = threading.Thread(target=churn)
            t.start()
            before = status("VmRSS")
            moved = compact(0)
            stop.set()
            t.join()
            gc.collect()
            child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
            print(f"compacted {moved:,} pages in a {a.where}: this process's RSS {before} -> "
                  f"{status('VmRSS')} MiB (+{status('VmRSS') - before}), peak "
                  f"{status('VmHWM')} MiB" + (f"; the child's peak {child} MiB"
                                              if a.where == "child" else ""))
        finally:
            proc.kill()
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
