"""The crawl's robots cache (crawlproj/robots/cache.py): what it stores answers as
the whole robots.txt does, it is small, it expires within 24 hours, and each
worker's LRU is bounded. Real Redis, real robots.txt files."""

from __future__ import annotations

import json
import re
import statistics
import tarfile

import pytest
import redis
from protego import Protego

from crawlproj.redis.keyspace import Keyspace
from crawlproj.robots import (
    ALLOW_ALL,
    DISALLOW_ALL,
    MAX_EXPIRY,
    RobotsCache,
    Rules,
    failed,
    origin_of,
    verdict,
)
from tests.data import SHARED_DATA, require

DATA = SHARED_DATA / "robots"
UA = "crawlproj/0.1.0 (+https://crawl.example/about)"
RULE_PATH = re.compile(r"^\s*(?:dis)?allow\s*:\s*(\S+)", re.I | re.M)


def real_world():
    with tarfile.open(require(DATA / "real_world" / "protego_robots_txt_4231_hosts.tar.gz")) as tar:
        for member in tar:
            if member.isfile():
                yield member.name, tar.extractfile(member).read()


def probes(text: str) -> list[str]:
    """Paths that exercise a file's rules: each rule's path, one below it, and a few others."""
    paths = ["/", "/index.html", "/search?q=x", "/private/", "/a/b/c.html"]
    for p in RULE_PATH.findall(text)[:40]:
        p = p.replace("*", "x").rstrip("$") or "/"
        paths += [p if p.startswith("/") else "/" + p, (p if p.startswith("/") else "/" + p) + "z"]
    return paths


@pytest.mark.slow
def test_stored_rules_answer_as_the_whole_file_on_real_robots_txt():
    """4,231 real files: every probed path, for this crawler and for one they
    name, and the Crawl-delay, are the same from the stored form; the stored
    form is measured (docs/frontier.md)."""
    sizes, full_sizes, checked = [], [], 0
    for _name, body in real_world():
        text = body.decode("utf-8", errors="ignore").lstrip("\ufeff")
        full = Protego.parse(text)
        rules, stored = Rules.parsed(body, UA)
        agents = [UA, "Googlebot/2.1", "Mozilla/5.0 (compatible; bingbot/2.0)"]
        for path in probes(text):
            url = "http://host.example" + path
            for ua in agents:
                assert rules.allowed(url, ua) == full.can_fetch(url, ua), (_name, path, ua)
                checked += 1
        delay = full.crawl_delay(UA)
        assert rules.crawl_delay == (float(delay) if delay else None), _name
        sizes.append(len(stored))
        full_sizes.append(len(body))
    assert len(sizes) > 4000 and checked > 100_000
    # small: a median file keeps under a third of its bytes, none more than it had
    assert statistics.median(sizes) < statistics.median(full_sizes) / 3
    assert max(s - f for s, f in zip(sizes, full_sizes)) <= 12  # zlib's header on a tiny file


def test_stored_rules_answer_as_the_whole_file_on_googles_vectors():
    cases = json.loads(require(DATA / "robots_test_vectors.json").read_text())["cases"]
    for c in cases:
        rules, _ = Rules.parsed(c["robotstxt"].encode(), c["user_agent"])
        full = Protego.parse(c["robotstxt"])
        assert rules.allowed(c["url"], c["user_agent"]) == full.can_fetch(c["url"], c["user_agent"]), \
            c["line"]


def test_what_a_fetch_means_follows_rfc_9309():
    assert [verdict(s) for s in (200, 204, 299)] == ["parse"] * 3
    assert [verdict(s) for s in (400, 401, 403, 404, 410, 451)] == ["allow"] * 6
    assert [verdict(s) for s in (429, 500, 502, 503, 504, None)] == ["retry"] * 6
    assert Rules.load(ALLOW_ALL, UA)[0].allowed("http://h/x", UA)
    assert not Rules.load(DISALLOW_ALL, UA)[0].allowed("http://h/", UA)
    assert Rules.load(failed(2), UA)[0].failures == 2


def test_origins_name_one_server_per_scheme_host_and_port():
    assert origin_of("http://H.example.:80/a?b") == origin_of("http://h.example/c") == \
        "http://h.example"
    assert origin_of("https://h.example:443/") == "https://h.example"
    assert origin_of("http://h.example:8080/") == "http://h.example:8080"
    assert origin_of("http://bücher.de/") == "http://xn--bcher-kva.de"


def cache(r, size=10, expiry=MAX_EXPIRY, clock=None):
    ks = Keyspace.open(r, "robots-cache", 4)
    kw = {"clock": clock} if clock else {}
    return RobotsCache(r, ks, UA, size=size, expiry=expiry, **kw)


def test_rules_one_worker_stores_another_reads_and_they_expire_within_a_day(redis_url):
    r = redis.Redis.from_url(redis_url)
    one, two = cache(r, expiry=7 * 24 * 3600), cache(r)
    rules, stored = Rules.parsed(b"User-agent: *\nDisallow: /p/\nCrawl-delay: 2\n", UA)
    one.put("http://a.example", stored, rules)
    assert two.get_local("http://a.example") is None
    got = two.get_shared("http://a.example")
    assert got.crawl_delay == 2.0 and not got.allowed("http://a.example/p/x", UA)
    assert two.get_local("http://a.example") is got  # kept in the worker's LRU
    key = one.key("http://a.example")
    assert key.startswith(one.keyspace.prefix(one.keyspace.partition_of("a.example")))
    assert 0 < r.pttl(key) <= MAX_EXPIRY * 1000  # RFC 9309 §2.4, though 7 days were asked
    assert two.get_shared("http://b.example") is None


def test_failures_are_shared_but_never_kept_in_a_worker(redis_url):
    r = redis.Redis.from_url(redis_url)
    one, two = cache(r), cache(r)
    one.put("http://f.example", failed(1))
    assert one.get_local("http://f.example") is None
    assert two.get_shared("http://f.example").failures == 1
    assert two.get_local("http://f.example") is None


def test_the_workers_lru_is_bounded_and_its_entries_expire(redis_url):
    r = redis.Redis.from_url(redis_url)
    now = [0.0]
    c = cache(r, size=3, expiry=100, clock=lambda: now[0])
    for i in range(5):
        c.put(f"http://h{i}.example", ALLOW_ALL)
    assert len(c) == 3
    assert c.get_local("http://h0.example") is None and c.get_local("http://h4.example")
    c.get_local("http://h2.example")  # used: stays
    c.put("http://h5.example", ALLOW_ALL)
    assert c.get_local("http://h2.example") and c.get_local("http://h3.example") is None
    now[0] = 101.0
    assert c.get_local("http://h2.example") is None
