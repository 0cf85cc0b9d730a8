"""`scrapy crawl`, with crawlproj's problems reported in one line.

The same command as Scrapy's; before the engine starts it checks what a user
most often gets wrong (a misspelt crawlproj setting, a seeds argument without
a usable URL, a scope or prioritizer that does not exist, an unreachable or
unwritable Redis, a crawl of the same CRAWL_ID started with other settings)
and answers with one clear line and exit status 2 instead of a traceback.
A crawl that then stops on an error (its finish reason says so, e.g.
``store_error``) exits with status 1, its reason in one last line.
"""

from __future__ import annotations

import sys

from scrapy import signals
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.redisconn import get_redis


def stopped_on_error(reason: str | None) -> bool:
    """Whether a finish reason says the crawl stopped on an error: crawlproj's
    own end in ``_error`` (crawlproj/pipelines/guard.py), Scrapy's CloseSpider
    extension says ``closespider_errorcount``."""
    return bool(reason) and (reason.endswith("_error") or reason == "closespider_errorcount")


class Command(ScrapyCrawlCommand):
    default_settings = CommandSettings(**ScrapyCrawlCommand.default_settings)

    def run(self, args, opts):
        if not args:
            raise UsageError()
        if len(args) > 1:
            raise UsageError("one spider per crawl command: scrapy crawl web ...")
        try:
            self.check(args[0], opts.spargs)
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        crawler = self._create_crawler(args[0])
        reasons = []
        crawler.signals.connect(lambda spider, reason: reasons.append(reason),
                                signals.spider_closed, weak=False)
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        session = getattr(crawler.spider, "realtime", None)
        if session is not None and not self.crawler_process.bootstrap_failed:
            session.print_results(crawler.settings)
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        elif reasons and stopped_on_error(reasons[-1]):
            print(f"crawlproj: the crawl stopped on an error (finish reason {reasons[-1]}; "
                  "the log says what failed)", file=sys.stderr)
            self.exitcode = 1

    def check(self, spider: str, spargs: dict) -> None:
        """Everything a worker needs, in the order that touches nothing first."""
        from crawlproj.addressguard import AllowList, guarded_handlers
        from crawlproj.due.urlseen import DueConfig
        from crawlproj.frontier.frontier import join
        from crawlproj.frontier.recrawl import check_settings as check_recrawl
        from crawlproj.monitor.heartbeat import monitor_interval
        from crawlproj.prioritizers import prioritizer_class
        from crawlproj.scope import scope_mode
        from crawlproj.search.realtime import Session
        from crawlproj.seeds import read_seeds

        settings = self.settings
        check_settings(settings)  # the settings module, -s, Scrapyd's job settings
        spiders = self.crawler_process.spider_loader.list()
        if spider not in spiders:
            raise CrawlprojError(f"no spider {spider!r} in this project; its spiders: "
                                 f"{', '.join(sorted(spiders))}")
        seeds = spargs.get("seeds")
        seed_urls = read_seeds(seeds)[0] if seeds and seeds.strip() else []
        if "query" in spargs or "max_pages" in spargs:
            # the real-time search mode: the spider lays the same settings on
            # its crawler; here on a copy, for the checks below
            if "query" not in spargs:
                raise CrawlprojError("-a max_pages is for the real-time search mode: give "
                                     "-a query='...' too")
            settings = self.settings.copy()
            Session.configure(settings, spargs["query"], spargs.get("max_pages")) \
                .require_start(settings, seed_urls)
        if spargs.get("scope"):
            scope_mode(spargs["scope"], "scope")
        scope_mode(settings.get("CRAWL_SCOPE"), "CRAWL_SCOPE")
        prioritizer = prioritizer_class(settings.get("FRONTIER_PRIORITIZER"))
        if hasattr(prioritizer, "check_settings"):  # its own settings (similarity's query)
            prioritizer.check_settings(settings)
        check_recrawl(settings)
        DueConfig.from_settings(settings)
        monitor_interval(settings)
        AllowList.from_settings(settings)
        if settings.getwithbase("DOWNLOADER_MIDDLEWARES").get(
                "middlewares.addressguard.AddressGuardMiddleware") is not None:
            guarded_handlers(settings)
        # starts the embedded server when REDIS_URL is unset; then the crawl's
        # record, which the frontier checks again when it opens
        join(settings, get_redis(settings))
