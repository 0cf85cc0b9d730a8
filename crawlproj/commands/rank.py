"""`scrapy rank`: the ranker as its own process (Cho et al. §3's IR'(P)).

Recomputes PageRank on the crawl's link graph and rewrites the priorities of
every queued URL, every --interval seconds, for as long as it runs (Ctrl-C
stops it, as does SIGTERM), or once with --once. It takes the crawl's ranker lock first, so
it never runs beside a worker's ranker (crawlproj/ranker/extension.py); when
a holder dies, the lock passes on after RANKER_LOCK_TTL seconds.

It ranks a crawl that exists, and one whose prioritizer is pagerank: the
scores of any other prioritizer would be overwritten with PageRank's, and its
workers would go on adding URLs on their own scale (--force ranks it all the
same).
"""

from __future__ import annotations

import logging
import signal
import sys
import time

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace, NoSuchCrawl

logger = logging.getLogger("crawlproj.rank")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings()

    def syntax(self):
        return "[--once] [--interval SECONDS] [--crawl-id ID] [--force]"

    def short_desc(self):
        return "Recompute PageRank on the crawl's link graph and rewrite queued priorities"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--once", action="store_true", help="one run, then exit")
        parser.add_argument("--interval", type=float, default=None,
                            help="seconds between runs (default: RANKER_INTERVAL)")
        parser.add_argument("--crawl-id", default=None, help="crawl to rank (default: CRAWL_ID)")
        parser.add_argument("--force", action="store_true",
                            help="rank a crawl whose prioritizer is not pagerank")

    def run(self, args, opts):
        from scrapy.utils.log import configure_logging

        from crawlproj.ranker.process import build

        configure_logging(self.settings)
        if opts.crawl_id:
            self.settings.set("CRAWL_ID", opts.crawl_id, priority="cmdline")
        interval = opts.interval if opts.interval is not None \
            else self.settings.getfloat("RANKER_INTERVAL")
        try:
            check_settings(self.settings)  # the settings module, -s, CRAWLPROJ_ variables
            crawl_id = self.settings.get("CRAWL_ID")
            record = Keyspace.record(get_redis(self.settings), crawl_id)
            if record is None:
                raise NoSuchCrawl(crawl_id)
            prioritizer = record.get("prioritizer", "a prioritizer it did not record")
            if prioritizer != "pagerank" and not opts.force:
                raise CrawlprojError(
                    f"crawl {crawl_id!r} orders its frontier by {prioritizer}, not pagerank: "
                    "ranking would overwrite its priorities with PageRank; --force to rank it "
                    "all the same")
            ranker, lock = build(self.settings)
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        tick = min(interval, lock.ttl_ms / 3000.0)
        state, last = None, None
        # Ctrl-C and SIGTERM (docker stop) both end the loop and release the lock,
        # also when started in the background, where SIGINT comes in ignored
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            while True:
                if lock.hold():
                    if state != "holding":
                        logger.info("Ranker lock taken (%s)", lock.token)
                        state = "holding"
                    if last is None or time.monotonic() - last >= interval:
                        run = ranker.run_once()
                        lock.hold()
                        last = time.monotonic()
                        logger.info("Ranker: %s", run)
                        if opts.once:
                            return
                elif state != "waiting":
                    logger.info("Ranker lock held by %s; waiting", lock.holder())
                    state = "waiting"
                time.sleep(tick)
        except KeyboardInterrupt:
            pass
        finally:
            lock.release()


def _interrupt(signum, frame):
    raise KeyboardInterrupt
