"""Continuous crawling of a site that sends bad input (docs/recrawl.md, "The
live crawl"): a Last-Modified in the future or unparsable, an ETag that
changes on every fetch, a page that changes on every fetch, a page that turns
404, a page that starts to redirect. Each is handled as documented, none
stops the crawl or starves the other pages; and a misspelt RECRAWL_POLICY is
refused in one line.

A real `scrapy crawl web` worker, a real Redis-protocol server, HTTP to a
small server on loopback (let through by ADDRESS_GUARD_ALLOW).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis

from crawlproj.frontier import codec
from crawlproj.recrawl.schedule import Recrawl
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.warc import NOT_MODIFIED_PROFILE
from crawlproj.urls import host_of
from tests.e2e import wait_for, warc_records
from tests.loopback import QuietHandler, close, serve
from tests.test_bad_inputs import one_line, scrapy

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("/static", "/future-lm", "/bad-lm", "/etag-every", "/change-every", "/turns-404",
         "/moves", "/moved-here")
STATIC_ETAG = '"static-1"'


class Site(QuietHandler):
    hits: Counter = Counter()
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            self.hits[self.path] += 1
            n = self.hits[self.path]
        path = self.path
        if path == "/robots.txt":
            return self.reply(404)
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)
            return self.reply(200, f"<html><body>{links}</body></html>".encode(),
                              {"ETag": '"index"'})
        page = f"<html><body><p>{path}</p></body></html>"
        headers = {"ETag": f'"{path[1:]}"'}
        if path == "/future-lm":
            headers["Last-Modified"] = "Fri, 01 Jan 2100 00:00:00 GMT"
        elif path == "/bad-lm":
            headers["Last-Modified"] = "yesterday, around noon"
        elif path == "/etag-every":
            headers["ETag"] = f'"e{n}"'
        elif path == "/change-every":
            page = f"<html><body><p>version {n}</p></body></html>"
            headers["ETag"] = f'"v{n}"'
        elif path == "/turns-404" and n > 1:
            return self.reply(404, b"gone")
        elif path == "/moves" and n > 1:
            return self.reply(301, b"", {"Location": "/moved-here"})
        if self.headers.get("If-None-Match") == headers["ETag"]:
            return self.reply(304, b"", {"ETag": headers["ETag"]})
        return self.reply(200, page.encode(), headers)


def warc_revisits(root: Path) -> list[tuple[str, str]]:
    """(target URI, profile) of every revisit record in the WARC files under root."""
    return warc_records(root, "revisit", "WARC-Profile")


@pytest.mark.e2e
def test_bad_input_pages_are_handled_and_starve_no_other_page(redis_url, tmp_path):
    Site.hits = Counter()
    server = serve(ThreadingHTTPServer(("127.0.0.1", 0), Site))
    try:
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        env = {k: v for k, v in os.environ.items() if k not in ("http_proxy", "HTTP_PROXY")}
        env.update(REDIS_URL=redis_url, CRAWL_ID="rcbad", CRAWL_DATA_DIR=str(tmp_path / "data"))
        cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={origin}/"]
        for k, v in {"ADDRESS_GUARD_ALLOW": "127.0.0.1", "CRAWL_SCOPE": "host",
                     "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0.02, "RETRY_TIMES": 0,
                     "RECRAWL_ENABLED": True, "RECRAWL_POLICY": "uniform", "RECRAWL_BUDGET": 20,
                     "RECRAWL_MIN_INTERVAL": 0.3, "RECRAWL_MAX_INTERVAL": 1,
                     "RECRAWL_PLAN_INTERVAL": 0.5}.items():
            cmd += ["-s", f"{k}={v}"]
        with open(tmp_path / "worker.log", "wb") as log:
            worker = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            def fetched_four_times():
                return min(Site.hits[p] for p in ("/static", "/etag-every", "/change-every",
                                                  "/future-lm", "/bad-lm", "/moved-here")) >= 4

            wait_for(lambda: fetched_four_times() or worker.poll() is not None, timeout=120)
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert fetched_four_times(), dict(Site.hits)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        text = (tmp_path / "worker.log").read_text()
        assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
        # a page gone or redirecting leaves the schedule after one more fetch
        assert Site.hits["/turns-404"] == 2 and Site.hits["/moves"] == 2, dict(Site.hits)
        r = redis.Redis.from_url(redis_url)
        ks = Keyspace.open(r, "rcbad")
        host = host_of(origin + "/")
        queue = ks.recrawl_queue(ks.partition_of(host), host)
        assert r.zcard(queue) == len(PAGES) + 1 - 2  # the index, less the two gone
        assert "'recrawl/gone': 2" in text
        # the others are fetched again and again; /static comes back 304 to
        # its conditional GET, the pages whose ETag changes never do
        assert "'recrawl/not_modified'" in text
        # each 304 is in the WARC as a revisit record, server-not-modified
        revisits = warc_revisits(tmp_path / "data")
        paths = {uri[len(origin):] for uri, _ in revisits}
        # the pages with a stable ETag; never those whose ETag or content changes
        assert "/static" in paths and paths <= {"/static", "/future-lm", "/bad-lm",
                                                "/moved-here"}, paths
        assert {profile for _, profile in revisits} == {NOT_MODIFIED_PROFILE}
    finally:
        close(server)


def test_a_misspelt_recrawl_policy_is_refused_in_one_line(tmp_path):
    # refused whether the crawl is continuous or not: the setting is wrong
    run = scrapy("crawl", "web", "-a", "seeds=http://www.example.org/",
                 "-s", "RECRAWL_POLICY=optimall",
                 env_extra={"CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2, run.stderr
    assert one_line(run) == ("crawlproj: RECRAWL_POLICY 'optimall' is not one of uniform, "
                             "adaptive, optimal, webfountain")


def test_a_bad_recrawl_change_is_refused_in_one_line(tmp_path):
    for value in ("digets", "0", "1", "1.5", "nan"):
        run = scrapy("crawl", "web", "-a", "seeds=http://www.example.org/",
                     "-s", f"RECRAWL_CHANGE={value}",
                     env_extra={"CRAWL_DATA_DIR": str(tmp_path)})
        assert run.returncode == 2, run.stderr
        assert one_line(run) == ('crawlproj: RECRAWL_CHANGE must be "digest" or a resemblance '
                                 f"threshold in (0, 1), not {value!r}")


# -- what counts as a change: digest or resemblance (RECRAWL_CHANGE) ------------------------

ARTICLE = " ".join(f"word{i} of the article about topic{i % 7} in paragraph{i // 20}"
                   for i in range(120))


def page(stamp: str, text: str = ARTICLE, indent: str = " ") -> bytes:
    return (f"<html><body>\n<p>Last updated {stamp}</p>\n"
            f"<div>{indent}{text}{indent}</div></body></html>").encode()


def refetches(change: str, bodies: list[bytes]):
    """A page fetched once per body, through the real middleware and the
    frontier's recrawl step: its recrawl state after the last fetch."""
    from scrapy import Request
    from scrapy.http import HtmlResponse
    from scrapy.settings import Settings
    from scrapy.statscollectors import MemoryStatsCollector

    from crawlproj.recrawl.middleware import RecrawlMiddleware
    from crawlproj.recrawl.record import HELD, OBSERVED, STORED
    from crawlproj.recrawl.schedule import Recrawl
    from crawlproj.recrawl.state import RecrawlState

    settings = Settings()
    settings.setmodule("settings.base", priority="project")
    settings.set("RECRAWL_ENABLED", True)
    settings.set("RECRAWL_CHANGE", change)
    # what from_crawler reads of a crawler, and of the frontier outside a plan
    stats = MemoryStatsCollector(SimpleNamespace(settings=settings))
    mw = RecrawlMiddleware.from_crawler(SimpleNamespace(settings=settings, stats=stats))
    recrawl = Recrawl.from_settings(settings, SimpleNamespace(new_share=0.2))
    url, record = "http://www.example.org/news", None
    for i, body in enumerate(bodies):
        request = Request(url, meta={HELD: record})  # as the scheduler marks a lease
        mw.process_request(request)
        response = HtmlResponse(url, body=body, headers={"Content-Type": "text/html"},
                                request=request)
        mw.process_response(request, response)
        # a day apart (the state keeps fetch times as given)
        request.meta[OBSERVED] = replace_at(request.meta[OBSERVED], 1.7e9 + i * 86400)
        scheduled = recrawl.after(request, recrawl=record is not None, stats=stats)
        record = codec.decode(scheduled.payload, host="www.example.org").meta[STORED]
    return RecrawlState.unpack(record[0]), record


