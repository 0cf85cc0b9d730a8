"""`scrapy export-graph OUT`: the crawl's link graph as Parquet (graph.py).

Scrapy names a command found in COMMANDS_MODULE (crawlproj.commands) after its
module, and a module name has no hyphen; a command of the ``scrapy.commands``
entry-point group is named by its entry point. This one is registered there
(pyproject.toml) and lives outside crawlproj.commands, so that it has the one
name ``export-graph``.
"""

from __future__ import annotations

import json
import sys

from scrapy.commands import ScrapyCommand
from scrapy.utils.project import inside_project

from crawlproj.addon import CommandSettings
from crawlproj.errors import CrawlprojError

SYNTAX = "OUT [--crawl-id ID] [--json]"


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return SYNTAX

    def short_desc(self):
        return "Export the crawl's link graph as Parquet: OUT/edges.parquet and OUT/urls.parquet"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl to export (default: CRAWL_ID)")
        parser.add_argument("--json", action="store_true", help="print the counts as JSON")

    def run(self, args, opts):
        # Scrapy lists entry-point commands everywhere; requires_project is
        # only honoured for COMMANDS_MODULE ones.
        if not inside_project():
            print("scrapy export-graph: run it in the crawlproj project directory "
                  "(where scrapy.cfg is)", file=sys.stderr)
            self.exitcode = 2
            return
        self.exitcode = run(self.settings, args, opts)


def run(settings, args, opts) -> int:
    from crawlproj.redis.client import get_redis
    from crawlproj.redis.keyspace import Keyspace
    from crawlproj.stores.graph import export_graph
    from crawlproj.stores.linkstore import LinkStore

    if len(args) != 1:
        print("usage: scrapy export-graph " + SYNTAX, file=sys.stderr)
        return 2
    crawl_id = opts.crawl_id or settings.get("CRAWL_ID")
    try:
        redis = get_redis(settings)
        keyspace = Keyspace.found(redis, crawl_id)
        store = LinkStore(redis, keyspace, LinkStore.directory_of(settings, crawl_id))
        counts = export_graph(store, args[0])
    except CrawlprojError as exc:
        print(f"crawlproj: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"crawlproj: cannot write the graph to {exc.filename or args[0]}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    if opts.json:
        print(json.dumps(counts))
    else:
        print(f"{counts['edges']} edges from {counts['pages']} pages, {counts['urls']} URLs -> "
              f"{args[0]}/edges.parquet ({counts['edges_bytes']} bytes), "
              f"{args[0]}/urls.parquet ({counts['urls_bytes']} bytes)")
    return 0
