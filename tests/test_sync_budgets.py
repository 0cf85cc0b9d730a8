"""The sync script's budgets part (crawlproj/traps/lua/sync_budgets.lua): the
trap guard's per-host budgets, counted crawl-wide by the frontier, through the
composed script (crawlproj.frontier.frontier.Frontier) on a real server. The
suspects' rule of the same part is tested with its near-duplicate detector in
test_traps.py (test_a_trapped_hosts_suspects_are_dropped_and_its_other_urls_kept)."""

from __future__ import annotations

import redis

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.redis.keyspace import Keyspace
from crawlproj.urls import host_of


def frontier(redis_url, **kw) -> Frontier:
    r = redis.Redis.from_url(redis_url)
    return Frontier(r, Keyspace.open(r, "t", 2), **kw)


def enqueue(f: Frontier, urls, force=False):
    batches: dict[int, Batch] = {}
    for url in urls:
        host = host_of(url)
        batches.setdefault(f.partition_of(host), Batch()).enqueue.append(
            f.entry(host, url, 0, url.encode(), force=force))
    res = f.sync(batches)
    return (sum(r.added for r in res.values()), sum(r.refused_host_queued for r in res.values()),
            sum(r.refused_host_pages for r in res.values()))


def lease_all(f: Frontier):
    got = []
    while True:
        res = f.sync({p: Batch(lease=100) for p in range(f.partitions)})
        leased = [x for r in res.values() for x in r.leased]
        if not leased:
            return got
        got += leased
        batches: dict[int, Batch] = {}
        for x in leased:
            batches.setdefault(x.partition, Batch()).release.append(
                Release(x.host, x.token, Host.OK, URL.DONE, 0, -1))
        f.sync(batches)


def test_host_queue_budget_refuses_new_urls_of_a_full_host_only(redis_url):
    f = frontier(redis_url, host_max_queued=5)
    # one call: the budget counts the URLs this very call queues
    assert enqueue(f, [f"http://trap.ex/{i}" for i in range(8)] + ["http://ok.ex/1"]) == (6, 3, 0)
    # a duplicate of a queued URL is a duplicate, not a refusal
    assert enqueue(f, ["http://trap.ex/0"]) == (0, 0, 0)
    # a refused URL was not marked seen: once the queue has room it is taken
    assert len(lease_all(f)) == 6
    assert enqueue(f, ["http://trap.ex/7"]) == (1, 0, 0)
    # a forced URL (a retry) was admitted once: never refused
    enqueue(f, [f"http://trap.ex/q{i}" for i in range(4)])
    assert enqueue(f, ["http://trap.ex/7"], force=True) == (0, 0, 0)  # still queued: kept
    assert enqueue(f, ["http://trap.ex/r"]) == (0, 1, 0)


def test_host_page_budget_counts_leases_of_the_whole_crawl(redis_url):
    f = frontier(redis_url, host_max_pages=10)
    other = frontier(redis_url, host_max_pages=10)  # a second worker of the crawl
    assert enqueue(f, [f"http://big.ex/{i}" for i in range(6)]) == (6, 0, 0)
    assert len(lease_all(f)) == 6
    # 6 leased: 4 more may be queued, whichever worker finds them
    assert enqueue(other, [f"http://big.ex/n{i}" for i in range(6)]) == (4, 0, 2)
    assert len(lease_all(other)) == 4
    assert enqueue(f, ["http://big.ex/late", "http://small.ex/"]) == (1, 0, 1)
    assert int(f.redis.hget(f.keyspace.host_pages(f.partition_of("big.ex")), "big.ex")) == 10


def test_without_budgets_nothing_is_counted_or_refused(redis_url):
    f = frontier(redis_url)
    assert enqueue(f, [f"http://h.ex/{i}" for i in range(50)]) == (50, 0, 0)
    assert len(lease_all(f)) == 50
    assert not any(f.redis.exists(f.keyspace.host_pages(p)) for p in range(f.partitions))
    assert url_fingerprint("http://h.ex/1") is not None
