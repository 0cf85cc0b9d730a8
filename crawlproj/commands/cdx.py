"""`scrapy cdx`: CDXJ indexes of the content store's WARC files.

Each finished WARC file already has its sorted index beside it (NAME.cdxj);
this command writes the ones that are missing (files from elsewhere, or all
of them with --rebuild) and merges them into one sorted index
(WARC_DIR/index.cdxj by default) that pywb and other replay tools read.
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
        return "[--warc-dir DIR] [-o OUT] [--rebuild]"

    def short_desc(self):
        return "Index the WARC files (CDXJ): one index per file and one merged, sorted index"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--warc-dir", default=None, help="default: WARC_DIR or CRAWL_DATA_DIR/warc")
        parser.add_argument("-o", "--output", default=None, help="merged index (default WARC_DIR/index.cdxj)")
        parser.add_argument("--rebuild", action="store_true", help="re-index every file")

    def run(self, args, opts):
        from crawlproj.stores.warc import build_index, merge_indexes
        root = Path(opts.warc_dir) if opts.warc_dir else warc_dir(self.settings)
        if not root.is_dir():
            print(f"crawlproj: no WARC directory {root}", file=sys.stderr)
            self.exitcode = 2
            return
        storage = LocalStorage(root)
        try:
            files, lines = build_index(storage, rebuild=opts.rebuild)
            out = Path(opts.output) if opts.output else root / "index.cdxj"
            total = merge_indexes(storage, out)
        except OSError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        print(f"indexed {files} WARC file(s) ({lines} records); {out}: {total} records")
