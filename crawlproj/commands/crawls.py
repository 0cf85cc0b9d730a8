"""`scrapy crawls list|delete`: the crawls on the Redis server, and removing one.

``list`` shows each crawl's record (the partitions, prioritizer and DUE mode
its first worker fixed; crawlproj/redis/keyspace.py) and its counters, read without
changing anything. ``delete ID --yes`` removes a crawl's keys (frontier, DUE,
content-seen, link store, page metadata, its record) and the link-store
segment files this machine wrote; WARC files, crawl logs and exported items
stay. It refuses while the crawl has live leases: its workers are running.
"""

from __future__ import annotations

import json
import sys
import time

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawlproj.addon import CommandSettings
from crawlproj.due.urlseen import DueConfig
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Frontier
from crawlproj.ranker.process import VECTOR
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace, NoSuchCrawl
from crawlproj.stores.linkstore import LinkStore

ACTIONS = ("list", "delete")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "list [--json] | delete CRAWL_ID --yes"

    def short_desc(self):
        return "List the crawls on the Redis server, or delete one"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="list: machine-readable output")
        parser.add_argument("--yes", action="store_true", help="delete: yes, delete it")

    def run(self, args, opts):
        if not args or args[0] not in ACTIONS:
            raise UsageError(f"say {' or '.join(ACTIONS)}")
        if args[0] == "list" and len(args) != 1:
            raise UsageError("list takes no argument")
        if args[0] == "delete" and len(args) != 2:
            raise UsageError("say which crawl to delete: scrapy crawls delete CRAWL_ID --yes")
        try:
            redis = get_redis(self.settings)
            if args[0] == "list":
                self.list_crawls(redis, opts.json)
            else:
                self.delete_crawl(redis, args[1], opts.yes)
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2

    def list_crawls(self, redis, as_json: bool) -> None:
        rows = []
        for crawl_id in Keyspace.crawl_ids(redis):
            record = Keyspace.record(redis, crawl_id)
            if record is None:  # deleted since the scan
                continue
            counters = Frontier(redis, Keyspace(crawl_id, int(record["partitions"]))).counters()
            rows.append({
                "crawl_id": crawl_id,
                "created": float(record.get("created", 0)),
                "partitions": int(record["partitions"]),
                "prioritizer": record.get("prioritizer"),
                "due_mode": DueConfig.from_json(record["due"]).mode if "due" in record else None,
                "queued": counters.get("queued", 0),
                "enqueued": counters.get("enqueued", 0),
                "leased": counters.get("leased", 0),
                "live_leases": counters["live_leases"],
            })
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        if not rows:
            print("no crawls on this server")
            return
        head = ("crawl", "created (UTC)", "partitions", "prioritizer", "DUE", "queued",
                "enqueued", "leased", "live leases")
        table = [head] + [(
            r["crawl_id"], time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["created"])),
            str(r["partitions"]), r["prioritizer"] or "-", r["due_mode"] or "-",
            str(r["queued"]), str(r["enqueued"]), str(r["leased"]), str(r["live_leases"]),
        ) for r in rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(head))]
        for row in table:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())

    def delete_crawl(self, redis, crawl_id: str, yes: bool) -> None:
        keyspace = Keyspace.existing(redis, crawl_id)
        if keyspace is None:
            raise NoSuchCrawl(crawl_id)
        live = Frontier(redis, keyspace).counters()["live_leases"]
        if live:
            raise CrawlprojError(
                f"crawl {crawl_id!r} has {live} live lease(s): its workers are running; stop "
                "them first (a killed worker's leases run out after FRONTIER_LEASE_TTL)")
        if not yes:
            raise CrawlprojError(
                f"deleting crawl {crawl_id!r} removes its frontier, DUE, link store and page "
                "metadata for good; add --yes to delete it")
        links = LinkStore(redis, keyspace, LinkStore.directory_of(self.settings, crawl_id))
        try:
            files, elsewhere = links.remove_segment_files()
        except OSError as exc:
            raise CrawlprojError(f"cannot remove the link store's segment {exc.filename}: "
                                 f"{exc.strerror}; crawl {crawl_id!r} not deleted") from None
        # the ranker's last vector (crawlproj/ranker/process.py): a new crawl of
        # the same id starts cold
        (links.directory / VECTOR).unlink(missing_ok=True)
        keys = keyspace.delete(redis)
        print(f"deleted crawl {crawl_id!r}: {keys} Redis key(s), {files} link-store file(s)"
              + (f"; {elsewhere} segment(s) written on other machines stay there"
                 if elsewhere else ""))
