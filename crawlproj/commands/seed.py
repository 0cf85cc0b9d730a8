"""`scrapy seed URLS_OR_FILE`: add seeds to a crawl, running or not.

Workers pick the new URLs up on their next sync; a worker that has seen no
work in its crawl yet waits FRONTIER_IDLE_WAIT seconds for them, and one
started with FRONTIER_IDLE_CLOSE = False waits for them as long as it runs.
"""

from __future__ import annotations

import sys

from scrapy import Request
from scrapy.commands import ScrapyCommand
from scrapy.crawler import Crawler

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.admission import Refused, admit
from crawlproj.frontier.frontier import Frontier
from crawlproj.frontier.urlfilter import URLFilter
from crawlproj.prioritizers import load_prioritizer
from crawlproj.redis.client import get_redis
from crawlproj.seeds import read_seeds
from crawlproj.spiders.web import WebSpider


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "PATH_OR_URLS [--crawl-id ID]"

    def short_desc(self):
        return "Add seed URLs to a crawl's shared frontier"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl to seed (default: CRAWL_ID)")

    def run(self, args, opts):
        if len(args) != 1:
            print("usage: scrapy seed PATH_OR_URLS", file=sys.stderr)
            self.exitcode = 2
            return
        if opts.crawl_id:
            self.settings.set("CRAWL_ID", opts.crawl_id, priority="cmdline")
        try:
            check_settings(self.settings)  # the settings module, -s, CRAWLPROJ_ variables
            urls, problems = read_seeds(args[0])
            url_filter = URLFilter.from_settings(self.settings)
            crawler = Crawler(WebSpider, self.settings)
            prioritizer = load_prioritizer(self.settings.get("FRONTIER_PRIORITIZER"), crawler)
            # it adds URLs as a worker does: to a crawl of its settings, or a new one
            frontier = Frontier.from_settings(self.settings, get_redis(self.settings))
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        for problem in problems:
            print(f"skipped {problem}", file=sys.stderr)
        entries = []
        for url in urls:
            try:
                p, entry = admit(frontier, prioritizer, Request(url, meta={"depth": 0}), None,
                                 self.settings.getint("FRONTIER_MAX_URL_LENGTH"),
                                 urlfilter=url_filter)
            except Refused as exc:
                print(f"skipped {url}: {exc.message}", file=sys.stderr)
                continue
            entries.append((p, entry))
        put = frontier.put_urls(entries)
        print(f"crawl {frontier.crawl_id}: {put.added} seed(s) added, "
              f"{put.duplicates} already seen")
