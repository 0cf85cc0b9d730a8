"""The DUE's URL-seen test (crawlproj.due) on a real Redis-protocol server.

Exact mode (linear hash table of intsets), 128-bit fingerprints, bloom mode,
the crawl-wide agreement of the configuration, the frontier's atomic
"unseen? then enqueue", two worker processes racing on the same links, the
dupefilter interface, and a server killed and restarted.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import time

import pytest
import redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawlproj.due import bloom
from crawlproj.due.canonical import InvalidURL
from crawlproj.due.dupefilter import RedisDupeFilter
from crawlproj.due.fingerprint import fingerprint, url_fingerprint
from crawlproj.due.urlseen import CALL_SIZE, DueConfig, DueConfigError, URLSeen
from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.redis.keyspace import Keyspace
from crawlproj.spiders.web import WebSpider
from crawlproj.urls import host_of


def seen_of(r, partitions=2, crawl="t", **config) -> URLSeen:
    return URLSeen(r, Keyspace.open(r, crawl, partitions), DueConfig(**config))


def seen_keys(due: URLSeen) -> list[bytes]:
    """The exact mode's buckets, over all partitions."""
    ks = due.keyspace
    return [k for p in range(ks.partitions) for k in due.redis.scan_iter(ks.seen_pattern(p))]


def frontier_of(r, crawl="t", partitions=1, **kw) -> Frontier:
    return Frontier(r, Keyspace.open(r, crawl, partitions), **kw)


def random_fps(n, bits=64, seed=1, extremes=True):
    rng = random.Random(seed)
    fps = [rng.getrandbits(bits) - (1 << (bits - 1)) for _ in range(n)]
    if extremes:  # the ends of the signed range and the values around zero
        fps[:4] = [-(1 << (bits - 1)), (1 << (bits - 1)) - 1, 0, -1]
    return fps


def split_in_two(fps):
    """Two partitions, each fingerprint always in the same one (as hosts are)."""
    return {0: [fp for fp in fps if fp % 2 == 0], 1: [fp for fp in fps if fp % 2]}


def flat(result):
    return [x for p in sorted(result) for x in result[p]]


# -- fingerprints ----------------------------------------------------------------

def test_fingerprints():
    fp = fingerprint("http://a.ex/")
    assert -(1 << 63) <= fp < (1 << 63)
    assert fingerprint("http://a.ex/", 128) != fp
    assert -(1 << 127) <= fingerprint("http://a.ex/", 128) < (1 << 127)
    assert url_fingerprint("HTTP://A.EX:80/#x") == fp
    with pytest.raises(ValueError, match="64 or 128"):
        fingerprint("http://a.ex/", 32)
    with pytest.raises(InvalidURL):
        url_fingerprint("http://a b/")


# -- exact mode --------------------------------------------------------------------

def test_exact_mode_marks_each_fingerprint_once_and_grows_its_buckets(redis_url):
    r = redis.Redis.from_url(redis_url)
    due = seen_of(r, load=16)
    fps = random_fps(6000)
    old, fresh = fps[:4000], fps[4000:]
    assert all(flat(due.check(split_in_two(old))))           # all new
    assert not any(flat(due.check(split_in_two(old))))       # all seen now
    assert all(flat(due.check(split_in_two(fresh), mark=False)))  # a test marks nothing
    assert all(flat(due.check(split_in_two(fresh))))
    # a fingerprint twice in one batch is new the first time only
    dup = random_fps(10, seed=9, extremes=False)
    assert due.check({0: dup + dup})[0] == [True] * 10 + [False] * 10

    # the linear hash table has split: about load fingerprints per bucket, each
    # an intset of 8-byte integers, none past 2 x load by much
    stats = due.stats()
    assert 5000 < stats["urls"] < 7000  # counted by sampling
    sizes, encodings = [], set()
    for key in seen_keys(due):
        sizes.append(r.scard(key))
        encodings.add(r.object("encoding", key))
    assert sum(sizes) == 6010
    assert encodings == {b"intset"}
    assert 6010 / 16 / 2 < len(sizes) < 6010 / 16 * 2
    assert max(sizes) <= 3 * 16


