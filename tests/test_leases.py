"""The lease book alone (no Scrapy, no Redis), then driven against the real
frontier script: every lease ends exactly once, and nothing is lost."""

from __future__ import annotations

import random
import time

import redis

from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Leased, Release
from crawlproj.frontier.leases import (
    ENDED,
    FETCHING,
    QUEUED,
    LeaseBook,
)
from crawlproj.redis.keyspace import Keyspace
from crawlproj.urls import host_of


def leased(*spec, partition=0):
    """Leased tuples from (host, token) pairs, in the frontier's order."""
    return [Leased(h, t, float(i), f"{h}/{t}".encode(), partition) for i, (h, t) in enumerate(spec)]


def test_leases_are_handed_out_in_the_frontiers_order():
    book = LeaseBook()
    assert book.add(leased(("a", "1"), ("b", "2"), ("c", "3"))) == []
    assert [(x.token, x.state) for x in book] == [("1", QUEUED), ("2", QUEUED), ("3", QUEUED)]
    assert len(book) == 3 and book.queued == 3
    assert [book.next().token, book.next().token] == ["1", "2"]
    assert {x.token: x.state for x in book} == {"1": FETCHING, "2": FETCHING, "3": QUEUED}
    assert book.fetching == 2 and book.queued == 1


def test_tokens_of_two_partitions_are_two_leases():
    book = LeaseBook()
    book.add(leased(("a", "1"), partition=0))
    book.add(leased(("b", "1"), partition=1))
    assert len(book) == 2 and book.queued == 2


def test_download_end_releases_host_and_keeps_url_until_done():
    book = LeaseBook()
    book.add(leased(("a", "1")))
    lease = book.next()
    assert book.ended(lease, Host.OK, 0.25) == [Release("a", "1", Host.OK, URL.PENDING, 250)]
    # the page still being processed counts against the prefetch
    assert lease.state == ENDED and len(book) == 1 and book.fetching == 0
    assert book.done(lease) == [Release("a", "1", Host.NONE, URL.DONE)]
    assert len(book) == 0


def test_busy_host_carries_the_servers_wait():
    book = LeaseBook()
    book.add(leased(("a", "1")))
    assert book.ended(book.next(), Host.BUSY, 0.1, wait_ms=2000) == [
        Release("a", "1", Host.BUSY, URL.PENDING, 100, 2000)]


def test_request_dropped_before_the_downloader_ends_host_and_url_at_once():
    book = LeaseBook()
    book.add(leased(("a", "1")))
    lease = book.next()
    assert book.done(lease, Host.FREE, 0.5) == [Release("a", "1", Host.FREE, URL.DONE, 500)]
    assert len(book) == 0 and book.fetching == 0


def test_a_lease_whose_turn_fetched_robots_txt_returns_its_url_and_the_host_waits():
    book = LeaseBook()
    book.add(leased(("a", "1"), ("b", "2")))
    lease = book.next()
    assert book.returned(lease, Host.OK, 1.5) == [Release("a", "1", Host.OK, URL.RETURN, 1500)]
    assert len(book) == 1 and book.fetching == 0
    # robots.txt answered 5xx: the host is blocked for the retry wait
    b = book.next()
    assert book.returned(b, Host.BUSY, 0.2, wait_ms=60000) == [
        Release("b", "2", Host.BUSY, URL.RETURN, 200, 60000)]
    assert len(book) == 0


def test_a_returned_url_is_queued_again_and_its_host_waits_in_the_real_frontier(redis_url):
    r = redis.Redis.from_url(redis_url)
    f = Frontier(r, Keyspace.open(r, "returned", 1))
    f.sync({0: Batch(enqueue=[f.entry("a.ex", "http://a.ex/1", 0.0, b"1")])})
    book = LeaseBook()
    book.add(f.sync({0: Batch(lease=1)})[0].leased)
    lease = book.next()
    res = f.sync({0: Batch(release=book.returned(lease, Host.OK, 30.0), lease=1)})[0]
    assert res.leased == []                                   # the host waits its 30 s
    assert (res.queued, res.leases, res.pending, res.heap) == (1, 0, 0, 1)
    at = r.zscore(f.keyspace.heap(0), "a.ex")
    assert 29_000 <= at - res.now_ms <= 30_000                # from the server's clock


def test_give_back_returns_every_url_and_every_host_held():
    book = LeaseBook()
    book.add(leased(("a", "1"), ("b", "2"), ("c", "3")))
    book.next()
    b2 = book.next()
    book.ended(b2, Host.OK, 1.0)      # b released; b2 pending
    # a1 fetching (holds a), b2 downloaded (b back already), c3 queued (holds c)
    assert sorted(book.give_back()) == sorted([
        Release("a", "1", Host.FREE, URL.RETURN),
        Release("b", "2", Host.NONE, URL.RETURN),
        Release("c", "3", Host.FREE, URL.RETURN)])
    assert len(book) == 0 and book.closing and book.fetching == 0
    # leases that arrive after (a sync that was out) go straight back
    assert book.add(leased(("d", "5"))) == [Release("d", "5", Host.FREE, URL.RETURN)]
    assert len(book) == 0


def test_random_workers_lose_nothing_against_the_real_frontier(redis_url):
    """Two lease books drive the real sync script through random downloads,
    failures, drops and a shutdown: every URL is downloaded or back in
    its queue at the end, no lease or pending URL is left, no release is stale
    and no host is ever leased twice at once."""
    rng = random.Random(7)
    for round_ in range(5):
        r = redis.Redis.from_url(redis_url)
        f = Frontier(r, Keyspace.open(r, f"book{round_}", 2), backoff_base=0.01,
                     backoff_max=0.04)
        urls = [f"http://h{rng.randrange(6)}.ex/{i}" for i in range(120)]
        batches: dict[int, Batch] = {}
        for url in urls:
            host = host_of(url)
            batches.setdefault(f.partition_of(host), Batch()).enqueue.append(
                f.entry(host, url, rng.random(), url.encode()))
        f.sync(batches)
        books = [LeaseBook(), LeaseBook()]
        done: set[bytes] = set()          # URLs whose page was done
        out: dict[int, list] = {0: [], 1: []}
        stale = 0

        def sync(w, lease_n=0):
            nonlocal stale
            bs: dict[int, Batch] = {p: Batch(lease=lease_n) for p in range(2)}
            for r in out[w]:
                bs[f.partition_of(r.host)].release.append(r)
            out[w] = []
            for res in f.sync(bs).values():
                stale += res.stale
                out[w] += books[w].add(res.leased)

        busy: set[str] = set()  # hosts with a download under way, any worker
        for step in range(400):
            w = rng.randrange(2)
            book = books[w]
            fetching = [x for x in book if x.state == FETCHING]
            ended = [x for x in book if x.state == ENDED]
            action = rng.random()
            if action < 0.3:
                sync(w, lease_n=4)
            elif action < 0.6 and fetching:
                lease = rng.choice(fetching)
                fate = rng.choice([Host.OK, Host.OK, Host.OK, Host.FAIL, Host.BUSY])
                out[w] += book.ended(lease, fate, rng.choice([0.0, 0.001, 0.03]))
                busy.discard(lease.host)
            elif action < 0.8 and ended:
                lease = rng.choice(ended)
                out[w] += book.done(lease)
                done.add(lease.payload)
            elif action < 0.85 and fetching:  # dropped before the downloader
                lease = rng.choice(fetching)
                out[w] += book.done(lease, Host.FREE, 0.0)
                done.add(lease.payload)
                busy.discard(lease.host)
            elif action < 0.88 and fetching:  # its turn fetched the host's robots.txt
                lease = rng.choice(fetching)
                out[w] += book.returned(lease, rng.choice([Host.OK, Host.BUSY]), 0.001,
                                        rng.choice([-1, 10]))
                busy.discard(lease.host)
            else:
                lease = book.next()
                if lease is not None:
                    # weak politeness: one download per host at a time, crawl-wide
                    assert lease.host not in busy, (round_, step, lease.host)
                    busy.add(lease.host)
            if rng.random() < 0.1:
                sync(w)
        time.sleep(0.05)  # every politeness wait and backoff (at most 0.04 s) over
        for w in (0, 1):  # both stop (Ctrl-C) with pages downloaded, not processed
            sync(w, lease_n=2)
            while (lease := books[w].next()) is not None:
                pass
            for lease in [x for x in books[w] if x.state == FETCHING]:
                out[w] += books[w].ended(lease, Host.FAIL, 0.0)
        downloaded_not_done = [x for b in books for x in b if x.state == ENDED]
        assert downloaded_not_done
        for w in (0, 1):
            out[w] += books[w].give_back()
            sync(w)
        status = f.status()
        assert stale == 0 and done
        assert (status.hosts_leased, status.pages_pending) == (0, 0)
        # what is left in the frontier is exactly every URL whose page was not done
        left = []
        for _ in range(200):
            got = [x for r in f.sync({p: Batch(lease=1000) for p in range(2)}).values()
                   for x in r.leased]
            if not got:
                if not f.status().queued:
                    break
                time.sleep(0.01)  # hosts still waiting out their politeness or backoff
            left += [x.payload for x in got]
            f.sync({p: Batch(release=[Release(x.host, x.token, Host.FREE, URL.DONE)
                                      for x in got if x.partition == p]) for p in range(2)})
        assert sorted(left) == sorted({u.encode() for u in urls} - done)


