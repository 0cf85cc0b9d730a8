"""`scrapy export-graph OUT`: the crawl's link graph as Parquet.

Scrapy names a command after its module, and a module name cannot hold a
hyphen in an import statement, but importlib takes any file name: the
command class lives in ``export-graph.py`` next to this file, which holds
the implementation (kept importable under a normal name, and not itself a
ScrapyCommand so that no ``export_graph`` command appears).
"""

from __future__ import annotations

import json
import sys

from crawlproj.errors import CrawlprojError

SYNTAX = "OUT [--crawl-id ID] [--json]"
DESCRIPTION = "Export the crawl's link graph as Parquet: OUT/edges.parquet and OUT/urls.parquet"


def add_options(parser) -> None:
    parser.add_argument("--crawl-id", default=None, help="crawl to export (default: CRAWL_ID)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")


def run(settings, args, opts) -> int:
    from crawlproj.keyspace import Keyspace
    from crawlproj.redisconn import get_redis
    from crawlproj.stores.graph import export_graph
    from crawlproj.stores.linkstore import LinkStore

    if len(args) != 1:
        print("usage: scrapy export-graph " + SYNTAX, file=sys.stderr)
        return 2
    crawl_id = opts.crawl_id or settings.get("CRAWL_ID")
    try:
        redis = get_redis(settings)
        keyspace = Keyspace.existing(redis, crawl_id)
        if keyspace is None:
            print(f"crawlproj: no crawl {crawl_id!r} on this server", file=sys.stderr)
            return 1
        store = LinkStore(redis, keyspace, LinkStore.directory_of(settings, crawl_id))
        counts = export_graph(store, args[0])
    except (CrawlprojError, OSError) as exc:
        print(f"crawlproj: {exc}", file=sys.stderr)
        return 1
    if opts.json:
        print(json.dumps(counts))
    else:
        print(f"{counts['edges']} edges from {counts['pages']} pages, {counts['urls']} URLs -> "
              f"{args[0]}/edges.parquet ({counts['edges_bytes']} bytes), "
              f"{args[0]}/urls.parquet ({counts['urls_bytes']} bytes)")
    return 0