def replace_at(fetch, at):
    from dataclasses import replace
    return replace(fetch, at=at)


def test_a_trivial_change_is_no_change_under_a_resemblance_threshold_and_one_under_digest():
    """WebFountain's "non-trivial change" (§4): a new date stamp and
    re-indented text change the bytes, not the page. Under the digest both
    count as changes; under a resemblance threshold of 0.8 neither does,
    while a rewritten article still does. The record keeps a 16-byte sketch."""
    trivial = [page("2026-11-01"), page("2026-11-02"), page("2026-11-03", indent="\n    "),
               page("2026-11-04")]
    state, record = refetches("digest", trivial)
    assert (state.fetches, state.changes) == (3, 3) and len(record[3]) == 8
    state, record = refetches("0.8", trivial)
    assert (state.fetches, state.changes) == (3, 0) and len(record[3]) == 16
    rewritten = " ".join(f"entry{i} on subject{i % 5} now reads otherwise" for i in range(150))
    state, _ = refetches("0.8", [page("2026-11-01"), page("2026-11-02"),
                                 page("2026-11-02", text=rewritten)])
    assert (state.fetches, state.changes) == (2, 1)


def test_sketch_resemblance_follows_the_shingles_resemblance():
    """The 16-byte sketch's estimate against the exact resemblance of the
    4-shingle sets, over pages edited by growing amounts (1 to 60 of 200
    words replaced): within 0.25 each, and within 0.06 on average."""
    import random

    from crawlproj.due.contentseen import words
    from crawlproj.recrawl.record import resemblance, text_sketch

    def shingles(body):
        ws = words(body)
        return {tuple(ws[i:i + 4]) for i in range(len(ws) - 3)}

    rng = random.Random(7)
    base = [f"w{rng.randrange(5000)}" for _ in range(200)]
    errors = []
    for edits in (1, 2, 5, 10, 20, 40, 60) * 6:
        other = list(base)
        for i in rng.sample(range(200), edits):
            other[i] = f"x{rng.randrange(5000)}"
        a, b = " ".join(base).encode(), " ".join(other).encode()
        sa, sb = shingles(a), shingles(b)
        exact = len(sa & sb) / len(sa | sb)
        errors.append(resemblance(text_sketch(a), text_sketch(b)) - exact)
    assert max(abs(e) for e in errors) <= 0.25
    assert abs(sum(errors) / len(errors)) <= 0.06