def test_a_lease_past_its_deadline_is_forgotten_without_a_release():
    book = LeaseBook()
    book.add(leased(("a", "1"), ("b", "2"), ("c", "3")), deadline=100.0)
    assert not book.expired(book.next(), 98.0, margin=1.0)
    assert book.expired(next(iter(book)), 99.0, margin=1.0)
    book.renewed(0, "1", 200.0)
    assert not book.expired(next(iter(book)), 150.0)
    b = book.next()  # handed to the engine, then found past its deadline
    book.forget(b)
    assert book.fetching == 1 and len(book) == 2
    book.lost(0, "3")  # the frontier says: no longer yours
    (c,) = [x for x in book if x.token == "3"]
    assert book.expired(c, 0.0)
    book.renewed(0, "3", 1e9)  # a lost lease stays lost
    assert book.expired(c, 0.0)
    book.forget(c)
    assert book.queued == 0 and book.next() is None
    assert [r.token for r in book.give_back()] == ["1"]


def test_a_pages_lease_ends_only_once_its_stores_have_written_it(redis_url):
    """The scheduler is done with a page when the engine is and its stores'
    writes are (crawlproj/stores/pending.py): a write still under way keeps
    the URL leased, so a worker that dies before it lands loses nothing."""
    from scrapy import Request
    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import Deferred

    from crawlproj.frontier.scheduler import FrontierScheduler
    from crawlproj.spiders.web import WebSpider
    from crawlproj.stores.pending import PendingWrites

    crawler = get_crawler(WebSpider, {"REDIS_URL": redis_url, "CRAWL_ID": "held"})
    scheduler = FrontierScheduler.from_crawler(crawler)
    book = scheduler.book
    book.add(leased(("a.example", "1"), ("b.example", "2")))
    pages = []
    for host in ("a.example", "b.example"):
        lease = book.next()
        request = Request(f"http://{host}/page")
        scheduler.downloads._inflight[request] = lease
        pages.append((request, lease))
    write = Deferred()
    PendingWrites.of(crawler).hold("http://a.example/page", write)
    for request, _ in pages:
        scheduler.downloads._done(request)
    assert [book.holds(x) for _, x in pages] == [True, False]
    write.callback(None)
    assert [book.holds(x) for _, x in pages] == [False, False]
    assert len(PendingWrites.of(crawler)) == 0
