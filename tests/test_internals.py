"""crawlproj/internals.py leans on Scrapy internals: check each one's behaviour
against the installed Scrapy's real engine, so that a Scrapy release that
changes one fails here, loudly (../shared/scrapy-notes.md §2).

The engine runs in a child process (a reactor starts once per process), over
the simulated web on loopback, with Scrapy's own scheduler extended by the
hooks the frontier uses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crawlproj import internals
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import ROOT

pytestmark = pytest.mark.e2e  # a real crawl in a child process

PROBE = r'''
import json, sys
import scrapy
from scrapy.core.scheduler import Scheduler
from scrapy.crawler import CrawlerProcess

from crawlproj import internals

events = []
seeds = json.loads(sys.argv[1])
hold = sys.argv[2:] == ["hold"]  # the first page's item waits for the close to start


class HookedScheduler(Scheduler):
    """Scrapy's scheduler, holding back one request until it wakes the engine."""

    held = None

    def open(self, spider):
        internals.on_request_done(self.crawler, lambda r: events.append(("done", r.url)))
        internals.on_close_started(self.crawler, Record.closing)
        return super().open(spider)

    def enqueue_request(self, request):
        if request.url == seeds[-1] and self.held is None:
            from twisted.internet import reactor  # the crawler installed it
            self.held = request  # handed out only after wake(), 2 s later
            reactor.callLater(2.0, self.release)
            return True
        return super().enqueue_request(request)

    def release(self):
        from twisted.internet import reactor
        super().enqueue_request(self.held)
        events.append(("wake",))
        internals.wake(self.crawler)
        # the engine's heartbeat pulls every 5 s: a pull before this timer
        # fires is wake()'s doing
        reactor.callLater(1.0, events.append, ("timer",))

    def next_request(self):
        request = super().next_request()
        if request is not None:
            events.append(("pulled", request.url))
        return request

    def has_pending_requests(self):
        return super().has_pending_requests() or not any(e[0] == "timer" for e in events)


class Pages(scrapy.Spider):
    name = "pages"
    custom_settings = {"SCHEDULER": "__main__.HookedScheduler", "LOG_LEVEL": "ERROR",
                       "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False,
                       "ITEM_PIPELINES": {"__main__.Record": 100}}

    async def start(self):
        for url in seeds:
            yield scrapy.Request(url, dont_filter=True)

    def parse(self, response):
        yield {"url": response.url}


class Record:
    waiting = None

    @classmethod
    def from_crawler(cls, crawler):
        record = cls()
        record.crawler = crawler
        return record

    def process_item(self, item):
        if hold and Record.waiting is None:
            from twisted.internet import defer, reactor
            from scrapy.utils.defer import deferred_from_coro
            Record.waiting = defer.Deferred()
            engine = self.crawler.engine
            reactor.callLater(1.0, lambda: deferred_from_coro(engine.close_spider_async()))
            Record.waiting.addCallback(lambda _: events.append(("item", item["url"])) or item)
            return Record.waiting
        events.append(("item", item["url"]))
        return item

    @staticmethod
    def closing():
        events.append(("closing",))
        if Record.waiting is not None and not Record.waiting.called:
            Record.waiting.callback(None)


process = CrawlerProcess()
process.crawl(Pages)
process.start()
print(json.dumps(events))
'''


def run_probe(tmp_path, seeds, *args):
    with SimWebServer({"seed": 3, "hosts": 3, "pages": 12}) as sw:
        run = subprocess.run([sys.executable, "-c", PROBE, json.dumps(seeds(sw)), *args],
                             cwd=ROOT, env=sw.env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_done_hook_fires_once_per_request_after_its_items(tmp_path):
    urls = []
    events = run_probe(tmp_path, lambda sw: urls.extend(sw.web.seeds(3)) or urls)
    done = [e[1] for e in events if e[0] == "done"]
    assert sorted(done) == sorted(urls)  # once each
    for url in urls:
        # the request is done only after its page's item went through the pipelines
        assert events.index(["item", url]) < events.index(["done", url])


def test_wake_makes_the_engine_pull_at_once_not_on_its_heartbeat(tmp_path):
    urls = []
    events = run_probe(tmp_path, lambda sw: urls.extend(sw.web.seeds(3)) or urls)
    order = [e for e in events if e[0] in ("wake", "timer") or e == ["pulled", urls[-1]]]
    assert order == [["wake"], ["pulled", urls[-1]], ["timer"]]


def test_close_hook_fires_before_the_engine_waits_for_requests_in_progress(tmp_path):
    """A page whose item waits for the close to start (as a store write waits
    for an unreachable Redis) does not hold the close: the hook lets it go."""
    urls = []
    events = run_probe(tmp_path, lambda sw: urls.extend(sw.web.seeds(1)) or urls, "hold")
    assert events.count(["closing"]) == 1
    assert events.index(["closing"]) < events.index(["item", urls[0]]) \
        < events.index(["done", urls[0]])


def test_the_installed_scrapy_has_every_internal_the_hooks_patch():
    assert internals.missing() == []
    internals.check()


def _take_away(monkeypatch, owner: str, name: str, how: str) -> None:
    """Take name from the real Scrapy object owner, as a Scrapy without it would be."""
    if how == internals.ATTRIBUTE:
        for klass in internals._load(owner).__mro__:  # where it is defined
            if name in vars(klass):
                monkeypatch.delattr(klass, name)
    elif how == internals.SET_BY_INIT:  # a constructor that no longer sets it
        monkeypatch.setattr(internals._load(owner), "__init__", lambda self, *a, **kw: None)
    else:  # a function that no longer reads it
        klass, _, function = owner.rpartition(".")
        monkeypatch.setattr(internals._load(klass), function, lambda self, *a, **kw: None)


@pytest.mark.parametrize("need", internals.NEEDS, ids=lambda n: f"{n[0].rsplit('.', 1)[-1]}.{n[1]}")
def test_a_scrapy_lacking_an_internal_a_hook_patches_is_refused(monkeypatch, need):
    _take_away(monkeypatch, *need)
    assert any(need[1] in absent for absent in internals.missing())
    with pytest.raises(internals.UnsupportedScrapy, match=r"^Scrapy \S+ lacks .*runs on Scrapy"):
        internals.check()


REFUSED = r'''
import sys
from scrapy.cmdline import execute
from scrapy.core.downloader.handlers.http11 import _ScrapyAgent
del _ScrapyAgent._cb_bodyready  # as on a Scrapy without it
sys.argv = ["scrapy", "crawl", "web", "-a", "seeds=http://127.0.0.1:9/"]
execute()
'''


def test_scrapy_crawl_refuses_a_scrapy_lacking_an_internal_in_one_line(tmp_path):
    """Before anything starts (the Redis given is a closed port: reaching it
    would fail otherwise), one line, exit status 2, no traceback."""
    import os
    env = {**os.environ, "CRAWL_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:9/0"}
    run = subprocess.run([sys.executable, "-c", REFUSED], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    said = [line for line in run.stderr.splitlines() if line.startswith("crawlproj:")]
    assert said == [f"crawlproj: Scrapy {internals.scrapy.__version__} lacks "
                     "scrapy.core.downloader.handlers.http11._ScrapyAgent._cb_bodyready, which "
                     "crawlproj patches to crawl correctly; it runs on Scrapy 2.18.0 and 2.19.0"]
