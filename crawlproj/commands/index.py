"""`scrapy index`: the crawl's indexer as its own process, a rebuild, an export.

With no option it is the crawl's indexer (crawlproj/search/indexer.py) for as
long as it runs (Ctrl-C or SIGTERM stop it): it takes the indexer lock, or
waits for it, and writes what the workers hand over; run it on the machine
of the query server when the workers run elsewhere (INDEX_WRITER=False on
theirs). --once writes what is waiting and exits. --rebuild clears the index
and writes it again from the WARC files alone (WARC_DIR), holding the lock so
that no worker writes meanwhile. --export OUT writes the documents for a
search server: OpenSearch/Elasticsearch _bulk NDJSON, or --format solr.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.redis.keyspace import Keyspace

logger = logging.getLogger("crawlproj.index")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings()

    def syntax(self):
        return "[--once] [--rebuild] [--export OUT [--format ndjson|solr]] [--crawl-id ID]"

    def short_desc(self):
        return "Write the crawl's full-text index, rebuild it from the WARC files, or export it"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--once", action="store_true", help="write what is waiting, then exit")
        parser.add_argument("--rebuild", action="store_true", help="rebuild from the WARC files alone")
        parser.add_argument("--export", metavar="OUT", default=None,
                            help="write the documents to OUT ('-': standard output)")
        parser.add_argument("--format", default="ndjson", choices=("ndjson", "solr"),
                            help="export format: _bulk NDJSON (OpenSearch, Elasticsearch) or solr")
        parser.add_argument("--crawl-id", default=None, help="crawl to index (default: CRAWL_ID)")

    def run(self, args, opts):
        from scrapy.utils.log import configure_logging

        if args:
            raise UsageError("no arguments, only options")
        if sum(map(bool, (opts.once, opts.rebuild, opts.export))) > 1:
            raise UsageError("one of --once, --rebuild, --export")
        configure_logging(self.settings)
        if opts.crawl_id:
            self.settings.set("CRAWL_ID", opts.crawl_id, priority="cmdline")
        try:
            check_settings(self.settings)
            if opts.export:
                self.export(opts.export, opts.format)
            elif opts.rebuild:
                self.rebuild()
            else:
                self.index(opts.once)
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2

    def export(self, out: str, fmt: str):
        from crawlproj.search.export import export
        from crawlproj.search.index import PageIndex, index_dir

        index = PageIndex(index_dir(self.settings))
        try:
            f = sys.stdout if out == "-" else open(out, "w", encoding="utf-8")
        except OSError as exc:
            raise CrawlprojError(f"cannot write {out}: {exc.strerror or exc}") from None
        try:
            with f if out != "-" else _nothing():
                n = export(index, f, fmt, self.settings.get("CRAWL_ID"))
        except BrokenPipeError:  # `| head`: the reader has all it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
        except OSError as exc:
            raise CrawlprojError(f"cannot write {out}: {exc.strerror or exc}") from None
        print(f"{n:,} documents exported to {out}", file=sys.stderr)

    def rebuild(self):
        from crawlproj.redis.client import get_redis
        from crawlproj.robots.meta import obeyed_agents
        from crawlproj.search.index import PageIndex, index_dir
        from crawlproj.search.indexer import Indexer, IndexerLock
        from crawlproj.search.rebuild import rebuild
        from crawlproj.stores.common import warc_dir

        s = self.settings
        # the lock's key is crawl-wide: no record of the crawl needed, only the WARC files
        lock = IndexerLock(get_redis(s), Keyspace(s.get("CRAWL_ID"), 1), s.getfloat("INDEX_LOCK_TTL"))
        if not lock.hold():
            raise CrawlprojError(f"the index is being written by {lock.holder()} (a worker or "
                                 "`scrapy index`); stop it, or wait, before a rebuild")
        try:
            index = PageIndex(index_dir(s), write=True)
            try:
                indexer = Indexer(index, None, s.getint("INDEX_BATCH"),
                                  damping=s.getfloat("PAGERANK_DAMPING"))
                t = time.monotonic()
                files, docs = rebuild(indexer, warc_dir(s), s.getint("INDEX_BATCH"),
                                      progress=lambda n: lock.hold(), agents=obeyed_agents(s))
                print(f"index rebuilt from {files} WARC files: {index.num_docs():,} pages "
                      f"({docs:,} fetches) in {time.monotonic() - t:.1f} s, {index.directory}")
            finally:
                index.close()
        finally:
            lock.release()

    def index(self, once: bool):
        from crawlproj.redis.client import get_redis
        from crawlproj.search.runner import IndexerRunner

        s = self.settings
        keyspace = Keyspace.found(get_redis(s), s.get("CRAWL_ID"))
        runner = IndexerRunner.from_settings(s, keyspace)
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        state = None
        try:
            while True:
                b = runner.tick()
                if b is None and state != "waiting":
                    logger.info("Indexer lock held by %s; waiting", runner.lock.holder())
                    state = "waiting"
                elif b is not None:
                    state = "holding"
                    if b.taken:
                        logger.info("Indexer: %d documents written, %d refreshed", b.written, b.refreshed)
                    if once and b.taken < runner.batch:
                        return
                time.sleep(s.getfloat("INDEX_TICK"))
        except KeyboardInterrupt:
            pass
        finally:
            runner.drain_and_release()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt
