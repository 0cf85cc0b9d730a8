"""The sync script's recrawl part (crawlproj/recrawl/lua/sync_recrawl.lua):
the hosts' recrawl queues, the recrawl budget's token bucket, the share of
never-crawled URLs and the pages counted per change-rate bucket, through the
composed script (crawlproj.frontier.frontier.Frontier) on a real server."""

from __future__ import annotations

from dataclasses import replace

import redis

from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.recrawl.record import pack_payload
from crawlproj.recrawl.state import RecrawlState
from crawlproj.redis.keyspace import Keyspace


def _payload(path: str) -> bytes:
    return pack_payload(path, False, 0, [RecrawlState().pack(), "", 0, b"\x01" * 8])


def _fetched_once(f: Frontier, hosts: list[str], due_ms: int = 0, bucket: int = 0) -> None:
    """Each host's page queued, leased and fetched, and due again due_ms on."""
    f.sync({0: Batch(enqueue=[f.entry(h, f"http://{h}/a", 0.0, b"x") for h in hosts])})
    first = []
    while len(first) < len(hosts):
        first += f.sync({0: Batch(lease=100)})[0].leased
    f.sync({0: Batch(release=[Release(x.host, x.token, Host.OK, URL.RECRAWL, 0, -1, due_ms,
                                      _payload("/a"), -1, bucket) for x in first])})


def test_a_page_fetched_is_due_again_then_and_leased_as_a_recrawl(redis_url):
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "due", 1))
    _fetched_once(f, ["later.ex"], due_ms=3_600_000)
    res = f.sync({0: Batch(lease=10)})[0]
    # scheduled an hour on: waiting on the heap, not leased
    assert (res.leased, res.scheduled, res.heap, res.rready) == ([], 1, 1, 0)
    _fetched_once(f, ["now.ex"], due_ms=0)
    res = f.sync({0: Batch(lease=10)})[0]
    assert [(x.host, x.recrawl, x.payload) for x in res.leased] == [("now.ex", True, _payload("/a"))]
    assert (res.leased_recrawl, res.scheduled) == (1, 1)


def test_the_schedules_pages_are_counted_per_change_rate_bucket(redis_url):
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "buckets", 1))
    _fetched_once(f, ["a.ex", "b.ex"], due_ms=0, bucket=3)
    counts = f.keyspace.rate_buckets(0)
    assert r.hgetall(counts) == {b"3": b"2"}
    a, b = sorted(f.sync({0: Batch(lease=10)})[0].leased, key=lambda x: x.host)
    # a moves from bucket 3 to 5; b is gone (done, left the schedule)
    f.sync({0: Batch(release=[Release(a.host, a.token, Host.OK, URL.RECRAWL, 0, -1, 0,
                                      _payload("/a"), 3, 5),
                              Release(b.host, b.token, Host.OK, URL.DONE, 0, -1, 0, b"", 3, -1)])})
    assert r.hgetall(counts) == {b"3": b"0", b"5": b"1"}


def test_the_token_bucket_limits_the_leases_to_its_depth(redis_url):
    """A full bucket holds budget_burst fetches: ten hosts due at once get
    that many leases, and the answer says the rest wait for its next token."""
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "bucket", 1))
    _fetched_once(f, [f"h{i}.ex" for i in range(10)], due_ms=0)
    f.limits = replace(f.limits, budget_per_partition=0.5, budget_burst=2.0)  # a token per 2 s
    res = f.sync({0: Batch(lease=10)})[0]
    assert len(res.leased) == 2 and all(x.recrawl for x in res.leased)
    assert res.budget_waits == 1 and res.rready == 8
    # the next token is at most 2 s away on the server's clock
    assert res.now_ms < res.next_ready_ms <= res.now_ms + 2000
    f.limits = replace(f.limits, budget_per_partition=0.0)  # no budget: all of them
    assert len(f.sync({0: Batch(lease=10)})[0].leased) == 8


def test_new_share_splits_the_leases_when_both_kinds_wait(redis_url):
    """new_share 0: recrawls take every contested lease; 1: never-crawled
    URLs do."""
    r = redis.Redis.from_url(redis_url)
    for share, want_recrawl in ((0.0, True), (1.0, False)):
        f = Frontier(r, Keyspace.open(r, f"split{share}", 1), new_share=share)
        hosts = [f"h{i}.ex" for i in range(20)]
        _fetched_once(f, hosts, due_ms=0)
        f.sync({0: Batch(enqueue=[f.entry(h, f"http://{h}/b", 0.0, b"x") for h in hosts])})
        leased = f.sync({0: Batch(lease=20)})[0].leased
        assert len(leased) == 20 and {x.recrawl for x in leased} == {want_recrawl}


def test_never_crawled_urls_keep_their_share_after_a_first_pass(redis_url):
    """RECRAWL_NEW_SHARE is held over the recent leases: after a first pass
    that took every lease, URLs never crawled still get their share when
    recrawls come due beside them. Counted since the crawl's start, the
    recrawls took every contested lease until they were 80 % of all leases
    so far, while the web's new pages waited."""
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "share", 1))
    f.new_share = 0.2
    hosts = [f"h{i:03d}.example" for i in range(300)]
    f.sync({0: Batch(enqueue=[f.entry(h, f"http://{h}/a", 0.0, b"x") for h in hosts])})
    first = []
    while len(first) < len(hosts):
        first += f.sync({0: Batch(lease=100)})[0].leased
    f.sync({0: Batch(release=[Release(x.host, x.token, Host.OK, URL.RECRAWL, 0, -1, 0,
                                      pack_payload("/a", False, 0, [RecrawlState().pack(), "", 0,
                                                                    b"\x01" * 8]), -1, 0)
                              for x in first])})
    f.sync({0: Batch(enqueue=[f.entry(h, f"http://{h}/b", 0.0, b"x") for h in hosts])})
    leased = f.sync({0: Batch(lease=300)})[0].leased        # both kinds wait on every host
    assert len(leased) == 300
    # after the window's transition (its 100 leases), 20 % of the leases
    new = sum(not x.recrawl for x in leased[150:])
    assert 0.1 * 150 <= new <= 0.3 * 150, new


def test_a_retry_queued_while_its_page_is_leased_keeps_one_queue_and_its_payload(redis_url):
    """A retry (a forced enqueue) of a URL whose lease then ends as a recrawl:
    the URL stays in its host's queue alone, with the retry's payload, and
    the schedule counts it in no bucket; scheduled too, it would share one
    payload with the queue, and the second lease would find none."""
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "retry", 1))
    url, host = "http://h.ex/a", "h.ex"
    f.sync({0: Batch(enqueue=[f.entry(host, url, 0.0, b"first")])})
    lease = f.sync({0: Batch(lease=1)})[0].leased[0]
    # the download ends (the host goes back), the page is pending, and a retry
    # of it is queued meanwhile
    f.sync({0: Batch(release=[Release(host, lease.token, Host.OK, URL.PENDING, 0)])})
    f.sync({0: Batch(enqueue=[f.entry(host, url, 0.0, b"retry", force=True)])})
    f.sync({0: Batch(release=[Release(host, lease.token, Host.NONE, URL.RECRAWL, 0, -1, 0,
                                      _payload("/a"), -1, 4)])})
    ks = f.keyspace
    assert r.zcard(ks.queue(0, host)) == 1
    assert r.zcard(ks.recrawl_queue(0, host)) == 0
    assert r.hgetall(ks.rate_buckets(0)) in ({}, {b"4": b"0"})
    got = []
    for _ in range(5):
        got += f.sync({0: Batch(lease=1)})[0].leased
    assert [(x.payload, x.recrawl) for x in got] == [(b"retry", False)]
