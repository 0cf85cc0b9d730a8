"""`scrapy settings`, with crawlproj's table and the environment's settings.

The same command as Scrapy's, on the settings a crawlproj command runs with:
the table under the settings module, CRAWLPROJ_ variables over it, -s over
both. `scrapy settings --get FRONTIER_PRIORITIZER` shows what a worker started
with the same environment would use; a misspelt name is refused in one line.
"""

from __future__ import annotations

import sys

from scrapy.commands.settings import Command as ScrapySettingsCommand

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError


class Command(ScrapySettingsCommand):
    default_settings = CommandSettings(**ScrapySettingsCommand.default_settings)

    def run(self, args, opts):
        try:
            check_settings(self.settings)
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        super().run(args, opts)
