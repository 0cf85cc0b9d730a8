"""INDEX_MAX_WAITING: a crawl whose indexer falls behind waits for it.

A real worker crawls the simulated web with no indexer to take its
documents (INDEX_WRITER=False); the test plays a slow indexer, emptying the
hand-over list only once the crawl has stopped downloading. The list must
never hold much more than the limit (without the bound it holds every page
of the crawl), the crawl must wait at least once, and every page must still
be fetched, once.
"""

from __future__ import annotations

import threading
import time

import redis as redis_lib

from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers

CRAWL = "backlog"
LIMIT = 5
WEB = {"seed": 5, "hosts": 4, "pages": 60, "page_bytes": 1500, "latency_ms": 0,
       "crawl_delay_fraction": 0.0}


def test_the_crawl_waits_for_an_indexer_that_falls_behind(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    key = Keyspace(CRAWL, 1).index_queue
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        workers = Workers(sw, redis_url, tmp_path, seeds, CRAWL, {
            "INDEX_WRITER": False, "INDEX_MAX_WAITING": LIMIT, "CONCURRENT_REQUESTS": 2,
            # Scrapy stops starting downloads once this many bytes of responses
            # wait in its scraper (5 MB by default: a few of this web's pages here)
            "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 4000,
            "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0})
        longest, drained, stalls = [0], [0], [0]
        done = threading.Event()

        def slow_indexer():
            served, since = -1, time.monotonic()
            while not done.is_set():
                n = r.llen(key)
                longest[0] = max(longest[0], n)
                now_served = len(sw.read_log())
                if now_served != served:
                    served, since = now_served, time.monotonic()
                elif n and time.monotonic() - since > 1.0:
                    # downloads have stopped with documents waiting: index them
                    stalls[0] += 1
                    drained[0] += len(r.lpop(key, n) or [])
                    since = time.monotonic()
                time.sleep(0.02)

        t = threading.Thread(target=slow_indexer, daemon=True)
        t.start()
        workers.start(1)
        try:
            codes = workers.wait(timeout=300)
        finally:
            done.set()
            t.join(10)
        log = workers.log(0)
        assert codes == [0], log[-3000:]
        records = sw.settle_log()
        fetched = [f"http://{x['host']}{x['path']}" for x in records if x["path"] != "/robots.txt"]
        reachable = sw.web.reachable(seeds, obey_robots=True)
        assert set(fetched) == reachable
        assert len(fetched) == len(set(fetched))
        documents = drained[0] + r.llen(key)
        assert documents > 4 * LIMIT, "too few pages to test the bound"
        # the bound, give or take the documents pushed before a reply said it was reached
        assert longest[0] <= LIMIT + 4, (longest[0], documents)
        assert stalls[0] >= 1
        assert "pages wait for it before more are downloaded" in log