def test_exact_mode_with_128_bit_fingerprints(redis_url, caplog):
    r = redis.Redis.from_url(redis_url)
    with caplog.at_level(logging.WARNING):
        due = seen_of(r, bits=128)
    assert due.config.load == 48
    fps = random_fps(3000, bits=128)
    assert all(flat(due.check(split_in_two(fps))))
    assert not any(flat(due.check(split_in_two(fps))))
    # two fingerprints equal in their top 64 bits are still two URLs
    a = 5 << 64
    assert due.check({0: [a, a + 1, a]})[0] == [True, True, False]
    # sets of strings are listpacks from Redis 7.2 (and in Valkey); an older
    # server keeps hash tables, and the DUE says so when it sets up
    encodings = {r.object("encoding", k) for k in seen_keys(due)}
    if r.config_get("set-max-listpack-entries"):
        assert encodings == {b"listpack"}
        assert "hash-table encoding" not in caplog.text
    else:
        assert encodings == {b"hashtable"}
        assert "has no set-max-listpack-entries (Redis before 7.2)" in caplog.text


# -- exact mode on a server whose sets are not tuned ----------------------------------
#
# Redis 7.0/7.2/8, Valkey 8+ and managed servers keep set-max-intset-entries at
# its default, 512; a managed server often refuses CONFIG GET. A bucket past
# the limit takes the hash-table encoding: about 74 bytes per URL instead of 8.

def default_limit_server(factory, aof=False):
    return factory(appendonly=aof, extra={"set-max-intset-entries": "512"})


def without_config(server) -> redis.Redis:
    """A client whose user may not run CONFIG, as on a managed Redis."""
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*",
                              "+@all", "-config")
    return server.client(username="noconfig", password="pw")


def seen_bytes_per_fp(due: URLSeen, n: int) -> tuple[float, set]:
    """MEMORY USAGE (exact, SAMPLES 0) of every bucket, per fingerprint, and
    the buckets' encodings."""
    r, total, encodings = due.redis, 0, set()
    for key in seen_keys(due):
        total += r.memory_usage(key, samples=0)
        encodings.add(r.object("encoding", key))
    return total / n, encodings


@pytest.mark.parametrize("config_get", ["allowed", "refused"])
def test_exact_mode_stays_compact_on_a_server_with_the_default_limit(
        redis_server_factory, config_get):
    server = default_limit_server(redis_server_factory)
    r = server.client() if config_get == "allowed" else without_config(server)
    if config_get == "refused":
        with pytest.raises(redis.ResponseError, match="NOPERM|permission"):
            r.config_get("set-max-intset-entries")
    due = seen_of(r, partitions=1)
    n = 200_000
    fps = random_fps(n, seed=11)
    for i in range(0, n, 10_000):
        assert all(due.check({0: fps[i:i + 10_000]})[0])
    per_fp, encodings = seen_bytes_per_fp(due, n)
    assert per_fp <= 10, per_fp  # 8 bytes a fingerprint, plus the buckets' keys
    assert encodings == {b"intset"}
    assert due.config.load == 1024  # the crawl's setting, an upper bound
    assert int(r.hget(due.keyspace.due(0), "load")) == 204  # 512 / 2.5, read or assumed


def test_exact_mode_is_exact_through_the_dupefilter_on_a_default_server(
        redis_server_factory):
    """Every URL marked is seen; URLs never marked are new (a 64-bit collision
    among these URLs has odds of about 1 in 10^9)."""
    server = default_limit_server(redis_server_factory)
    crawler = get_crawler(WebSpider, {"REDIS_URL": server.url, "CRAWL_ID": "x",
                                      "FRONTIER_PARTITIONS": 2})
    df = RedisDupeFilter.from_crawler(crawler)
    inserted = [f"http://h{i % 997}.ex/p/{i}?q={i % 7}" for i in range(100_000)]
    others = [f"http://h{i % 997}.ex/p/{i}?q={i % 7}" for i in range(100_000, 200_000)]
    for i in range(0, len(inserted), 10_000):
        assert not any(df.urls_seen(inserted[i:i + 10_000]))
    assert all(df.urls_seen(inserted, mark=False))
    assert not any(df.urls_seen(others, mark=False))
    # other spellings of the same URLs are the same URLs
    assert all(df.urls_seen([u.replace("http://", "HTTP://") + "#f" for u in inserted[:1000]],
                            mark=False))
    assert seen_bytes_per_fp(df.due, len(inserted))[1] == {b"intset"}


