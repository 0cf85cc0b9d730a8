"""`scrapy crawl`, with crawlproj's problems reported in one line.

The same command as Scrapy's; before the engine starts it checks what a user
most often gets wrong (a misspelt setting, a seeds argument without a usable
URL, a scope or prioritizer that does not exist, a URL filter pattern that
does not compile or a filter file that is not there, an unreachable or
unwritable Redis, a crawl of the same CRAWL_ID started with other settings)
and answers with one clear line and exit status 2 instead of a traceback.
A crawl that then stops on a failure it cannot crawl through exits with the
status of its class (crawlproj.errors.EXIT_STATUS: Redis lost the crawl's
state 3, refuses its writes 4, did not answer for REDIS_OUTAGE_LIMIT 5, a
store cannot write 6, no seed's host resolves 7: crawlproj/dns.py), any
other error with 1, each with one last line.

A close that has begun (a failure, the end of the crawl) finishes on
Ctrl-C: Scrapy's graceful stop would wait only for the downloads under way
and stop the reactor before the scheduler and the stores have closed. A
second Ctrl-C stops at once, as Scrapy's does, and says what that loses.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys

from scrapy import signals
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError
from scrapy.utils.ossignal import install_shutdown_handlers, signal_names
from twisted.internet import task
from twisted.internet.defer import Deferred

from crawlproj import internals
from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import EXIT_STATUS, CrawlprojError
from crawlproj.redis.client import get_redis

logger = logging.getLogger(__name__)


def exit_status(reason: str | None) -> tuple[int, str | None]:
    """The exit status of a crawl that ended with finish reason, and what
    its last line says (None: nothing to say)."""
    if reason in EXIT_STATUS:
        status, what = EXIT_STATUS[reason]
        return status, f"{what} (finish reason {reason})"
    if reason and (reason.endswith("_error") or reason == "closespider_errorcount"):
        return 1, f"finish reason {reason}"
    return 0, None


class CloseWatch:
    """A close under way finishes, whatever signal comes; the second signal forces the stop.

    Scrapy's graceful stop, asked while the engine already closes the spider,
    waits only for the downloads under way and then stops the reactor, before
    the scheduler and the stores have closed. Once a close has begun that
    Scrapy's stop did not begin, the reactor's shutdown waits (a Twisted
    "before shutdown" trigger) until the engine holds no spider any more."""

    def __init__(self, crawler):
        self.crawler = crawler
        self.forced = False
        crawler.signals.connect(self._opened, signals.spider_opened)

    def _opened(self, spider=None) -> None:
        internals.on_close_started(self.crawler, self._closing)

    def _closing(self) -> None:
        from twisted.internet import reactor

        if not self.crawler.crawling:  # Scrapy's own stop: it waits for the whole close
            return
        reactor.addSystemEventTrigger("before", "shutdown", self._closed)
        install_shutdown_handlers(self._during_close)

    def _closed(self) -> Deferred:
        """Fires once the engine's close is over (or a second signal forced the stop)."""
        done = Deferred()

        def check():
            if self.forced or getattr(self.crawler.engine, "spider", None) is None:
                loop.stop()
                done.callback(None)
        loop = task.LoopingCall(check)
        loop.start(0.05)
        return done

    def _during_close(self, signum, _frame) -> None:
        from twisted.internet import reactor

        install_shutdown_handlers(self._force)
        reactor.callFromThread(logger.warning, "Received %s while the crawl is closing: it "
                               "finishes its close. Send again to stop at once.", signal_names[signum])

    def _force(self, signum, _frame) -> None:
        from twisted.internet import reactor

        install_shutdown_handlers(signal.SIG_IGN)
        self.forced = True
        reactor.callFromThread(logger.warning, "Received %s: stopping at once. Pages not yet "
                               "stored are not in this worker's stores; their URLs go back to "
                               "their queues when their leases expire.", signal_names[signum])
        reactor.callFromThread(_stop_reactor)


def _stop_reactor() -> None:
    from twisted.internet import reactor

    with contextlib.suppress(RuntimeError):  # already stopping: the trigger above lets it go on
        reactor.stop()


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
        watch = CloseWatch(crawler)
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        session = getattr(crawler.spider, "realtime", None)
        if session is not None and not self.crawler_process.bootstrap_failed:
            session.print_results(crawler.settings)
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
            return
        status, said = exit_status(reasons[-1] if reasons else None)
        if watch.forced and not reasons:
            status, said = 1, "stopped at once during its close"
        if status:
            print(f"crawlproj: the crawl stopped on an error: {said}; the log says what failed "
                  f"(exit status {status})", file=sys.stderr)
            self.exitcode = status

    def check(self, spider: str, spargs: dict) -> None:
        """Everything a worker needs, in the order that touches nothing first."""
        from crawlproj.addressguard import AllowList, guarded_handlers
        from crawlproj.due.urlseen import DueConfig
        from crawlproj.frontier.frontier import join
        from crawlproj.frontier.urlfilter import URLFilter
        from crawlproj.monitor.heartbeat import monitor_interval
        from crawlproj.monitor.history import rings
        from crawlproj.prioritizers import prioritizer_class
        from crawlproj.recrawl.schedule import check_settings as check_recrawl
        from crawlproj.scope import scope_mode
        from crawlproj.search.realtime import Session
        from crawlproj.seeds import read_seeds

        internals.check()  # a Scrapy whose internals the hooks cannot patch
        settings = self.settings
        spiders = self.crawler_process.spider_loader.list()
        if spider not in spiders:
            raise CrawlprojError(f"no spider {spider!r} in this project; its spiders: "
                                 f"{', '.join(sorted(spiders))}")
        # the settings module, -s, Scrapyd's job settings; the spider may read its own
        check_settings(settings, self.crawler_process.spider_loader.load(spider))
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
        URLFilter.from_settings(settings)  # every pattern compiles, the file reads
        DueConfig.from_settings(settings)
        monitor_interval(settings)
        rings(settings)
        AllowList.from_settings(settings)
        if settings.getwithbase("DOWNLOADER_MIDDLEWARES").get(
                "middlewares.addressguard.AddressGuardMiddleware") is not None:
            guarded_handlers(settings)
        # starts the embedded server when REDIS_URL is unset; then the crawl's
        # record, which the frontier checks again when it opens
        join(settings, get_redis(settings))
