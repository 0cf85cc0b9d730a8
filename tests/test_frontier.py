"""The frontier's Lua core against a real server: states, politeness, leases, DUE
(the sync script's frontier part, crawlproj/frontier/lua/frontier.lua; its other
parts are test_sync_*.py's)."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.frontier.admission import Refused, admit
from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.prioritizers.basic import BreadthFirst
from crawlproj.redis.keyspace import Keyspace
from crawlproj.urls import host_of, refusal, valid_hostname


def make(redis_url, crawl_id="t", partitions=1, **kw) -> Frontier:
    r = redis.Redis.from_url(redis_url)
    return Frontier(r, Keyspace.open(r, crawl_id, partitions), **kw)


def add(f: Frontier, urls, scores=None, force=False) -> dict:
    batches: dict[int, Batch] = {}
    for i, url in enumerate(urls):
        host = host_of(url)
        score = scores[i] if scores else i
        batches.setdefault(f.partition_of(host), Batch()).enqueue.append(
            f.entry(host, url, score, url.encode(), force=force))
    return f.sync(batches)


def lease(f: Frontier, n=100):
    res = f.sync({p: Batch(lease=n) for p in range(f.partitions)})
    return [x for r in res.values() for x in r.leased]


def release(f: Frontier, leased, delay_ms=0, host=Host.OK, url=URL.DONE, wait_ms=-1):
    batches: dict[int, Batch] = {}
    for x in leased:
        batches.setdefault(x.partition, Batch()).release.append(
            Release(x.host, x.token, host, url, delay_ms, wait_ms))
    return f.sync(batches)


def test_one_url_per_host_and_best_first(redis_url):
    f = make(redis_url)
    add(f, ["http://a.ex/3", "http://a.ex/1", "http://b.ex/2", "http://a.ex/1"],
        scores=[3, 1, 2, 0])
    got = lease(f)
    # weak politeness: one URL per host at a time; the best URL of each host,
    # best hosts first
    assert [(x.host, x.payload) for x in got] == [("a.ex", b"http://a.ex/1"),
                                                   ("b.ex", b"http://b.ex/2")]
    assert lease(f) == []  # both hosts leased: nothing more to hand out
    release(f, got)
    assert [x.payload for x in lease(f)] == [b"http://a.ex/3"]


def test_duplicates_are_eliminated(redis_url):
    f = make(redis_url)
    r = add(f, ["http://a.ex/x", "http://A.EX:80/x#frag", "http://a.ex/x?utm_source=q"])
    assert (r[0].added, r[0].duplicates) == (1, 2)
    # force (Scrapy's dont_filter: retries) enqueues again
    got = lease(f)
    release(f, got)
    r = add(f, ["http://a.ex/x"], force=True)
    assert r[0].added == 1


def test_politeness_delay_is_kept(redis_url):
    f = make(redis_url)
    add(f, ["http://a.ex/1", "http://a.ex/2"])
    (x,) = lease(f)
    r = release(f, [x], delay_ms=400)[0]
    assert r.heap == 1 and r.next_ready_ms - r.now_ms == pytest.approx(400, abs=5)
    assert lease(f) == []
    time.sleep(0.45)
    assert len(lease(f)) == 1


def test_refilled_queue_still_waits_its_turn(redis_url):
    f = make(redis_url)
    add(f, ["http://a.ex/1"])
    (x,) = lease(f)
    release(f, [x], delay_ms=400)  # queue empty now: the host goes idle
    add(f, ["http://a.ex/2"])
    assert lease(f) == []
    time.sleep(0.45)
    assert len(lease(f)) == 1


def test_expired_lease_returns_url(redis_url):
    f = make(redis_url, lease_ttl=0.3)
    add(f, ["http://a.ex/1"])
    (x,) = lease(f)
    time.sleep(0.35)
    (y,) = lease(f)  # the worker that held it is presumed dead
    assert y.payload == x.payload and y.token != x.token
    assert f.status().counters["expired"] == 1
    # the late release of the old holder changes nothing
    r = release(f, [x])[0]
    assert r.stale == 1 and r.leases == 1


def test_renewed_lease_does_not_expire(redis_url):
    f = make(redis_url, lease_ttl=0.4)
    add(f, ["http://a.ex/1", "http://a.ex/2"])
    (x,) = lease(f)
    for _ in range(3):
        time.sleep(0.2)
        f.sync({x.partition: Batch(renew=[(x.host, x.token)])})
    assert lease(f) == []


def test_return_puts_url_back_without_delay(redis_url):
    f = make(redis_url)
    add(f, ["http://a.ex/1"])
    (x,) = lease(f)
    release(f, [x], host=Host.FREE, url=URL.RETURN)
    (y,) = lease(f)
    assert y.payload == x.payload


def test_host_released_at_download_end_url_pending_until_done(redis_url):
    f = make(redis_url, lease_ttl=0.3)
    add(f, ["http://a.ex/1", "http://a.ex/2"])
    (x,) = lease(f)
    r = release(f, [x], url=URL.PENDING)[0]
    # the host is free for its next URL while the first page is still processed
    assert (r.leases, r.pending) == (0, 1) and not f.is_empty({0: r})
    (y,) = lease(f)
    assert y.payload == b"http://a.ex/2"
    r = release(f, [x], host=Host.NONE)[0]
    assert r.pending == 0 and r.stale == 0
    release(f, [y])
    time.sleep(0.35)  # nothing pending is left to expire
    assert lease(f) == [] and "expired" not in f.status().counters


def test_pending_url_of_dead_worker_returns_to_its_host(redis_url):
    f = make(redis_url, lease_ttl=0.3)
    add(f, ["http://a.ex/1"])
    (x,) = lease(f)
    release(f, [x], url=URL.PENDING)
    for _ in range(2):  # renewals keep a pending URL too
        time.sleep(0.2)
        f.sync({x.partition: Batch(renew=[(x.host, x.token)])})
    assert lease(f) == []
    time.sleep(0.35)  # the worker died before its page was done
    (y,) = lease(f)
    assert y.payload == x.payload and y.token != x.token
    assert f.status().counters["expired"] == 1
    r = release(f, [x], host=Host.NONE)[0]  # too late: changes nothing
    assert (r.pending, r.leases) == (0, 1)


def test_pending_url_returned_on_shutdown(redis_url):
    f = make(redis_url)
    add(f, ["http://a.ex/1", "http://a.ex/2"])
    (x,) = lease(f)
    release(f, [x], delay_ms=10_000, url=URL.PENDING)
    release(f, [x], host=Host.NONE, url=URL.RETURN)  # Ctrl-C before the page was processed
    r = lease(f)
    assert r == []  # the host still waits out its politeness delay
    st = f.status()
    assert (st.queued, st.pages_pending, st.hosts_waiting) == (2, 0, 1)


def test_backoff_blocks_failing_host(redis_url):
    f = make(redis_url, backoff_base=0.3, backoff_after=2)
    add(f, [f"http://a.ex/{i}" for i in range(5)])
    (x,) = lease(f)
    release(f, [x], host=Host.FAIL)  # first failure: no block yet
    (x,) = lease(f)
    r = release(f, [x], host=Host.FAIL)[0]  # second: blocked for the base time
    assert r.next_ready_ms - r.now_ms == pytest.approx(300, abs=5)
    time.sleep(0.32)
    (x,) = lease(f)
    r = release(f, [x], host=Host.BUSY, wait_ms=2000)[0]  # Retry-After: 2 s
    assert r.next_ready_ms - r.now_ms == pytest.approx(2000, abs=5)
    assert lease(f) == []


def test_partitions_are_hash_tagged(redis_url):
    f = make(redis_url, partitions=8)
    urls = [f"http://h{i}.ex/" for i in range(200)]
    add(f, urls)
    keys = {k.decode() for k in f.redis.scan_iter()}
    # every key of a partition carries the same {crawl/p} hash tag
    ks = f.keyspace
    by_partition = [{k for k in keys if k.startswith(ks.prefix(p))} for p in range(8)]
    assert keys == {ks.meta}.union(*by_partition)
    assert all(by_partition)
    assert sum(len(r.leased) for r in f.sync({p: Batch(lease=100) for p in range(8)}).values()) == 200


def test_crawls_do_not_share_keys(redis_url):
    a, b = make(redis_url, crawl_id="a"), make(redis_url, crawl_id="b")
    add(a, ["http://x.ex/1"])
    assert lease(b) == []
    assert add(b, ["http://x.ex/1"])[0].added == 1


def test_racing_workers_enqueue_each_url_once(redis_url):
    urls = [f"http://h{i % 37}.ex/p{i}" for i in range(3000)]
    totals = []

    def worker():
        f = make(redis_url, partitions=4)
        totals.append(sum(r.added for r in add(f, urls).values()))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(totals) == len(urls)
    assert make(redis_url).status().queued == len(urls)


def test_admission_refuses_bad_urls(redis_url):
    f = make(redis_url)
    from scrapy import Request
    bfs = BreadthFirst()
    for url, reason in [("ftp://a.ex/x", "scheme"), ("http://a.ex/" + "x" * 3000, "url_too_long"),
                        ("http://127.0.0.256/", "invalid_host"), ("http://a.09/", "invalid_host"),
                        ("http://a|b.ex/", "invalid_host")]:
        assert refusal(url, 2083)[0] == reason, url
        try:
            request = Request(url)
        except ValueError:  # w3lib 2.6 refuses an invalid IPv4 host itself
            assert reason == "invalid_host", url
            continue
        with pytest.raises(Refused) as info:
            admit(f, bfs, request, None, 2083)
        assert info.value.reason == reason, url
    assert refusal("http://a.ex:99999/", 2083)[0] == "malformed"
    assert refusal("http://bücher.de/x", 2083) is None
    assert valid_hostname("127.0.0.1") and valid_hostname("[::1]")
    assert host_of("http://Bücher.DE:8080/") == "xn--bcher-kva.de:8080"


def test_rescore_rewrites_queued_priorities_in_bulk(redis_url):
    f = make(redis_url, partitions=4)
    urls = [f"http://h{h}.ex/{i}" for h in range(20) for i in range(10)]
    add(f, urls, scores=list(range(len(urls))))  # h0 first, /0 first
    # the ranker's new order: reverse, and one URL left as it is (None)
    rank = {url_fingerprint(u): -1 - i for i, u in enumerate(urls)}
    keep = url_fingerprint("http://h3.ex/5")

    def score(fps):
        return [None if fp == keep else rank[fp] for fp in fps]

    totals = f.rescore(score, hosts_per_round=7)  # several rounds per partition
    assert totals == {"hosts": 20, "urls": 200, "changed": 199}
    assert f.rescore(score)["changed"] == 0  # nothing left to change
    got = lease(f, 100)
    # each host now serves its last URL first; each partition its best host first
    assert sorted(x.payload for x in got) == sorted(f"http://h{h}.ex/9".encode()
                                                    for h in range(20))
    for p in range(4):
        hosts = [int(x.host[1:-3]) for x in got if x.partition == p]
        assert hosts == sorted(hosts, reverse=True)
    release(f, got)
    h3 = [x.payload for x in lease(f, 100) if x.host == "h3.ex"]
    assert h3 == [b"http://h3.ex/8"]


def test_rescore_of_ready_host_and_leased_member(redis_url):
    f = make(redis_url)
    add(f, ["http://a.ex/1", "http://a.ex/2", "http://b.ex/1"], scores=[1, 2, 3])
    f.sync({0: Batch(lease=0)})
    first = lease(f, 1)  # a.ex/1 leased; b.ex now sits in ready with score 3
    assert [x.payload for x in first] == [b"http://a.ex/1"]

    new = {url_fingerprint("http://a.ex/2"): 50.0, url_fingerprint("http://b.ex/1"): -5.0}

    def score(fps):
        # the leased URL is not among the queued ones and must not come back
        assert url_fingerprint("http://a.ex/1") not in fps
        return [new[fp] for fp in fps]

    assert f.rescore(score)["changed"] == 2
    # rewriting a member that was leased in between is a no-op (ZADD XX)
    r = redis.Redis.from_url(redis_url)
    gone = url_fingerprint("http://a.ex/1")
    assert f._rescore_call(0, ["a.ex", 1, "7", gone]) == 0
    assert r.zscore(f.keyspace.ready(0), "b.ex") == -5.0
    release(f, first)
    got = lease(f, 10)
    assert [(x.payload, x.score) for x in got] == [(b"http://b.ex/1", -5.0),
                                                   (b"http://a.ex/2", 50.0)]
    assert f.status().queued == 0


def test_duplicate_links_bump_a_queued_url(redis_url):
    """A prioritizer that counts links (backlinks, OPIC) raises the priority of
    a queued URL each time another link to it is found; not of one that left."""
    f = make(redis_url)

    def link(url, score, bump):
        host = host_of(url)
        return f.sync({0: Batch(enqueue=[f.entry(host, url, score, url.encode(), bump=bump)])})[0]

    link("http://a.ex/1", -1, -1)
    link("http://a.ex/2", -1, -1)
    r = link("http://a.ex/2", -1, -1)
    assert (r.added, r.duplicates, r.bumped) == (0, 1, 1)
    link("http://a.ex/2", -1, -1)
    first = lease(f, 1)
    assert [(x.payload, x.score) for x in first] == [(b"http://a.ex/2", -3.0)]
    r = link("http://a.ex/2", -1, -1)  # being fetched: a duplicate, nothing to bump
    assert (r.added, r.duplicates, r.bumped, r.queued) == (0, 1, 0, 1)
    r = link("http://a.ex/1", -1, 0)  # bump 0: the score stays
    assert r.bumped == 0
    release(f, first)
    assert [(x.payload, x.score) for x in lease(f)] == [(b"http://a.ex/1", -1.0)]
    assert f.status().counters["bumped"] == 2


def test_links_in_one_call_are_queued_once_and_bumped(redis_url):
    """Several pages' links in one sync (group commit): a URL linked twice is
    queued once and its second link still counts; a retry of a queued URL
    keeps its place and payload."""
    f = make(redis_url)
    e = [f.entry(host_of(u), u, -1, f"{u} #{k}".encode(), bump=-1)
         for k, u in enumerate(["http://a.ex/1", "http://a.ex/2", "http://a.ex/1",
                                "http://b.ex/1", "http://a.ex/1"])]
    e.append(f.entry("a.ex", "http://a.ex/2", 9, b"retry", force=True))
    r = f.sync({0: Batch(enqueue=e)})[0]
    assert (r.added, r.duplicates, r.bumped, r.queued) == (3, 3, 2, 3)
    got = lease(f)
    assert [(x.payload, x.score) for x in got] == [(b"http://a.ex/1 #0", -3.0),
                                                   (b"http://b.ex/1 #3", -1.0)]
    release(f, got)
    assert [(x.payload, x.score) for x in lease(f)] == [(b"http://a.ex/2 #1", -1.0)]


def test_a_better_link_lowers_a_queued_urls_score_and_a_worse_one_leaves_it(redis_url):
    """A prioritizer whose estimate of a URL is the best of its links (the
    similarity order): a later link with a lower score moves the queued URL
    ahead, in the same call or a later one; a higher one changes nothing;
    a URL being fetched is not touched."""
    f = make(redis_url)

    def links(*pairs):
        return f.sync({0: Batch(enqueue=[f.entry(host_of(u), u, s, f"{u} {s}".encode(), best=True)
                                         for u, s in pairs])})[0]

    r = links(("http://a.ex/1", 5), ("http://a.ex/2", 3), ("http://a.ex/1", 4),
              ("http://a.ex/1", 6))
    assert (r.added, r.duplicates, r.bumped) == (2, 2, 1)
    r = links(("http://a.ex/2", 9), ("http://a.ex/1", 1))
    assert (r.added, r.duplicates, r.bumped) == (0, 2, 1)
    first = lease(f, 1)
    # the first link's payload stays with the URL; its score is the best seen
    assert [(x.payload, x.score) for x in first] == [(b"http://a.ex/1 5", 1.0)]
    r = links(("http://a.ex/1", -7))  # being fetched: nothing to lower
    assert (r.duplicates, r.bumped, r.queued) == (1, 0, 1)
    release(f, first)
    assert [(x.payload, x.score) for x in lease(f)] == [(b"http://a.ex/2 3", 3.0)]
    assert f.status().counters["bumped"] == 2


def test_recent_urls_cache_is_least_recently_seen_first_out():
    from crawlproj.frontier.admission import RecentURLs
    c = RecentURLs(2)
    assert [c.seen(x) for x in ("a", "b", "a", "c")] == [False, False, True, False]
    assert c.seen("a") and not c.seen("b")  # b was the least recent when c came
    assert "a" in c and "z" not in c



# -- fencing: a lease that is no longer a worker's changes nothing (docs/frontier.md,
#    "When Redis fails") -----------------------------------------------------------


def test_renewal_of_a_lease_taken_back_reports_it_lost(redis_url):
    f = make(redis_url, lease_ttl=0.3)
    add(f, ["http://a.ex/1", "http://b.ex/1"])
    x, y = lease(f)
    release(f, [y], url=URL.PENDING)
    time.sleep(0.35)
    (z, w) = lease(f)  # both taken back and given again
    r = f.sync({0: Batch(renew=[(x.host, x.token), (y.host, y.token), (z.host, z.token)])})[0]
    assert sorted(r.lost) == sorted([x.token, y.token])
    # the stale renewals extended nothing: the new holders' leases are theirs
    assert r.leases == 2 and r.pending == 0


def test_a_token_is_never_handed_out_twice_even_after_a_rewound_counter(redis_url):
    """A crash loses the AOF's last second: the lease counter may go back. A
    stale worker's token must not name the lease of the next holder, or its
    late release would end that holder's lease and its URL."""
    f = make(redis_url, lease_ttl=0.3)
    add(f, ["http://a.ex/1", "http://a.ex/2"])
    (x,) = lease(f)
    f.redis.hincrby(f.keyspace.stats(0), "leased", -1)  # as if the grant was lost
    time.sleep(0.35)
    (y,) = lease(f)
    assert y.host == x.host and y.token != x.token
    r = release(f, [x])[0]  # the stale holder ends its download, then its page
    assert r.stale == 1 and r.leases == 1  # the new holder keeps host and URL
    release(f, [x], host=Host.NONE, url=URL.DONE)
    r = release(f, [y], url=URL.PENDING)[0]
    assert (r.stale, r.pending) == (0, 1)


