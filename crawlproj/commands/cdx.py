"""`scrapy cdx`: CDXJ indexes of the content store's WARC files.

Each finished WARC file already has its sorted index beside it (NAME.cdxj);
this command writes the ones that are missing (files from elsewhere, or all
of them with --rebuild) and merges them into one sorted index
(WARC_DIR/index.cdxj by default) that pywb and other replay tools read.

It indexes the files of one crawl, CRAWL_ID's (or --crawl-id's), which the
content store names after it (``<crawl>-<time>-<serial>-...warc.gz``,
crawlproj/stores/warc.py): one WARC directory may hold many crawls'. --all
indexes every WARC file of the directory, whatever its name.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings
from crawlproj.stores.common import warc_dir
from crawlproj.stores.storage import LocalStorage


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "[--crawl-id ID | --all] [--warc-dir DIR] [-o OUT] [--rebuild]"

    def short_desc(self):
        return "Index the WARC files (CDXJ): one index per file and one merged, sorted index"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--warc-dir", default=None, help="default: WARC_DIR or CRAWL_DATA_DIR/warc")
        parser.add_argument("-o", "--output", default=None, help="merged index (default WARC_DIR/index.cdxj)")
        parser.add_argument("--rebuild", action="store_true", help="re-index every file")
        parser.add_argument("--crawl-id", default=None, help="crawl whose files (default: CRAWL_ID)")
        parser.add_argument("--all", action="store_true", help="every crawl's files")

    def run(self, args, opts):
        from crawlproj.stores.warc import (
            WARC_SUFFIX,
            build_index,
            crawl_names,
            crawl_of,
            merge_indexes,
        )
        root = Path(opts.warc_dir) if opts.warc_dir else warc_dir(self.settings)
        if not root.is_dir():
            print(f"crawlproj: no WARC directory {root}", file=sys.stderr)
            self.exitcode = 2
            return
        if opts.all and opts.crawl_id:
            print("crawlproj: --crawl-id or --all, not both", file=sys.stderr)
            self.exitcode = 2
            return
        crawl_id = None if opts.all else opts.crawl_id or self.settings.get("CRAWL_ID")
        storage = LocalStorage(root)
        if crawl_id is not None and not crawl_names(storage, crawl_id, WARC_SUFFIX):
            crawls = sorted({c for n in storage.names(WARC_SUFFIX) if (c := crawl_of(n))})
            there = f"crawls there: {', '.join(crawls)}" if crawls else "no crawl's files there"
            print(f"crawlproj: no WARC file of crawl {crawl_id} in {root} ({there}; "
                  "--crawl-id ID, or --all for every crawl's)", file=sys.stderr)
            self.exitcode = 2
            return
        try:
            files, lines = build_index(storage, rebuild=opts.rebuild, crawl_id=crawl_id)
            out = Path(opts.output) if opts.output else root / "index.cdxj"
            total = merge_indexes(storage, out, crawl_id)
        except OSError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        which = "every crawl" if crawl_id is None else f"crawl {crawl_id}"
        print(f"{which}: indexed {files} WARC file(s) ({lines} records); {out}: {total} records")
