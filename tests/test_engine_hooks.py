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