def test_a_crawl_begun_with_larger_buckets_keeps_its_urls_and_is_split_down(
        redis_server_factory, caplog):
    """A crawl whose buckets were sized for a server that kept larger sets
    compact (load 1024 under set-max-intset-entries 4096) moved to a server with
    the default limit: its buckets are hash tables there. The next worker
    lowers the load; no URL is forgotten while the buckets split down."""
    server = default_limit_server(redis_server_factory)
    r = server.client()
    old = seen_of(r, partitions=1)
    r.hset(old.keyspace.due(0), "load", 1024)  # as set up on the tuned server
    fps = random_fps(200_000, seed=12)
    first, later = fps[:100_000], fps[100_000:]
    assert all(old.check({0: first})[0])
    assert seen_bytes_per_fp(old, len(first))[1] == {b"hashtable"}
    with caplog.at_level(logging.WARNING):
        due = seen_of(r, partitions=1)
    assert "split down to 204 per bucket" in caplog.text
    assert int(r.hget(due.keyspace.due(0), "load")) == 204
    assert not any(due.check({0: first}, mark=False)[0])
    # batches as the frontier's syncs send them: each call splits a bounded
    # number of buckets beyond its own growth (64: seen.lua's SPLIT_SLACK)
    buckets = due.stats()["buckets"]
    assert all(due.check({0: later[:1000]})[0])
    assert buckets < due.stats()["buckets"] <= buckets + 64 + 1000 / 204 + 1
    for i in range(1000, len(later), 1000):
        assert all(due.check({0: later[i:i + 1000]})[0])
        assert not any(due.check({0: first[i:i + 1000]})[0])
    assert not any(due.check({0: fps}, mark=False)[0])
    per_fp, encodings = seen_bytes_per_fp(due, len(fps))
    assert encodings == {b"intset"} and per_fp <= 10, (per_fp, encodings)


@pytest.mark.faults
def test_a_fitted_table_survives_a_killed_server(redis_server_factory):
    server = default_limit_server(redis_server_factory, aof=True)
    due = seen_of(server.client(), partitions=1)
    fps = random_fps(60_000, seed=13)
    assert all(due.check({0: fps[:40_000]})[0])
    before = due.stats()
    time.sleep(1.5)  # appendfsync everysec
    server.kill()
    server.restart()
    due = seen_of(server.client(), partitions=1)
    assert due.stats() == before
    assert int(due.redis.hget(due.keyspace.due(0), "load")) == 204
    assert not any(due.check({0: fps[:40_000]})[0])
    assert all(due.check({0: fps[40_000:]})[0])
    assert seen_bytes_per_fp(due, len(fps))[1] == {b"intset"}


def lua_heap(r) -> int:
    """The scripts' Lua heap in bytes, as INFO reports it (Redis 7.4+ also
    counts it in used_memory)."""
    return int(r.info("memory")["used_memory_lua"])


def test_a_batch_check_leaves_no_garbage_in_the_scripts_heap(redis_url):
    """What a check's calls allocate is freed by the calls themselves; only the
    last call's ARGV, which Redis holds until the next script runs, is left
    beside what the scripts keep."""
    r = redis.Redis.from_url(redis_url)
    due = seen_of(r, partitions=1)
    fps = random_fps(200_000, seed=14)
    assert all(due.check({0: fps})[0])  # 100 calls, one round trip
    at_rest = lua_heap(r)
    r.eval("collectgarbage('collect')", 0)  # a new ARGV: the last one is garbage too
    kept = lua_heap(r)
    # one call's ARGV: 2,000 strings of 20 digits, about 80 bytes each with
    # their slots (calls of 10,000, or without the collection, leave 390 KB
    # to 1.8 MB here)
    assert at_rest - kept <= CALL_SIZE * 100, (at_rest, kept)


# -- bloom mode --------------------------------------------------------------------

