"""Tests of the simulated web's change processes (crawlproj.simweb.change),
its validators and 304s, and the freshness measurement
(crawlproj.simweb.freshness)."""

from __future__ import annotations

import email.utils
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
    before = time.time()
    web = SimWeb.generate(hosts=2, pages=10, change_dist="fixed:1")
    # the current second when built (floored), not some other moment
    assert math.floor(before) <= web.spec["change_epoch"] <= time.time()
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


# ---------------------------------------------------------------------------
# Over HTTP: validators, 304, the version in the log
# ---------------------------------------------------------------------------
def test_a_web_dated_by_the_machines_clock():
    """http_clock "wall": Date and Last-Modified are the machine's clock at
    the moment, however fast simulated days run, and If-Modified-Since is
    judged on that clock."""
    spec = {"seed": 6, "hosts": 10, "pages": 60, "change_dist": "fixed:0.01",
            "day_seconds": 2.0, "http_clock": "wall"}
    with SimWebServer(spec) as sw:
        web = sw.web
        u = next(f"http://{h}/" for h in web.hosts if web.lm_mode(h) == "true")
        node = web.node_of(u)
        st, h, _ = sw.fetch(u)
        v = web.version(node)
        assert st == 200
        assert ChangeClock.parse_http_date(h["date"]) == pytest.approx(time.time(), abs=5)
        assert ChangeClock.parse_http_date(h["last-modified"]) == math.floor(
            web.clock.wall(web.changed(node, v)))
        lm = ChangeClock.parse_http_date(h["last-modified"])
        assert sw.fetch(u, headers={"If-Modified-Since": h["last-modified"]})[0] == 304
        earlier = email.utils.formatdate(lm - 1, usegmt=True)
        assert sw.fetch(u, headers={"If-Modified-Since": earlier})[0] == 200
    with pytest.raises(ValueError, match="http_clock"):
        ChangeClock(0.0, 2.0, "sundial")


def test_conditional_get_and_the_logged_version():
    # a real-time clock (a simulated day is a day) so no page changes during
    # the test, except that day 0 lies 40 days back
    epoch = time.time() - 40 * 86400.0
    spec = {"seed": 6, "hosts": 40, "pages": 200, "change_dist": "fixed:0.5", "day_seconds": 86400.0,
            "change_epoch": epoch, "lm_untrusted": 0.6}
    with SimWebServer(spec) as sw:
        web = sw.web
        roots = {m: next(f"http://{h}/" for h in web.hosts if web.lm_mode(h) == m)
                 for m in ("true", "now", "none")}
        u = roots["true"]
        node = web.node_of(u)
        st, h, body = sw.fetch(u)
        v = web.version(node)
        assert st == 200 and body == web.render(node)
        assert h["etag"] == web.etag(node, v)
        assert h["last-modified"] == ChangeClock.http_date(web.changed(node, v))
        assert ChangeClock.parse_http_date(h["date"]) == pytest.approx(
            HTTP_DAY0 + web.clock.day(time.time()) * 86400, abs=5)
        lm = h["last-modified"]
        hit = lambda hdrs: sw.fetch(u, headers=hdrs)  # noqa: E731
        assert hit({"If-None-Match": h["etag"]})[0] == 304
        st304, h304, b304 = hit({"If-None-Match": f'"x", W/{h["etag"]}'})
        assert (st304, b304, h304["etag"], h304["last-modified"]) == (304, b"", h["etag"], lm)
        assert "content-length" not in h304
        assert hit({"If-None-Match": '"0-00000000"'})[0] == 200
        # If-None-Match wins over If-Modified-Since
        assert hit({"If-None-Match": '"0-00000000"', "If-Modified-Since": lm})[0] == 200
        assert hit({"If-Modified-Since": lm})[0] == 304
        assert hit({"If-Modified-Since": h["date"]})[0] == 304
        earlier = ChangeClock.http_date(web.changed(node, v) - 1 / 86400)
        assert hit({"If-Modified-Since": earlier})[0] == 200
        later = ChangeClock.http_date(web.clock.day(time.time()) + 1)   # in the future: invalid
        assert hit({"If-Modified-Since": later})[0] == 200
        assert hit({"If-Modified-Since": "yesterday"})[0] == 200
        assert sw.fetch(u, method="HEAD", headers={"If-None-Match": h["etag"]})[0] == 304
        # a host whose Last-Modified is the time of the request: If-Modified-Since means nothing
        st, hn, _ = sw.fetch(roots["now"])
        assert hn["last-modified"] == hn["date"]
        assert sw.fetch(roots["now"], headers={"If-Modified-Since": hn["date"]})[0] == 200
        assert sw.fetch(roots["now"], headers={"If-None-Match": hn["etag"]})[0] == 304
        # a host without Last-Modified
        st, h0, _ = sw.fetch(roots["none"])
        assert "last-modified" not in h0 and "etag" in h0
        assert sw.fetch(roots["none"], headers={"If-Modified-Since": h0["date"]})[0] == 200
        # robots.txt and 404s have no validators and no version
        st, hr, _ = sw.fetch(f"http://{web.hosts[0]}/robots.txt")
        assert "etag" not in hr
        recs = sw.settle_log()
    pages = [r for r in recs if r["path"] == "/" and r["host"] == u[7:-1]]
    assert [r["status"] for r in pages].count(304) == 5
    assert all(r["v"] == v for r in pages)
    assert all(r["bytes"] == 0 for r in pages if r["status"] == 304)
    assert not any("v" in r for r in recs if r["path"] == "/robots.txt")


