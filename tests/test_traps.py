"""The trap guard's rules, each alone: URL rules at admission, near-duplicate
pages per host (a real Redis server). The per-host budgets, counted in the
frontier's script, are test_sync_budgets.py's."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import redis
from scrapy import Request
from scrapy.settings import Settings

from crawlproj.addon import apply_table
from crawlproj.due.urlseen import URLSeen
from crawlproj.frontier.admission import Refused, Trap, admit
from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.prioritizers.basic import BreadthFirst
from crawlproj.redis.keyspace import Keyspace
from crawlproj.traps import TrapGuard
from crawlproj.traps.nearhost import SUSPECT, NearHosts, bit_counts, distance, simhash


def defaults() -> TrapGuard:
    s = Settings()
    apply_table(s)
    return TrapGuard.from_settings(s)


# -- URL rules ------------------------------------------------------------------------

@pytest.mark.parametrize("url, rule", [
    ("http://a.ex/a/a/a/", "segment_run"),
    ("http://a.ex/x/cal/cal/cal/p.html", "segment_run"),
    ("http://a.ex/a/x/a/y/a/z/a/", "segment_repeats"),
    ("http://a.ex/" + "/".join(f"d{i}" for i in range(21)), "path_segments"),
    ("http://a.ex/s?" + "&".join(f"f{i}=1" for i in range(13)), "query_params"),
    ("http://a.ex/s?a=1&a=1&a=1&a=1&a=1&a=1&a=1&a=1&a=1&a=1&a=1&a=1&a=1", "query_params"),
])
def test_each_url_rule_refuses_its_trap(url, rule):
    assert defaults().refusal(url)[0] == rule


@pytest.mark.parametrize("url", [
    "http://a.ex/", "http://a.ex/a/a/", "http://a.ex/2024/01/01/news.html",
    "http://a.ex/a/x/a/y/a/", "http://a.ex/" + "/".join(f"d{i}" for i in range(20)),
    "http://a.ex/s?" + "&".join(f"f{i}=1" for i in range(12)), "http://a.ex/p?&&&x=1",
    "http://a.ex//x//", "http://a.ex/%61/%61/a/",  # percent-encoded: other segments
])
def test_url_rules_pass_what_is_within_their_limits(url):
    assert defaults().refusal(url) is None


def test_a_limit_of_zero_switches_its_rule_off():
    guard = TrapGuard(max_run=0, max_repeats=0, max_segments=0, max_params=0)
    for url in ["http://a.ex/a/a/a/a/a/", "http://a.ex/" + "x/" * 50,
                "http://a.ex/?" + "&".join(f"q{i}" for i in range(50))]:
        assert guard.refusal(url) is None


def test_admission_refuses_traps_as_the_trap_guards(redis_url):
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "t", 1))
    with pytest.raises(Trap) as info:
        admit(f, BreadthFirst(), Request("http://a.ex/a/a/a/"), None, 2083, defaults())
    assert (info.value.stat, info.value.reason) == ("trapguard/refused", "segment_run")
    # the frontier's own refusals keep their stat
    with pytest.raises(Refused) as info:
        admit(f, BreadthFirst(), Request("ftp://a.ex/a/a/a/"), None, 2083, defaults())
    assert (info.value.stat, info.value.reason) == ("frontier/refused", "scheme")
    assert admit(f, BreadthFirst(), Request("http://a.ex/a/a/"), None, 2083, defaults())


# -- near-duplicate pages per host ---------------------------------------------------

WORDS = [f"w{i}x" for i in range(5000)]


def page(rng: random.Random, n: int = 400) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


SITE = ("Riverside city council home residents business visitors council and democracy "
        "news jobs contact us search the site " * 3)


def calendar(month: int) -> str:
    """A month of a site's events calendar: the site's template, a grid of days."""
    days = " ".join(f"{d} no events listed" for d in range(1, 29 + month % 3))
    return (f"{SITE} events calendar month {month} of year {2000 + month // 12} {days} "
            "previous month next month today subscribe to the calendar "
            f"{SITE} accessibility privacy cookies copyright riverside city council")


def test_simhash_separates_different_pages_and_joins_templated_ones():
    rng = random.Random(7)
    pages = [simhash(page(rng)) for _ in range(200)]
    closest = min(distance(a, b) for i, a in enumerate(pages) for b in pages[i + 1:])
    assert closest > 10
    months = [simhash(calendar(m)) for m in range(24)]
    # nearly every month is within 3 bits of one of the 16 before it (a
    # simhash of a short page is noisy: the rule counts a window, not one page)
    near = [min(distance(months[m], x) for x in months[max(0, m - 16):m]) <= 3
            for m in range(1, 24)]
    assert sum(near) >= 20
    assert simhash("") is None and simhash("...") is None


def test_simhash_features_are_the_regular_expressions_words():
    """simhash finds and hashes words in numpy: its features must be exactly
    the distinct `\\w+` of the lower-cased text, in any script (emoji and
    other characters beyond the BMP included)."""
    rng = random.Random(11)
    chars = "abc XYZ_9,.-\u00a0\u2014\u00e9\u4e2d\u0661\u00b2\U0001F600\U00020000\u200b\t'\u00df"
    for _ in range(3000):
        t = "".join(rng.choice(chars) for _ in range(rng.randrange(0, 25)))
        words = sorted(set(re.findall(r"\w+", t.lower())))
        # the same words in another order, joined by other non-word characters
        assert simhash(t) == simhash(" ; ".join(reversed(words)) or "."), t
        if words:  # one word more changes the features
            assert simhash(t) != simhash(t + " zzz9") or len(words) > 20


def test_bit_counts_are_the_columns_of_the_features_bits():
    """The simhash's votes: how many features have each bit set, counted in
    blocks of one-byte counters, must be the plain count at every size,
    where a counter would carry into the next (255 features with every bit
    set, 256, ...) included."""
    rng = np.random.default_rng(5)
    sizes = [0, 1, 2, 254, 255, 256, 509, 510, 511, 765, 1000, 3000]
    for n in sizes:
        for features in (rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False),
                         np.full(n, 2**64 - 1, dtype=np.uint64),
                         np.full(n, 0x8000000000000001, dtype=np.uint64)):
            plain = np.unpackbits(features.view(np.uint8)).reshape(-1, 64).sum(axis=0)
            assert bit_counts(features).tolist() == plain.tolist(), n


def crawl_keyspace(r, crawl_id: str) -> Keyspace:
    """A crawl's keyspace with its state set up (the DUE's records), as a worker finds it."""
    ks = Keyspace.open(r, crawl_id, 2)
    URLSeen(r, ks).set_up()
    return ks


def test_a_server_without_the_crawls_state_gets_no_window(redis_url):
    """A server that came back empty: the test is refused (CRAWLLOST) and no
    key is written into it."""
    r = redis.Redis.from_url(redis_url)
    with pytest.raises(redis.ResponseError, match="CRAWLLOST"):
        NearHosts(r, Keyspace.open(r, "gone", 2)).test("cal.ex", simhash(calendar(1)))
    assert r.keys("*") == [b"cp:{gone}:meta"]  # the keyspace's own record, nothing of the test


def test_a_batch_of_pages_goes_through_the_window_in_order(redis_url):
    r = redis.Redis.from_url(redis_url)
    ks = crawl_keyspace(r, "t")
    hashes = [simhash(calendar(m)) for m in range(12)]
    one_by_one = [NearHosts(r, crawl_keyspace(r, "t1")).test("cal.ex", h) for h in hashes]
    near = NearHosts(r, ks)
    batched = near.test_many([("cal.ex", h) for h in hashes[:6]] + [("news.ex", hashes[0])])
    batched += near.test_many([("cal.ex", h) for h in hashes[6:]])
    assert batched[6] == (False, 0)
    assert batched[:6] + batched[7:] == one_by_one
    assert near.test_many([]) == []


def test_a_host_is_flagged_by_its_recent_near_duplicates_across_workers(redis_url):
    r = redis.Redis.from_url(redis_url)
    ks = crawl_keyspace(r, "t")
    workers = [NearHosts(r, ks, window=16, bits=3, budget=5) for _ in range(2)]
    hashes = [simhash(calendar(m)) for m in range(12)]
    expected, flags = [], []
    for m, h in enumerate(hashes):  # what the window must say, computed here
        flags.append(any(distance(h, x) <= 3 for x in hashes[max(0, m - 16):m]))
        expected.append((flags[-1], sum(flags[-16:])))
    verdicts = [workers[m % 2].test("cal.ex", h) for m, h in enumerate(hashes)]
    assert [tuple(v) for v in verdicts] == expected
    assert verdicts[-1].count >= 8
    rng = random.Random(3)
    # distinct pages on another host: never near, and the calendar host's window is its own
    assert all(not workers[0].test("news.ex", simhash(page(rng))).near for _ in range(40))
    # the window forgets: 16 distinct pages later the calendar host's count is back to 0
    for _ in range(16):
        workers[1].test("cal.ex", simhash(page(rng)))
    assert workers[0].test("cal.ex", simhash(page(rng))) == (False, 0)
    assert len(r.get(ks.trap_hashes(ks.partition_of("cal.ex"), "cal.ex"))) == 16 * 9


def test_a_trapped_hosts_suspects_are_dropped_and_its_other_urls_kept(redis_url):
    r = redis.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "t", 2)
    f = Frontier(r, ks)
    p = ks.partition_of("cal.ex")
    suspects = [f"http://cal.ex/events/{m}/" for m in range(30)]
    batch = Batch(enqueue=[f.entry("cal.ex", u, SUSPECT + 1, u.encode()) for u in suspects]
                  + [f.entry("cal.ex", "http://cal.ex/about", 2, b"about"),
                     f.entry("other.ex", "http://other.ex/", 1, b"other")])
    f.sync({p: batch, ks.partition_of("other.ex"): Batch(
        enqueue=[f.entry("other.ex", "http://other.ex/", 1, b"other")])})
    # not trapped: suspects are leased, after the host's other URLs
    first = lease_all_payloads(f, limit=2)
    assert first[0] == b"about" and first[1].startswith(b"http://cal.ex/events/")
    assert len(first) == 2
    near = NearHosts(r, ks, window=16, bits=3, budget=5)
    verdicts = [near.test("cal.ex", simhash(calendar(0))) for _ in range(7)]
    assert [v.count for v in verdicts] == [0, 1, 2, 3, 4, 5, 6]
    assert r.hexists(ks.trapped(p), "cal.ex")
    res = f.sync({q: Batch(lease=100) for q in range(2)})
    assert [x.payload for q in res.values() for x in q.leased] == []
    assert sum(q.refused_suspects for q in res.values()) == 29
    assert not r.exists(ks.queue(p, "cal.ex")) and not r.exists(ks.payloads(p, "cal.ex"))
    # a host whose recent pages differ again is no longer trapped
    rng = random.Random(5)
    for _ in range(16):
        near.test("cal.ex", simhash(page(rng)))
    assert not r.hexists(ks.trapped(p), "cal.ex")


def lease_all_payloads(f: Frontier, limit: int) -> list[bytes]:
    """Lease and finish up to `limit` URLs of each host, one host URL at a time."""
    out = []
    for _ in range(limit):
        res = f.sync({p: Batch(lease=100) for p in range(f.partitions)})
        leased = [x for r in res.values() for x in r.leased]
        out += [x.payload for x in leased]
        batches: dict[int, Batch] = {}
        for x in leased:
            batches.setdefault(x.partition, Batch()).release.append(
                Release(x.host, x.token, Host.OK, URL.DONE, 0, -1))
        f.sync(batches)
    return [x for x in out if x != b"other"]


def test_the_near_duplicate_test_as_a_part_of_a_round_trip_agrees_with_its_own(redis_url):
    """queue()/answer() (the stores' shared pipeline) give the verdicts
    test_many() gives, send the script's text to a server that does not hold
    it and its digest afterwards, and leave a page with no words unasked."""
    r = redis.Redis.from_url(redis_url)
    ks = crawl_keyspace(r, "nearpart")
    text = " ".join(f"word{i}" for i in range(200))
    pages = [("a.ex", text), ("a.ex", text + " tail"), ("a.ex", ""), ("b.ex", text)]
    r.script_flush()
    part = NearHosts(r, ks, window=8, bits=3, budget=1)
    pipe = r.pipeline(transaction=False)
    asked = part.queue(pipe, pages)
    assert asked == [True, True, False, True]
    assert [c[0][0] for c in pipe.command_stack] == ["EVAL"] * 3
    got = part.answer(asked, pipe.execute(raise_on_error=False))
    assert got[2] is None
    assert [(v.near, v.count) for v in got if v is not None] == [(False, 0), (True, 1), (False, 0)]
    pipe = r.pipeline(transaction=False)
    part.queue(pipe, pages[:1])
    assert pipe.command_stack[0][0][0] == "EVALSHA"
    again = part.answer([True], pipe.execute(raise_on_error=False))
    own = NearHosts(r, ks, window=8, bits=3, budget=1).test_many([("a.ex", simhash(text))])
    assert again[0].near and own[0].near and again[0].count + 1 == own[0].count