def test_bloom_mode_has_no_false_negatives_and_its_configured_rate(redis_url):
    r = redis.Redis.from_url(redis_url)
    due = seen_of(r, partitions=1, mode="bloom", capacity=20_000, error_rate=1e-2)
    fps = random_fps(40_000, seed=3)
    inserted, probes = fps[:20_000], fps[20_000:]
    new = due.check({0: inserted})[0]
    assert sum(new) > 19_900  # only false positives are "seen" on the way in
    assert not any(due.check({0: inserted})[0])
    rate = sum(not x for x in due.check({0: probes}, mark=False)[0]) / len(probes)
    assert 0.004 < rate < 0.02, rate  # configured 0.01 (expected ~0.01, +-0.0007)
    x = bloom.layer(20_000, 1e-2)
    # the whole first layer, allocated at once: capacity x bits per URL
    (bitmap,) = r.scan_iter(due.keyspace.bloom_pattern(0, 0))
    assert r.strlen(bitmap) == x.bytes < 20_000 * 10 / 8 * 1.01


def test_bloom_mode_adds_layers_past_its_capacity(redis_url):
    r = redis.Redis.from_url(redis_url)
    due = seen_of(r, partitions=1, mode="bloom", capacity=2_000, error_rate=1e-3)
    fps = random_fps(20_000, seed=4)
    due.check({0: fps[:10_000]})
    assert due.stats()["layers"] >= 3  # 2k + 4k + 8k
    assert not any(due.check({0: fps[:10_000]})[0])
    rate = sum(not x for x in due.check({0: fps[10_000:]}, mark=False)[0]) / 10_000
    assert rate < 2e-3 * 1.5, rate  # below twice the configured rate


def test_a_growing_bloom_filter_keeps_its_configured_rate_across_layers(redis_url):
    """DUE_BLOOM_CAPACITY unset: layers twice as large as the last, whose rates
    add up to less than the configured one, however many are started. The
    layer table is the growing filter's own, from a first layer of 16,384 URLs
    instead of 2^19, so that a test fills three layers."""
    r = redis.Redis.from_url(redis_url)
    rate = 1e-2
    table = [bloom.growing_layer(16_384, rate, j) for j in range(bloom.MAX_LAYERS)]
    ks = Keyspace.open(r, "t", 1)
    r.hset(ks.due(0), mapping={"mode": "bloom", "bits": 64, "spec": bloom.spec_of(table)})
    due = URLSeen(r, ks, DueConfig(mode="bloom", error_rate=rate))
    assert due.config.capacity is None
    n = 16_384 * 7  # three layers full
    fps = random_fps(n + 100_000, seed=5)
    inserted, probes = fps[:n], fps[n:]
    assert sum(due.check({0: inserted})[0]) > n * 0.98  # (false positives on the way in)
    assert due.stats()["layers"] == 3
    assert not any(due.check({0: inserted})[0])
    fp_rate = sum(not x for x in due.check({0: probes}, mark=False)[0]) / len(probes)
    # expected 0.2 + 0.16 + 0.128 of 1e-2 = 0.0049 (+-0.0002); a table whose
    # first layer had the whole rate (the sized filter's: 1 + 1/2 + 1/4 of it)
    # gives 0.0175
    assert fp_rate < rate * 0.6, fp_rate
    assert sum(x.rate for x in table) < rate


def test_the_growing_bloom_filter_is_the_default_and_its_memory_per_url():
    assert DueConfig(mode="bloom").capacity is None
    grow, sized = bloom.layers(None, 1e-7), bloom.layers(10_000_000, 1e-7)
    assert grow[0].cap == bloom.FIRST_LAYER and sized[0].cap == 10_000_000
    assert bloom.layers(None, 1e-7, partitions=4)[0].cap == bloom.FIRST_LAYER // 4
    # from 1M to 2 billion URLs, just before and just after each layer starts
    held, sizes = 0, []
    for x in grow:
        if held >= 1_000_000 and held < 2e9:
            sizes += [held, held + 1]
        held += x.cap
    per_url = [bloom.bytes_per_url(grow, n) for n in sizes]
    assert 4.5 < min(per_url) and max(per_url) < 11.5, (min(per_url), max(per_url))
    assert bloom.bytes_per_url(sized, 10_000_000) < 4.5 < 40 < bloom.bytes_per_url(sized, 10**6)


def test_bloom_sizing():
    c, k = bloom.sizing(1e-7)
    assert c / 8 <= 4.5 and 20 <= k <= 25
    assert bloom.blocked_rate(c, k) <= 1e-7 < bloom.blocked_rate(c - 0.125, k)
    layers = bloom.layers(10_000_000, 1e-7)
    assert layers[1].cap == 2 * layers[0].cap and layers[1].k >= layers[0].k
    with pytest.raises(ValueError, match="DUE_BLOOM_ERROR_RATE"):
        bloom.layers(10, 1.5)
    with pytest.raises(ValueError, match="DUE_BLOOM_CAPACITY"):
        bloom.layers(0, 0.01)
    with pytest.raises(ValueError, match="DUE_BLOOM_CAPACITY"):
        bloom.layers(True, 0.01)


