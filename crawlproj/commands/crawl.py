"""`scrapy crawl`, with crawlproj's problems reported in one line.

The same command as Scrapy's; before the engine starts it checks what a user
most often gets wrong (a misspelt crawlproj setting, a missing seeds file, an
unreachable REDIS_URL) and answers with one clear line and exit status 2
instead of a traceback.
"""

from __future__ import annotations

import sys

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from crawlproj.addon import CommandSettings, check_names
from crawlproj.errors import CrawlprojError
from crawlproj.redisconn import get_redis


class Command(ScrapyCrawlCommand):
    default_settings = CommandSettings(**ScrapyCrawlCommand.default_settings)

    def run(self, args, opts):
        try:
            check_names(self.settings)  # the settings module, -s, Scrapyd's job settings
            seeds = opts.spargs.get("seeds")
            if seeds:
                from crawlproj.seeds import read_seeds
                read_seeds(seeds)
            get_redis(self.settings)  # starts the embedded server when REDIS_URL is unset
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        super().run(args, opts)
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
