"""crawlproj/frontier/engine.py leans on Scrapy internals: fail here, loudly, if
the installed Scrapy no longer has them (../shared/scrapy-notes.md §2)."""

from __future__ import annotations

import asyncio
import inspect

from scrapy.core.engine import ExecutionEngine, _Slot

from crawlproj.frontier import engine


def test_engine_internals_the_frontier_uses_exist():
    assert callable(ExecutionEngine._start_scheduled_requests)
    assert "remove_request" in dict(inspect.getmembers(_Slot))
    assert "nextcall" in inspect.signature(_Slot.__init__).parameters


def test_refill_first_yields_the_output_one_turn_later():
    class Crawler:
        engine = None  # no engine: pull_now has nothing to fill

    mw = engine.RefillFirstMiddleware.from_crawler(Crawler())
    order = []

    async def spider_output():
        order.append("parsed")
        yield 1

    async def main():
        loop = asyncio.get_running_loop()
        out = mw.process_spider_output_async(None, spider_output())
        first = asyncio.ensure_future(out.__anext__())
        loop.call_later(0, order.append, "pulled")  # scheduled before the parse resumes
        assert await first == 1

    asyncio.run(main())
    assert order == ["pulled", "parsed"]


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
