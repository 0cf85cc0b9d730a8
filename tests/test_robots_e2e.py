"""robots.txt as a crawl-wide resource, end to end (Mercator §3.3; RFC 9309).

Real workers, a real Redis-protocol server, real HTTP; what was requested,
how often and when is read from the web's own request log.
"""

from __future__ import annotations

from collections import Counter

import pytest

from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers, stat
from tests.robotsweb import Host, RobotsWeb

pytestmark = pytest.mark.e2e

# Crawl-delay hosts (0.5 s, far above the 2 x download time wait) and
# robots.txt exclusions on a few hundred pages.
WEB = {"seed": 3, "hosts": 60, "pages": 600, "page_bytes": 2000, "latency_ms": [5, 20],
       "crawl_delay_fraction": 0.15, "crawl_delay": 0.5, "robots_fraction": 0.3}
FACTOR = 2.0
ROBOTS = "/robots.txt"


def robots_requests(records) -> Counter:
    return Counter(r["host"] for r in records if r["path"] == ROBOTS)


@pytest.mark.parametrize("n_workers", [1, 2])
def test_one_robots_txt_per_host_and_its_crawl_delay_holds_from_it(redis_url, tmp_path, n_workers):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(3)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, f"robots{n_workers}",
                          {"FRONTIER_DELAY_FACTOR": FACTOR})
        workers.start(n_workers)
        assert workers.wait() == [0] * n_workers
        records = sw.settle_log()
    # every page the rules allow, none they forbid
    fetched = set(checks.fetch_counts(records))
    assert fetched == reachable
    assert not [u for u in fetched if sw.web.is_disallowed(u)]
    # one robots.txt request per host for the whole crawl, whatever the workers
    per_host = robots_requests(records)
    assert set(per_host) == {r["host"] for r in records}
    assert set(per_host.values()) == {1}, per_host.most_common(3)
    # robots.txt is the host's request like any other: the politeness wait and
    # the Crawl-delay it gives hold between it and the host's next request
    delayed = [h for h in per_host if sw.web.crawl_delay(h)]
    assert delayed
    bad = checks.politeness_violations(records, factor=0.0, crawl_delay_of=sw.web.crawl_delay,
                                       ignore_paths=(), tolerance=0.005)
    assert bad == [], bad[:3]  # Crawl-delay, robots.txt included
    after_robots = [v for v in checks.politeness_violations(
        records, factor=FACTOR, crawl_delay_of=sw.web.crawl_delay, ignore_paths=(),
        tolerance=0.005) if v.prev["path"] == ROBOTS]
    assert after_robots == [], after_robots[:3]
    assert checks.overlaps(records) == []
    logs = [workers.log(i) for i in range(n_workers)]
    assert sum(stat(log, "robotstxt/request_count") for log in logs) == len(per_host)
    if n_workers > 1:  # a worker used the rules another fetched
        assert sum(stat(log, "robotstxt/cache/redis") for log in logs) > 0


TEN_MB = 10 * 1024 * 1024


