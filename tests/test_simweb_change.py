"""Tests of the simulated web's change processes (crawlproj.simweb.change),
its validators and 304s, and the freshness measurement
(crawlproj.simweb.freshness)."""

from __future__ import annotations

import hashlib
import math
import socket
import statistics
import time

import pytest

from crawlproj.simweb import SimWeb
from crawlproj.simweb.change import HTTP_DAY0, WORK_END, WORK_START, ChangeClock, WorkWeek, parse_dist
from crawlproj.simweb.freshness import bucket_of, measure, tally
from crawlproj.simweb.testing import SimWebServer

# ---------------------------------------------------------------------------
# Without change options the web is the one the other tests and benchmarks
# know.  The digests were computed by this very code from the model and
# server as they were before change processes existed (same seed, same spec).
# ---------------------------------------------------------------------------
PINNED = {"seed": 7, "hosts": 20, "pages": 300}
PINNED_PERIODIC = dict(PINNED, change_rate=0.3, change_period=5.0)
PINNED_MODEL = "fb61ea44fe5566f538190d09a41f7d63321df6404f40d24913a6a8ef8f704a76"
PINNED_MODEL_PERIODIC = "2162b3852ac01566a43ba0a40877a6b5de908882c68a35114b0b2268c4a601f6"
PINNED_HTTP = "7089f293d808a9d83e790bcbdffd01128b5ca896e2400c167e2277b1bd6e2c1f"


def model_digest(web: SimWeb, times=(0.0, 1e9)) -> str:
    """Every response a crawler can get (all reachable URLs, robots.txt, a
    404 per host) at two times, and every page's links, status, redirect."""
    h = hashlib.sha256()
    urls = sorted(web.reachable(web.seeds(1), obey_robots=False))
    extra = [f"http://{x}/robots.txt" for x in web.hosts] + [f"http://{x}/nothing.html" for x in web.hosts]
    for u in urls + extra:
        host, path = u[7:].split("/", 1)
        for t in times:
            r = web.respond(host, "/" + path, t)
            h.update(repr((u, r.status, r.content_type, r.location, r.expires)).encode())
            h.update(r.body)
    for v in range(web.n_nodes):
        h.update(repr((web.links(v), web.out_links(v), web.status(v), web.redirect_target(v))).encode())
    return h.hexdigest()


