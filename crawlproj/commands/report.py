"""`scrapy report`: the crawl's outcome as Mercator §4 reports it.

Reads the crawl logs (CRAWLLOG_DIR, default CRAWL_DATA_DIR/logs; every
worker's file for CRAWL_ID) or the files given, and prints the outcome of
download attempts, documents fetched, content types, the document size
histogram and the distribution of pages over hosts; --png DIR also draws
them. For a crawl run on many hosts, copy the logs together or pass them all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings
from crawlproj.stores.common import crawllog_dir
from crawlproj.stores.crawllog import log_files, read_lines
from crawlproj.stores.report import CrawlReport


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "[CRAWL_LOG ...] [--crawl-id ID] [--png DIR] [--json]"

    def short_desc(self):
        return "Crawl statistics from the crawl logs (Mercator §4), as text and PNG charts"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl (default: CRAWL_ID)")
        parser.add_argument("--png", default=None, metavar="DIR", help="also write PNG charts to DIR")
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument("--top", type=int, default=10, help="rows in the top-N tables")

    def run(self, args, opts):
        if args:
            paths = [Path(a) for a in args]
        else:
            crawl_id = opts.crawl_id or self.settings.get("CRAWL_ID")
            paths = log_files(crawllog_dir(self.settings), crawl_id)
        missing = [p for p in paths if not p.is_file()]
        if not paths or missing:
            print(f"crawlproj: no crawl log {missing[0] if missing else 'found'}"
                  + ("" if args else " (give log files, or set CRAWL_DATA_DIR / CRAWL_ID)"),
                  file=sys.stderr)
            self.exitcode = 2
            return
        report = CrawlReport.from_lines(read_lines(paths))
        if opts.json:
            print(json.dumps({"attempts": report.attempts, "robots_fetches": report.robots_fetches,
                              "dns_lookups": report.dns_lookups, "dns_failures": report.dns_failures,
                              "sitemap_attempts": report.sitemap_attempts,
                              "sitemap_documents": report.sitemap_documents,
                              "outcomes": dict(report.outcomes),
                              "statuses": {str(k): v for k, v in report.statuses.items()},
                              "documents": report.documents, "document_bytes": report.document_bytes,
                              "content_types": dict(report.content_types),
                              "size_bins": report.sizes, "hosts": len(report.pages_per_host),
                              "pages_per_host": dict(report.pages_per_host)}, indent=2))
        else:
            sys.stdout.write(report.text(opts.top))
        if opts.png:
            for path in report.charts(opts.png):
                print(f"wrote {path}", file=sys.stderr)