def big_robots() -> bytes:
    """A 10 MB robots.txt whose rule past the first 500 KiB is never read."""
    head = b"User-agent: *\nDisallow: /private/\n"
    filler = b"# " + b"x" * 60 + b"\n"
    mid = head + filler * (600 * 1024 // len(filler)) + b"Disallow: /late/\n"
    return mid + filler * ((TEN_MB - len(mid)) // len(filler))


def test_robots_5xx_waits_huge_is_cut_redirects_followed(redis_url, tmp_path):
    site = {"/": ["/a.html", "/b.html", "/private/x.html", "/late/y.html"],
            "/a.html": ["/"], "/b.html": ["/"], "/late/y.html": ["/"]}
    rules = b"User-agent: *\nDisallow: /private/\nDisallow: /late/\n"
    web = RobotsWeb({
        # 503, 500, then rules: the host's pages wait and come after them
        "flaky.test": Host([(503, b"busy", {}), (500, b"oops", {}), (200, rules, {})], site),
        # 10 MB: only the first 500 KiB are read (/late/ comes after)
        "big.test": Host([(200, big_robots(), {})], site),
        # three redirects, then the rules
        "hop.test": Host([(301, b"", {"Location": "/hop2"})], site),
        # 404: everything allowed
        "none.test": Host([(404, b"no", {})], site),
    })
    with web:
        seeds = [f"http://{h}/" for h in web.hosts]
        workers = Workers(web, redis_url, tmp_path, seeds, "robots-faults", {
            "FRONTIER_DELAY_FACTOR": FACTOR, "ROBOTS_RETRY_WAIT": 1.0,
            "MEMUSAGE_CHECK_INTERVAL_SECONDS": 0.5})
        workers.start(1)
        assert workers.wait() == [0]
        records = web.settle_log()
    log = workers.log(0)
    by_host = checks.by_host(records)
    paths = {h: {r["path"] for r in recs} for h, recs in by_host.items()}
    # disallowed paths are never requested
    assert "/private/x.html" not in paths["flaky.test"] | paths["big.test"] | paths["hop.test"]
    assert "/late/y.html" not in paths["flaky.test"]
    # 5xx: robots.txt again after the retry wait, every page only after the rules came
    flaky = by_host["flaky.test"]
    tries = [r for r in flaky if r["path"] == ROBOTS]
    assert [r["status"] for r in tries] == [503, 500, 200]
    assert all(b["t0"] - a["t1"] >= 1.0 - 0.005 for a, b in zip(tries, tries[1:]))
    pages = [r for r in flaky if r["path"] != ROBOTS]
    assert {r["path"] for r in pages} == {"/", "/a.html", "/b.html"}
    assert min(r["t0"] for r in pages) >= tries[-1]["t1"]
    # 10 MB: one request, cut at 500 KiB; the rule before the cut holds, the one after is unread
    assert [r["path"] for r in by_host["big.test"]].count(ROBOTS) == 1
    assert "/late/y.html" in paths["big.test"]
    assert stat(log, "robotstxt/truncated") == 1
    assert stat(log, "memusage/max") - stat(log, "memusage/startup") < 64 * 1024 * 1024
    # redirects: followed, and the rules at the end obeyed
    assert [r["path"] for r in by_host["hop.test"] if r["path"] in (ROBOTS, "/hop2", "/hop1",
                                                                     "/hop0")] == \
        [ROBOTS, "/hop2", "/hop1", "/hop0"]
    # 404: all allowed
    assert paths["none.test"] >= {"/", "/a.html", "/b.html", "/private/x.html", "/late/y.html"}
    assert checks.overlaps(records) == []
    # a redirected robots.txt is one fetch: the host waits from its last hop
    assert checks.politeness_violations(records, factor=FACTOR, tolerance=0.005,
                                        ignore_paths=(ROBOTS, "/hop2", "/hop1")) == []


def test_one_server_under_three_spellings_is_one_politeness_key(redis_url, tmp_path):
    """host, HOST. and host:80 are one server: one back queue, one lease, one
    robots.txt, so its requests never overlap; and one URL to the DUE, so each
    page is fetched once whatever the spellings it is seeded under."""
    spec = {"seed": 5, "hosts": 3, "pages": 240, "host_zipf": 0.0, "page_bytes": 2000,
            "latency_ms": 20, "crawl_delay_fraction": 0.0, "robots_fraction": 0.0}
    with SimWebServer(spec, log_path=str(tmp_path / "web.jsonl")) as sw:
        host = sw.web.hosts[0]
        pages = sorted(u for u in sw.web.reachable([f"http://{host}/"])
                       if u.startswith(f"http://{host}/"))
        paths = [u[len(f"http://{host}"):] for u in pages]
        # every page of the server under its three spellings, each spelling
        # first for a third of the pages (the first seen is the one fetched)
        spellings = (host, host.upper() + ".", host + ":80")
        seeds = [f"http://{spellings[(i + k) % 3]}{path}" for i, path in enumerate(paths)
                 for k in range(3)]
        workers = Workers(sw, redis_url, tmp_path, seeds, "spellings",
                          {"FRONTIER_DELAY_FACTOR": 0.5, "CRAWL_SCOPE": "host"})
        workers.start(1)
        assert workers.wait() == [0]
        records = sw.settle_log()
    spelt = Counter(r["host"] for r in records if r["path"] != ROBOTS)
    # both names were used (a link found on a page may name a path before its seed does)
    assert spelt[host] > 0 and spelt[host + "."] > 0, spelt
    server = [dict(r, host=r["host"].rstrip(".")) for r in records]
    assert Counter(r["path"] for r in server if r["path"] != ROBOTS) == Counter(paths)
    assert checks.overlaps(server) == []
    assert checks.politeness_violations(server, factor=0.5, ignore_paths=(), tolerance=0.005) == []
    assert robots_requests(server) == {host: 1}