def test_refetch_gets_new_bytes_after_a_change_and_the_same_without():
    # 1 simulated day = 2 s, each page changes about 4 times a day
    spec = {"seed": 8, "hosts": 5, "pages": 40, "change_dist": "fixed:4", "day_seconds": 2.0,
            "page_bytes": 1000}
    with SimWebServer(spec) as sw:
        web = sw.web
        u = web.seeds(1)[0]
        node = web.node_of(u)
        t = time.time()
        v = web.version(node, t)
        end = web.clock.wall(web.changed(node, v + 1))
        if end - t < 0.3:  # too close to the next change: wait for it
            time.sleep(end - t + 0.01)
            v += 1
            end = web.clock.wall(web.changed(node, v + 1))
        a = sw.fetch(u)
        b = sw.fetch(u)
        time.sleep(max(0.0, end - time.time()) + 0.01)
        c = sw.fetch(u)
        d = sw.fetch(u, headers={"If-None-Match": a[1]["etag"]})
        recs = [r for r in sw.settle_log() if r["path"] == "/"]
    assert a[2] == b[2] and a[1]["etag"] == b[1]["etag"]
    assert c[2] != a[2] and c[1]["etag"] != a[1]["etag"]
    assert d[0] == 200 and d[2] == web.render(node, web.clock.wall(web.changed(node, recs[-1]["v"])) + 1e-6)
    assert [r["v"] for r in recs][:2] == [v, v] and recs[2]["v"] > v
    for r in recs:  # the version logged is the version at arrival
        assert r["v"] == web.version(node, r["t0"])


# ---------------------------------------------------------------------------
# Freshness
# ---------------------------------------------------------------------------
def test_tally_by_hand():
    # versions begin at days 1, 3 and 3.5; fetched at 0 (v0), 2 (v1), 4 (v3)
    changes = [1.0, 3.0, 3.5]
    fetches = [(0.0, 0), (2.0, 1), (4.0, 3)]
    # [0,1) fresh, [1,2) stale aged 0..1, [2,3) fresh, [3,4) stale aged 0..1, [4,5) fresh
    assert tally(fetches, changes, 0.0, 5.0) == (5.0, 3.0, 1.0)
    # a window that cuts intervals: [1.5,2) aged 0.5..1, [2,3) fresh, [3,4) aged 0..1, [4,4.5) fresh
    assert tally(fetches, changes, 1.5, 4.5) == (3.0, 1.5, 0.375 + 0.5)
    # order of the fetches does not matter; before the first fetch nothing is held
    assert tally(fetches[::-1], changes, 0.0, 5.0) == (5.0, 3.0, 1.0)
    assert tally([(2.0, 1)], changes, 0.0, 5.0) == (3.0, 1.0, 2.0)   # age 0..2 over [3,5)
    # the age counts from the first missed change, not the last
    assert tally([(0.0, 0)], changes, 0.0, 4.0) == (4.0, 1.0, 4.5)
    # a page that never changes is always fresh
    assert tally([(0.5, 0)], [], 0.0, 2.0) == (1.5, 1.5, 0.0)
    assert tally([], changes, 0.0, 5.0) == (0.0, 0.0, 0.0)


def test_bucket_of():
    assert [bucket_of(r) for r in (0.001, 0.00999, 0.01, 0.5, 1.0, 9.99, 10.0, 96.0)] == [
        -3, -3, -2, -1, 0, 0, 1, 1]
    assert bucket_of(0.0) is None
    assert bucket_of(10 ** 0.5, 2) == 1 and bucket_of(10 ** 0.5 * 0.999, 2) == 0


