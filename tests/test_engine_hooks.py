"""crawlproj/frontier/engine.py leans on Scrapy internals: fail here, loudly, if
the installed Scrapy no longer has them (../shared/scrapy-notes.md §2)."""

from __future__ import annotations

import asyncio
import inspect

from scrapy.core.downloader import Downloader
from scrapy.core.engine import ExecutionEngine, _Slot
from scrapy.core.scraper import Slot as ScraperSlot
from scrapy.utils.test import get_crawler


def test_engine_internals_the_frontier_uses_exist():
    assert callable(ExecutionEngine._start_scheduled_requests)
    assert callable(ExecutionEngine._start_scheduled_request)
    downloader = Downloader(get_crawler())
    assert isinstance(downloader.active, set) and isinstance(downloader.total_concurrency, int)
    assert callable(ScraperSlot.needs_backout)
    # start_freed relies on the transfer's end being signalled while the
    # request still counts as active (it leaves `active` turns later)
    source = inspect.getsource(Downloader._download)
    assert source.index("request_left_downloader") > source.index("download_request_async")
    assert "remove_request" in dict(inspect.getmembers(_Slot))
    assert {"nextcall", "scheduler"} <= set(inspect.signature(_Slot.__init__).parameters)


def test_scrapy_loads_every_project_middleware(caplog):
    """Scrapy skips a middleware method it cannot use with only an error in the
    log (a spider middleware of this project was skipped so, unnoticed, under
    Scrapy 2.19): build the managers from the project's settings and check
    that each project middleware is in."""
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
    from scrapy.core.spidermw import SpiderMiddlewareManager
    from scrapy.utils.project import get_project_settings

    project = get_project_settings()
    crawler = get_crawler(settings_dict={  # the project's middlewares, not its reactor
        key: project[key] for key in project if "MIDDLEWARES" in key or key.startswith("ROBOTSTXT")})
    with caplog.at_level("ERROR"):
        spider_mw = SpiderMiddlewareManager.from_crawler(crawler)
        DownloaderMiddlewareManager.from_crawler(crawler)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    loaded = {type(mw).__module__ + "." + type(mw).__name__ for mw in spider_mw.middlewares}
    for path, order in project.getdict("SPIDER_MIDDLEWARES").items():
        if order is not None:
            assert path in loaded, path


def test_robots_rules_pending_starts_one_fetch_per_host_and_passes_the_parser_on():
    from scrapy import Request
    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import Deferred

    from middlewares.robots import CrawlDelayRobotsTxtMiddleware

    fetched = []

    class Middleware(CrawlDelayRobotsTxtMiddleware):
        async def robot_parser(self, request):  # Scrapy's download: not what is tested here
            fetched.append(request.url)
            self._parsers["a.ex"] = Deferred()
            return await asyncio.sleep(0, "parser")

    mw = Middleware.from_crawler(get_crawler(settings_dict={"ROBOTSTXT_OBEY": True}))

    async def main():
        waiting, started = mw.rules_pending(Request("http://a.ex/1"))
        assert started and isinstance(waiting, Deferred)
        await asyncio.sleep(0)  # the fetch begins
        # a second URL of the host while the fetch runs: no second fetch, told when it ends
        in_progress = mw._parsers["a.ex"]
        waiting2, started2 = mw.rules_pending(Request("http://a.ex/2"))
        assert not started2 and not waiting2.called
        got = []
        in_progress.addCallback(got.append)  # the middleware's own waiter
        in_progress.callback("parser")
        assert waiting2.called and got == ["parser"]  # the parser passed through
        # known rules (or none needed): nothing to wait for
        mw._parsers["a.ex"] = "parser"
        assert mw.rules_pending(Request("http://a.ex/3")) == (None, False)
        assert mw.rules_pending(Request("http://b.ex/", meta={"dont_obey_robotstxt": True})) \
            == (None, False)

    asyncio.run(main())
    assert fetched == ["http://a.ex/1"]
