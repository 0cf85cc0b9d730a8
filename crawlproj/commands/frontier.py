"""`scrapy frontier`: the state of a crawl's shared frontier."""

from __future__ import annotations

import json
import sys

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Frontier
from crawlproj.keyspace import Keyspace
from crawlproj.redisconn import get_redis


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "[--crawl-id ID | --all] [--json]"

    def short_desc(self):
        return "Show the shared frontier: queued URLs, hosts ready/waiting/leased, leases"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl to show (default: CRAWL_ID)")
        parser.add_argument("--all", action="store_true", help="every crawl on the server")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args, opts):
        try:
            redis = get_redis(self.settings)
            ids = Keyspace.crawl_ids(redis) if opts.all \
                else [opts.crawl_id or self.settings.get("CRAWL_ID")]
            keyspaces = [Keyspace.found(redis, crawl_id) for crawl_id in ids]
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        out = [Frontier(redis, keyspace).status() for keyspace in keyspaces]
        if opts.json:
            print(json.dumps(out, indent=2))
            return
        for s in out:
            age = s["oldest_lease_age_s"]
            c = s["counters"]
            print(f"crawl {s['crawl_id']} ({s['partitions']} partition(s))\n"
                  f"  queued URLs      {s['queued']}\n"
                  f"  hosts ready      {s['hosts_ready']}\n"
                  f"  hosts waiting    {s['hosts_waiting']}\n"
                  f"  hosts leased     {s['hosts_leased']} (downloads running)\n"
                  f"  pages pending    {s['pages_pending']} (downloaded, links not yet in)\n"
                  f"  oldest lease     {'-' if age is None else f'{age:.1f} s'}\n"
                  f"  enqueued {c.get('enqueued', 0)}, duplicates {c.get('duplicates', 0)}, "
                  f"leased {c.get('leased', 0)}, expired leases {c.get('expired', 0)}")