def _worker(f: Frontier, target=4):
    from scrapy.utils.test import get_crawler

    from crawlproj.frontier.leases import LeaseBook
    from crawlproj.frontier.sync import FrontierSync
    return FrontierSync(f, LeaseBook(), get_crawler().stats, target, True, 0, lambda: None)


def _ask(worker) -> float:
    """One sync of worker with room in its book, as its reactor would send it:
    how long until it asks again (its armed timer)."""
    from twisted.internet import reactor
    worker.poll.due = True  # a poll: every partition asked
    batches, riders = worker._batches([])
    results, replies = worker.frontier.sync_with(batches, [])
    worker._synced((results, replies, riders))
    timer, worker.poll._call = worker.poll._call, None
    assert timer is not None and timer.active()
    timer.cancel()
    return timer.getTime() - reactor.seconds()


def test_a_worker_starved_by_a_busier_one_asks_again_soon(redis_url):
    """Every host with queued URLs leased, all to worker a: a host a hands
    back with no wait it leases again in the same call if it has room, so b,
    with room and nothing, must ask within BUSY_POLL to get any (asking once
    LONGEST_SLEEP had passed, two benchmark workers split the pages 2:1). a,
    holding them all, learns of its hosts from its own releases."""
    from crawlproj.frontier.sync import BUSY_POLL, LONGEST_SLEEP
    f = make(redis_url, "busy")
    add(f, [f"http://h{i}.ex/p{j}" for i in range(2) for j in range(3)])
    a, b = _worker(f), _worker(f)
    assert _ask(a) == pytest.approx(LONGEST_SLEEP, abs=0.05)
    assert len(a.book) == 2  # one URL per host: both hosts
    assert _ask(b) <= BUSY_POLL
    assert len(b.book) == 0