def http_digest(sw: SimWebServer, urls: list[str]) -> str:
    """The raw bytes the server sends for GET and HEAD of each URL."""
    h = hashlib.sha256()
    for u in urls:
        host = u[7:].split("/", 1)[0]
        for method in ("GET", "HEAD"):
            with socket.create_connection(("127.0.0.1", sw.port), timeout=10) as s:
                s.sendall(f"{method} {u} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
                out = b""
                while chunk := s.recv(65536):
                    out += chunk
            h.update(out)
    return h.hexdigest()


def test_without_change_options_the_model_is_unchanged():
    assert model_digest(SimWeb.generate(**PINNED)) == PINNED_MODEL
    assert model_digest(SimWeb.generate(**PINNED_PERIODIC)) == PINNED_MODEL_PERIODIC


def test_without_change_options_the_server_sends_the_same_bytes():
    with SimWebServer(PINNED) as sw:
        urls = sorted(sw.web.reachable(sw.web.seeds(1), obey_robots=False))[:120]
        urls += [f"http://{sw.web.hosts[0]}/robots.txt", f"http://{sw.web.hosts[0]}/nothing.html"]
        digest = http_digest(sw, urls)
        recs = sw.settle_log()
    assert digest == PINNED_HTTP
    assert recs and not any("v" in r for r in recs)


# ---------------------------------------------------------------------------
# Change processes
# ---------------------------------------------------------------------------
def test_change_dist_forms_and_errors():
    assert parse_dist("fixed:2") == ("fixed", (2.0,))
    assert parse_dist("loguniform:0.00274:96") == ("loguniform", (0.00274, 96.0))
    assert parse_dist("Gamma:0.8:0.25") == ("gamma", (0.8, 0.25))
    for bad in ("poisson:1", "fixed", "fixed:1:2", "loguniform:0:1", "loguniform:2:1",
                "gamma:0:1", "gamma:1:x", "fixed:-1", "fixed:nan"):
        with pytest.raises(ValueError):
            parse_dist(bad)
    with pytest.raises(ValueError):  # two models of change at once
        SimWeb.generate(hosts=2, pages=10, change_rate=0.5, change_dist="fixed:1")
    with pytest.raises(ValueError):
        SimWeb.generate(hosts=2, pages=10, change_links=0.5)
    with pytest.raises(ValueError):
        SimWeb.generate(hosts=2, pages=10, change_dist="fixed:1", change_workweek=1.0)


def rates(web: SimWeb) -> list[float]:
    return [web.true_rate(v) for v in range(web.n_nodes) if web.is_html(v)]


def test_rates_follow_their_distribution():
    base = {"seed": 5, "hosts": 40, "pages": 4000, "change_epoch": 1.0}
    fixed = SimWeb.generate(**base, change_dist="fixed:3")
    assert set(rates(fixed)) == {3.0}
    lo, hi = 1 / 365, 96.0
    logu = rates(SimWeb.generate(**base, change_dist=f"loguniform:{lo}:{hi}"))
    assert all(lo <= r <= hi for r in logu)
    # log-uniform: each decade of the range holds its share of the pages
    share = sum(1 for r in logu if 0.1 <= r < 1) / len(logu)
    assert share == pytest.approx(1 / math.log10(hi / lo), abs=0.03)
    gam = rates(SimWeb.generate(**base, change_dist="gamma:0.8:0.25"))
    assert statistics.mean(gam) == pytest.approx(0.8 * 0.25, abs=0.02)
    assert statistics.variance(gam) == pytest.approx(0.8 * 0.25 ** 2, rel=0.15)
    # not HTML pages (500s, redirects) never change
    web = SimWeb.generate(**base, change_dist="fixed:3", p500=0.05)
    assert any(not web.is_html(v) and web.true_rate(v) == 0 for v in range(web.n_nodes))


def test_changes_are_a_poisson_process_of_the_page_rate():
    web = SimWeb.generate(seed=2, hosts=10, pages=300, change_dist="fixed:2", change_epoch=1.0)
    pages = [v for v in range(web.n_nodes) if web.is_html(v)]
    counts = [len(web.change_times(v, 0, 500)) for v in pages]
    assert statistics.mean(counts) / 500 == pytest.approx(2, rel=0.02)
    # counts over a window are Poisson: variance equals mean
    small = [len(web.change_times(v, 10, 11)) for v in pages]
    assert statistics.variance(small) / statistics.mean(small) == pytest.approx(1, abs=0.25)
    ts = web.change_times(pages[0], 0, 500)
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    # exponential gaps: standard deviation equals the mean (a periodic or
    # uniform process would be far below)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1, abs=0.12)
    # the same spec gives the same times; another seed other times
    again = SimWeb.generate(seed=2, hosts=10, pages=300, change_dist="fixed:2", change_epoch=1.0)
    assert again.change_times(pages[0], 0, 500) == ts
    other = SimWeb.generate(seed=3, hosts=10, pages=300, change_dist="fixed:2", change_epoch=1.0)
    assert other.change_times(pages[0], 0, 500) != ts


def in_work_hours(s: float) -> bool:
    return s % 7 < 5 and WORK_START <= s % 1 < WORK_END


def test_workweek_puts_changes_in_weekday_working_hours():
    flat = SimWeb.generate(seed=2, hosts=10, pages=300, change_dist="fixed:2", change_epoch=1.0)
    week = SimWeb.generate(seed=2, hosts=10, pages=300, change_dist="fixed:2", change_epoch=1.0,
                           change_workweek=0.8)
    for web, share in ((flat, 2.5 / 7), (week, 0.8)):
        ts = [s for v in range(web.n_nodes) for s in web.change_times(v, 0, 140)]
        assert sum(map(in_work_hours, ts)) / len(ts) == pytest.approx(share, abs=0.01)
        # the mean rate is the page's rate either way
        assert len(ts) / 140 / sum(web.is_html(v) for v in range(web.n_nodes)) == pytest.approx(2, rel=0.03)
    w = WorkWeek(0.8)
    for s in (0.0, 0.1, 0.3, 4.9, 5.5, 6.99, 13.2, -3.3):
        assert w.inverse(w.cumulative(s)) == pytest.approx(s, abs=1e-9)
    assert w.cumulative(7.0) == pytest.approx(7.0)


def test_version_text_links_and_expiry():
    web = SimWeb.generate(seed=4, hosts=5, pages=200, change_dist="fixed:1", day_seconds=10.0,
                          change_epoch=1000.0, change_links=0.5)
    clock = web.clock
    v = next(n for n in range(1, web.n_nodes) if web.is_html(n) and len(web.links(n, 0)) > 8
             and web.host_of(n) == 0 and 8 * n + 1 < web.host_size(web.hosts[0]))
    # (a wall time and a simulated day round-trip to within an ulp: step in)
    t1 = clock.wall(web.changed(v, 3)) + 1e-6   # version 3 has begun
    t2 = clock.wall(web.changed(v, 4)) + 1e-6
    mid = (t1 + t2) / 2
    assert web.version(v, t1 - 2e-6) == 2
    assert web.version(v, t1) == 3 and web.version(v, mid) == 3 and web.version(v, t2) == 4
    r = web.respond(*web.host_path(v), t=mid)
    assert r.version == 3 and r.expires == pytest.approx(t2, abs=1e-5)
    assert r.etag == web.etag(v, 3) != web.etag(v, 4)
    assert r.last_modified == math.floor(HTTP_DAY0 + web.changed(v, 3) * 86400)
    # same version, same bytes; another version, other text and links
    assert web.render(v, t1) == web.render(v, mid) == r.body
    assert web.render(v, t2) != r.body
    links = [web.links(v, clock.wall(web.changed(v, k)) + 1e-6) for k in range(8)]
    assert len({tuple(x) for x in links}) == 8
    # the tree links (page k links to 8k+1..8k+8 of its host) are in every
    # version, so every page stays reachable from the root
    size = web.host_size(web.hosts[0])
    tree = {web.url(c) for c in range(8 * v + 1, min(8 * v + 9, size))}
    assert tree and all(tree <= {u for u, _ in x} for x in links)
    # before day 0 a page is version 0
    assert web.version(v, 0.0) == 0


def test_clock_and_http_dates():
    c = ChangeClock(1000.0, 5.0)
    assert c.day(1010.0) == 2.0 and c.wall(2.0) == 1010.0
    assert c.http_date(0.0) == "Mon, 01 Jan 2001 00:00:00 GMT"
    assert c.http_date(1.5 + 7) == "Tue, 09 Jan 2001 12:00:00 GMT"
    assert ChangeClock.parse_http_date("Tue, 09 Jan 2001 12:00:00 GMT") == HTTP_DAY0 + 8.5 * 86400
    assert ChangeClock.parse_http_date("Tuesday, 09-Jan-01 12:00:00 GMT") == HTTP_DAY0 + 8.5 * 86400
    assert ChangeClock.parse_http_date("garbage") is None
    # an unset epoch is fixed once, and carried in the spec
    web = SimWeb.generate(hosts=2, pages=10, change_dist="fixed:1")
    assert abs(web.spec["change_epoch"] - time.time()) < 5
    assert SimWeb.from_spec(web.spec).spec["change_epoch"] == web.spec["change_epoch"]
    assert SimWebServer({"hosts": 2, "pages": 10, "change_dist": "fixed:1"}).spec["change_epoch"] > 0


def test_untrustworthy_last_modified_hosts():
    web = SimWeb.generate(seed=1, hosts=60, pages=300, change_dist="fixed:1", change_epoch=1.0,
                          lm_untrusted=0.5)
    modes = [web.lm_mode(h) for h in web.hosts]
    assert 15 <= modes.count("true") <= 45 and modes.count("now") >= 5 and modes.count("none") >= 5
    t = web.clock.wall(3.3)
    for mode in ("true", "now", "none"):
        h = modes.index(mode)
        r = web.respond(web.hosts[h], "/", t)
        expect = {"true": math.floor(HTTP_DAY0 + web.changed(web.node_of(f"http://{web.hosts[h]}/"),
                                                             r.version) * 86400),
                  "now": math.floor(HTTP_DAY0 + 3.3 * 86400), "none": None}[mode]
        assert r.last_modified == expect
    assert set(SimWeb.generate(seed=1, hosts=60, pages=300, change_dist="fixed:1",
                               change_epoch=1.0).lm_mode(h) for h in web.hosts) == {"true"}