def test_last_modified_on_another_calendar_is_read_as_the_pages_age():
    """A server whose calendar is not the crawl's clock (the simulated web's
    starts in 2001 and runs RECRAWL_TIME_SCALE times as fast): Last-Modified
    is read as the page's age by the server's Date, so it stays usable and
    the Last-Modified estimator sees how recent each change is. A page
    changing 20 times a day, fetched daily, changed a little before each
    fetch: its rate comes out near 20 a day, not capped near the fetch rate
    as changed/unchanged alone would have it."""
    from email.utils import formatdate

    from scrapy import Request

    from crawlproj.recrawl.record import HELD, OBSERVED, STORED, Fetch
    from crawlproj.recrawl.schedule import Recrawl
    from crawlproj.recrawl.state import RecrawlState

    scale, day = 43200.0, 86400.0
    recrawl = Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0, scale=scale)
    wall0, server0 = 1.79e9, 978307200.0         # the server's calendar: 2001-01-01
    rng = __import__("random").Random(3)
    record, url = None, "http://www.example.org/fast"
    for i in range(12):
        server_now = server0 + i * day
        age = rng.expovariate(20 / day)           # time since the last change, by the server
        fetch = Fetch(200, f'"v{i}"', formatdate(server_now - age, usegmt=True),
                      formatdate(server_now, usegmt=True), bytes([i]) * 8,
                      wall0 + i * day / scale)
        request = Request(url, meta={HELD: record, OBSERVED: fetch})
        scheduled = recrawl.after(request, recrawl=record is not None)
        record = codec.decode(scheduled.payload, host="www.example.org").meta[STORED]
    state = RecrawlState.unpack(record[0])
    assert state.lm_usable and state.lm_changes == 12     # 11 changes and the first age
    assert 10 < state.rate * day < 40


def _fetched_daily(recrawl, wall0: float, server_dates, ages, versions):
    """A page fetched once a simulated day through Recrawl.after; server_dates(i):
    the server's Date (Unix seconds) at fetch i, ages[i]: the page's age then
    in the server's seconds, versions[i]: its version. Its state after the
    last fetch."""
    from email.utils import formatdate

    from scrapy import Request

    from crawlproj.recrawl.record import HELD, OBSERVED, STORED, Fetch
    from crawlproj.recrawl.state import RecrawlState

    record, url, day = None, "http://www.example.org/p", 86400.0
    for i in range(len(ages)):
        date = server_dates(i)
        fetch = Fetch(200, f'"v{versions[i]}"', formatdate(date - ages[i], usegmt=True),
                      formatdate(date, usegmt=True), bytes([versions[i] % 256]) * 8,
                      wall0 + i * day / recrawl.config.scale)
        request = Request(url, meta={HELD: record, OBSERVED: fetch})
        scheduled = recrawl.after(request, recrawl=record is not None)
        record = codec.decode(scheduled.payload, host="www.example.org").meta[STORED]
    return RecrawlState.unpack(record[0])