def test_measure_from_a_log_by_hand():
    web = SimWeb.generate(seed=3, hosts=4, pages=30, change_dist="loguniform:0.01:100",
                          day_seconds=10.0, change_epoch=5000.0)
    node = next(v for v in range(web.n_nodes) if web.is_html(v) and web.true_rate(v) > 0.2)
    host, path = web.host_path(node)
    T0, T1, T2 = (web.changed(node, k) for k in range(3))
    a, b, end = (T0 + T1) / 2, (T1 + T2) / 2, T2 + 0.25
    wall = web.clock.wall
    recs = [{"t0": wall(a), "t1": wall(a), "method": "GET", "host": host, "path": path, "status": 200, "v": 0},
            {"t0": wall(b), "t1": wall(b), "method": "GET", "host": host, "path": path, "status": 304, "v": 1},
            # neither a HEAD nor an aborted GET gives the crawler a copy
            {"t0": wall(b), "t1": wall(b), "method": "HEAD", "host": host, "path": path, "status": 200, "v": 1},
            {"t0": wall(a), "t1": wall(a), "method": "GET", "host": host, "path": path, "status": 200, "v": 0,
             "aborted": True}]
    rep = measure(recs, web, start=a, end=end, nodes=[node])
    held = end - a
    fresh = (T1 - a) + (T2 - b)
    age = (b - T1) ** 2 / 2 + 0.25 ** 2 / 2
    assert rep.total.fetches == 2 and rep.total.fetched == 1 and rep.total.pages == 1
    assert rep.total.freshness == pytest.approx(fresh / held, rel=1e-9)
    assert rep.total.age == pytest.approx(age / held, rel=1e-9)
    assert rep.total.coverage == pytest.approx(1.0)
    [bucket] = rep.buckets
    assert bucket.lo <= web.true_rate(node) < bucket.hi and bucket.lo in (0.1, 1.0, 10.0)


def test_measure_a_live_crawl_per_rate_bucket():
    # fetch every page of a web at a steady pace: fast-changing pages must
    # come out less fresh and older than slow ones
    spec = {"seed": 9, "hosts": 10, "pages": 120, "change_dist": "loguniform:0.05:50",
            "day_seconds": 0.5, "page_bytes": 500, "crawl_delay_fraction": 0.0}
    with SimWebServer(spec) as sw:
        web = sw.web
        pages = [web.url(v) for v in range(web.n_nodes) if web.is_html(v)
                 and not web.is_disallowed(web.url(v))]
        t_end = time.time() + 3.0
        etags: dict[str, str] = {}
        while time.time() < t_end:
            for u in pages:
                st, h, _ = sw.fetch(u, headers={"If-None-Match": etags[u]} if u in etags else {})
                etags[u] = h["etag"]
        recs = sw.settle_log()
    rep = measure(recs, web, per_decade=1)
    assert sum(b.pages for b in rep.buckets) == rep.total.pages == len(pages)
    slow, fast = rep.buckets[0], rep.buckets[-1]
    assert slow.hi <= 1 and fast.lo >= 10
    assert slow.freshness > fast.freshness and slow.age < fast.age
    assert 0 <= fast.freshness <= 1 and rep.total.coverage > 0.7
    assert any(r["status"] == 304 for r in recs) and any(r["status"] == 200 for r in recs)
    for r in recs:
        if "v" in r:
            assert r["v"] == web.version(web.node_of(f"http://{r['host']}{r['path']}"), r["t0"])


def test_scrapy_simweb_flags_set_the_change_options():
    import argparse

    from scrapy.settings import Settings

    from crawlproj.commands.simweb import Command

    cmd = Command()
    cmd.settings = Settings()
    parser = argparse.ArgumentParser()
    cmd.add_options(parser)
    opts = parser.parse_args(["--change-dist", "gamma:0.8:0.25", "--day-seconds", "5",
                              "--change-workweek", "0.7", "--change-links", "0.2", "--lm-untrusted", "0.1",
                              "--change-epoch", "1234"])
    spec = cmd._spec(opts)
    web = SimWeb.from_spec(spec)
    assert (web.clock.epoch, web.clock.day_seconds) == (1234.0, 5.0)
    assert web.spec["change_dist"] == "gamma:0.8:0.25" and web.spec["change_workweek"] == 0.7
    assert web.spec["change_links"] == 0.2 and web.spec["lm_untrusted"] == 0.1