# -- configuration -----------------------------------------------------------------

def test_bad_configuration_is_refused_clearly():
    for kwargs, words in [({"mode": "fast"}, "DUE_MODE"), ({"bits": 32}, "64 or 128"),
                          ({"load": 0}, "DUE_BUCKET_LOAD"),
                          ({"error_rate": 0.0}, "DUE_BLOOM_ERROR_RATE")]:
        with pytest.raises(ValueError, match=words):
            DueConfig(**kwargs)


def test_the_first_worker_fixes_the_crawls_configuration(redis_url, caplog):
    r = redis.Redis.from_url(redis_url)
    first = seen_of(r, mode="bloom", strip_params=["ref"])
    with caplog.at_level(logging.WARNING):
        second = seen_of(r, mode="exact")
    assert second.config == first.config and second.config.mode == "bloom"
    assert "other DUE settings" in caplog.text
    # both canonicalise alike: the crawl's parameter list, not the second's own
    assert second.fingerprint("http://a.ex/?ref=1") == first.fingerprint("http://a.ex/")
    # another crawl on the same server has its own
    assert seen_of(r, crawl="other").config.mode == "exact"


def test_settings_reach_the_frontier(redis_url):
    crawler = get_crawler(WebSpider, {
        "REDIS_URL": redis_url, "CRAWL_ID": "s", "DUE_MODE": "bloom",
        "DUE_BLOOM_CAPACITY": 1000, "DUE_STRIP_PARAMS": "a,b", "DUE_FINGERPRINT_BITS": 128})
    f = Frontier.from_settings(crawler.settings, redis.Redis.from_url(redis_url))
    c = f.due.config
    assert (c.mode, c.capacity, c.strip_params, c.bits) == ("bloom", 1000, ("a", "b"), 128)
    assert c.strip_prefixes == ("utm_",)


def test_whole_number_settings_without_a_default_are_refused_in_one_line():
    """DUE_BLOOM_CAPACITY and DUE_BUCKET_LOAD default to None, so the settings
    table checks no kind for them: the DUE does."""
    for name in ("DUE_BLOOM_CAPACITY", "DUE_BUCKET_LOAD"):
        crawler = get_crawler(WebSpider, {"DUE_MODE": "bloom", name: "abc"})
        with pytest.raises(DueConfigError, match=f"^{name} must be a whole number or None, "
                                                 f"not 'abc'$"):
            DueConfig.from_settings(crawler.settings)
        crawler = get_crawler(WebSpider, {"DUE_MODE": "bloom", name: "2000"})
        assert 2000 in (DueConfig.from_settings(crawler.settings).capacity,
                        DueConfig.from_settings(crawler.settings).load)


def test_a_partition_without_its_configuration_fails_loudly(redis_url):
    r = redis.Redis.from_url(redis_url)
    f = frontier_of(r)
    entry = f.entry("a.ex", "http://a.ex/", 0, b"x")
    r.delete(f.keyspace.due(0))
    # the frontier's script checks the partition's DUE record first: without
    # it the crawl's state is taken to be gone (docs/frontier.md, "When Redis fails")
    with pytest.raises(redis.ResponseError, match=r"CRAWLLOST .*\(no \S+due\)"):
        f.sync({0: Batch(enqueue=[entry])})


# -- the frontier's atomic test-and-enqueue ----------------------------------------

def _enqueue(f: Frontier, urls):
    batches: dict[int, Batch] = {}
    for u in urls:
        host = host_of(u)
        batches.setdefault(f.partition_of(host), Batch()).enqueue.append(
            f.entry(host, u, 0, u.encode()))
    return sum(r.added for r in f.sync(batches).values())