def test_last_modified_by_the_machines_clock_under_a_fast_crawl_clock():
    """A web that dates its pages by the machine's clock while the crawl's
    clock runs RECRAWL_TIME_SCALE times as fast: the ages Date - Last-Modified
    are wall seconds, and taken as crawl seconds they made every page seen
    changed at each visit look 17,280 times faster than it is (the optimal
    plan then gave such pages nothing). The server's Date against the crawl
    clock tells its seconds from the crawl's: a page changing twice a day,
    fetched daily, comes out near 2 a day on either kind of web."""
    import numpy as np

    scale, day, wall0 = 17280.0, 86400.0, 1.79e9 + 0.37
    rng = np.random.default_rng(5)
    changes = np.cumsum(rng.exponential(day / 2, 400)) - day      # Poisson, 2 a day
    fetches = np.arange(60) * day
    last = [changes[changes <= t].max() for t in fetches]
    versions = [int((changes <= t).sum()) for t in fetches]
    wall = _fetched_daily(Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0, scale=scale),
                          wall0, lambda i: math.floor(wall0 + i * day / scale),
                          [math.floor(wall0 + t / scale) - math.floor(wall0 + c / scale)
                           for t, c in zip(fetches, last)], versions)
    simulated = _fetched_daily(Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0,
                                       scale=scale),
                               wall0, lambda i: 978307200.0 + i * day,
                               [round(t - c) for t, c in zip(fetches, last)], versions)
    for state in (wall, simulated):
        assert state.lm_usable and state.fetches == 59 and state.lm_changes > 45
        assert 1.5 < state.rate * day < 2.7, state.rate * day


def test_the_first_fetchs_last_modified_dates_a_page_never_seen_changed():
    """A page last modified 300 days before its first fetch, then unchanged
    at three daily visits: its Last-Modified says it changes about once in
    300 days, and the plan puts it there, not at the few days it was watched
    (which put it near 0.1 a day)."""
    from crawlproj.recrawl import buckets
    from crawlproj.recrawl.schedule import live_bucket

    day = 86400.0
    state = _fetched_daily(Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0),
                           1.79e9, lambda i: 1.79e9 + i * day,
                           [300 * day + i * day for i in range(4)], [0] * 4)
    assert state.lm_usable and (state.lm_changes, state.changes, state.fetches) == (1, 0, 3)
    assert 1 / 600 < state.rate * day < 1 / 250
    assert buckets.rate_of(live_bucket(state)) * day < 1 / 150


def test_a_page_is_not_starved_on_a_few_dated_changes():
    """Two changes in a day of dated exposure put a page changing daily
    above the cut-off of a plan at 0.2 fetches per page per day on
    Gamma-distributed rates; given nothing, it would never be fetched again
    to correct that. Its rate's lower 10 % quantile is below the cut-off, so
    it is planned there; a page with 30 changes in 7.5 days is starved."""
    from crawlproj.recrawl import buckets
    from crawlproj.recrawl.schedule import live_bucket
    from crawlproj.recrawl.state import RecrawlState

    day = 86400.0
    rates = __import__("numpy").random.default_rng(2).gamma(0.8, 0.25, 2000) / day
    recrawl = Recrawl(SimpleNamespace(new_share=0.0), "optimal", 0.2 * 2000 / day)
    counts: dict[int, int] = {}
    for k in buckets.buckets_of(rates):
        counts[int(k)] = counts.get(int(k), 0) + 1
    recrawl.set_plan(counts, 0)
    few = RecrawlState(fetches=2, changes=2, lm_changes=2, last_fetch=1e9,
                       t_changed=10 * day, lm_exposure=1.0 * day)
    many = RecrawlState(fetches=30, changes=30, lm_changes=30, last_fetch=1e9,
                        t_changed=150 * day, lm_exposure=7.5 * day)
    assert recrawl.starved(live_bucket(few)) and recrawl.starved(live_bucket(many))
    assert not recrawl.starved(recrawl.bucket_for(few))
    assert recrawl.bucket_for(few) < live_bucket(few)
    assert recrawl.starved(recrawl.bucket_for(many))