@pytest.mark.parametrize("mode", ["exact", "bloom"])
def test_frontier_enqueues_spellings_of_one_url_once(redis_url, mode):
    f = frontier_of(redis.Redis.from_url(redis_url), partitions=2,
                    due=DueConfig(mode=mode, capacity=1000))
    assert _enqueue(f, ["http://a.ex/p?x=1&y=2", "HTTP://A.ex:80/./p?y=2&x=1&utm_source=m#f",
                        "http://a.ex/%70?x=1&y=2", "http://b.ex/"]) == 2
    assert _enqueue(f, ["http://a.ex/p?y=2&x=1"]) == 0
    # the queue member is the URL's fingerprint: the link store's key too
    fp = url_fingerprint("http://a.ex/p?x=1&y=2")
    assert r_zscore(f, "a.ex", fp) is not None


def r_zscore(f, host, fp):
    return f.redis.zscore(f.keyspace.queue(f.partition_of(host), host), fp)


def _race_worker(redis_url, mode, urls, seed, start, out):
    rng = random.Random(seed)
    f = frontier_of(redis.Redis.from_url(redis_url), "race", partitions=3,
                    due=DueConfig(mode=mode, load=8, capacity=500, error_rate=1e-6))
    order = list(urls)
    rng.shuffle(order)
    start.wait(60)  # both set up: go together
    added = 0
    for i in range(0, len(order), 25):  # page-sized batches, interleaved with the other
        added += _enqueue(f, order[i:i + 25])
    out.put(added)


@pytest.mark.parametrize("mode", ["exact", "bloom"])
def test_two_workers_racing_on_the_same_links_enqueue_each_once(redis_url, mode):
    urls = [f"http://h{i % 41}.ex/p{i}" for i in range(4000)]
    # both workers see every link, in different orders, in small batches, while
    # the seen sets split buckets (exact, load 8) or add layers (bloom, 500)
    ctx = multiprocessing.get_context("fork")
    out, start = ctx.Queue(), ctx.Barrier(2)
    procs = [ctx.Process(target=_race_worker, args=(redis_url, mode, urls, s, start, out))
             for s in (1, 2)]
    for p in procs:
        p.start()
    totals = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert sum(totals) == len(urls), totals
    assert all(t > 0 for t in totals)  # they really raced
    r = redis.Redis.from_url(redis_url)
    ks = Keyspace.existing(r, "race")
    queued = {int(m) for p in range(ks.partitions) for key in r.scan_iter(ks.queues_pattern(p))
              for m in r.zrange(key, 0, -1)}
    assert queued == {url_fingerprint(u) for u in urls}


# -- Scrapy's dupefilter interface -------------------------------------------------

def test_dupefilter_shares_the_frontiers_seen_sets(redis_url):
    crawler = get_crawler(WebSpider, {"REDIS_URL": redis_url, "CRAWL_ID": "df",
                                         "FRONTIER_PARTITIONS": 4})
    df = RedisDupeFilter.from_crawler(crawler)
    f = frontier_of(redis.Redis.from_url(redis_url), "df")
    assert _enqueue(f, ["http://a.ex/1"]) == 1
    assert df.request_seen(Request("http://A.ex/1#top"))        # the frontier's URL
    assert not df.request_seen(Request("http://a.ex/2"))
    assert df.request_seen(Request("http://a.ex/2?utm_medium=x"))
    assert df.urls_seen(["http://b.ex/", "http://a.ex/1", "http://b.ex/", "http://a b/"]) == \
        [False, True, True, True]  # a URL that can never be fetched counts as seen
    assert _enqueue(f, ["http://a.ex/2", "http://b.ex/"]) == 0
    assert crawler.stats.get_value("dupefilter/seen") == 2


# -- restart ---------------------------------------------------------------------------

@pytest.mark.faults
def test_seen_sets_survive_a_killed_server(redis_server_factory):
    server = redis_server_factory(appendonly=True)
    due = seen_of(server.client(), load=16)
    fps = random_fps(8000, seed=7)
    assert all(flat(due.check(split_in_two(fps[:5000]))))
    before = due.stats()
    time.sleep(1.5)  # appendfsync everysec: what is older than a second is on disk
    server.kill()    # SIGKILL: no shutdown, no final fsync
    server.restart()
    due = seen_of(server.client(), load=16)
    assert due.stats() == before  # buckets, level and split pointer as they were
    assert not any(flat(due.check(split_in_two(fps[:5000]))))
    # and the table goes on growing from where it was
    assert all(flat(due.check(split_in_two(fps[5000:]))))
    assert not any(flat(due.check(split_in_two(fps))))
