"""The lease book alone (no Scrapy, no Redis), then driven against the real
frontier script: every lease ends exactly once, and nothing is lost."""

from __future__ import annotations

import random
import time

import redis

from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Leased, Release
from crawlproj.frontier.leases import (
    DONE,
    ENDED,
    FETCHING,
    QUEUED,
    RUN,
    SOON_MS,
    LeaseBook,
)
from crawlproj.keyspace import Keyspace
from crawlproj.urls import host_of


def leased(*spec, partition=0):
    """Leased tuples from (host, token) pairs, in the frontier's order."""
    return [Leased(h, t, float(i), f"{h}/{t}".encode(), partition) for i, (h, t) in enumerate(spec)]


def test_a_hosts_first_url_holds_it_and_the_rest_are_its_run():
    book = LeaseBook(max_backlog=4)
    assert book.add(leased(("a", "1"), ("b", "2"), ("a", "3"), ("a", "4"))) == []
    assert [(x.token, x.state, x.holds_host) for x in book] == [
        ("1", QUEUED, True), ("2", QUEUED, True), ("3", RUN, False), ("4", RUN, False)]
    assert book.holding == 4 and book.queued == 2
    assert [book.next().token, book.next().token, book.next()] == ["1", "2", None]
    assert {x.token: x.state for x in book} == {"1": FETCHING, "2": FETCHING, "3": RUN, "4": RUN}


def test_tokens_of_two_partitions_are_two_leases():
    book = LeaseBook(max_backlog=4)
    book.add(leased(("a", "1"), partition=0))
    book.add(leased(("b", "1"), partition=1))
    assert len(book) == 2 and book.queued == 2


def test_download_end_releases_host_and_keeps_url_until_done():
    book = LeaseBook(max_backlog=4)
    book.add(leased(("a", "1")))
    lease = book.next()
    releases, run_in = book.ended(lease, Host.OK, 0.25)
    assert releases == [Release("a", "1", Host.OK, URL.PENDING, 250)] and run_in is None
    assert lease.state == ENDED and book.backlog == 1 and book.holding == 1
    assert book.done(lease) == [Release("a", "1", Host.NONE, URL.DONE)]
    assert len(book) == 0 and book.backlog == 0


def test_busy_host_carries_the_servers_wait():
    book = LeaseBook(max_backlog=4)
    book.add(leased(("a", "1")))
    releases, _ = book.ended(book.next(), Host.BUSY, 0.1, wait_ms=2000)
    assert releases == [Release("a", "1", Host.BUSY, URL.PENDING, 100, 2000)]


def test_request_dropped_before_the_downloader_ends_host_and_url():
    book = LeaseBook(max_backlog=4)
    book.add(leased(("a", "1")))
    lease = book.next()
    assert book.done(lease, Host.FREE, 0.0) == [Release("a", "1", Host.FREE, URL.PENDING),
                                               Release("a", "1", Host.NONE, URL.DONE)]
    assert len(book) == 0 and book.backlog == 0


def test_a_run_goes_on_while_its_host_may_be_contacted_at_once():
    book = LeaseBook(max_backlog=4)
    book.add(leased(("a", "1"), ("a", "2"), ("a", "3")))
    first = book.next()
    releases, run_in = book.ended(first, Host.OK, 0.004)
    # the first URL goes pending by itself; the host stays this worker's
    assert releases == [Release("a", "1", Host.KEEP, URL.PENDING)] and run_in == 0.004
    assert book.next() is None  # the next URL waits for the host's wait
    assert book.continue_run("a")
    second = book.next()
    assert second.token == "2" and second.state == FETCHING
    assert book.done(first) == [Release("a", "1", Host.NONE, URL.DONE)]
    # first's page is done, but its token still holds the host: kept, not counted
    assert first.state == DONE and first in list(book) and book.holding == 2
    assert book.ended(second, Host.OK, 0.0) == ([], 0.0)
    assert book.continue_run("a") and not book.continue_run("a")
    third = book.next()
    # the last URL of the run: the host goes back, with the holder's token
    releases, run_in = book.ended(third, Host.OK, 0.002)
    assert releases == [Release("a", "1", Host.OK, URL.NONE, 2)] and run_in is None
    assert first not in list(book)
    for lease in (second, third):
        assert book.done(lease) == [Release("a", lease.token, Host.NONE, URL.DONE)]
    assert len(book) == 0 and book.backlog == 0


def test_a_run_ends_on_a_failure_a_long_wait_or_a_backlog():
    for fate, delay, backlog in ((Host.BUSY, 0.0, 0), (Host.FAIL, 0.0, 0),
                                 (Host.OK, (SOON_MS + 1) / 1000, 0), (Host.OK, 0.0, 3)):
        book = LeaseBook(max_backlog=4)
        book.backlog = backlog
        book.add(leased(("a", "1"), ("a", "2"), ("a", "3")))
        releases, run_in = book.ended(book.next(), fate, delay)
        # the host goes back with its fate; the run's URLs to their queue
        assert releases == [Release("a", "1", fate, URL.PENDING, int(delay * 1000)),
                            Release("a", "2", Host.NONE, URL.RETURN),
                            Release("a", "3", Host.NONE, URL.RETURN)], (fate, delay, backlog)
        assert run_in is None and book.holding == 1


def test_behind_means_no_room_and_no_runs():
    book = LeaseBook(max_backlog=2)
    book.add(leased(("a", "1"), ("b", "2")))
    a, b = book.next(), book.next()
    book.ended(a, Host.OK, 1.0)
    assert not book.behind()
    book.ended(b, Host.OK, 1.0)
    assert book.behind()
    book.done(a)
    assert not book.behind()


def test_give_back_returns_every_url_not_done_and_every_host_held():
    book = LeaseBook(max_backlog=4)
    book.add(leased(("a", "1"), ("a", "2"), ("b", "3"), ("c", "4")))
    a1 = book.next()
    book.ended(a1, Host.OK, 0.0)      # run goes on: a1 pending, host a kept
    book.done(a1)                     # a1 done; its token still holds a
    b3 = book.next()
    book.ended(b3, Host.OK, 1.0)      # b released; b3 pending
    # c4 queued, a2 waiting in the run
    assert sorted(book.give_back()) == sorted([
        Release("a", "1", Host.FREE, URL.NONE),
        Release("a", "2", Host.NONE, URL.RETURN),
        Release("b", "3", Host.NONE, URL.RETURN),
        Release("c", "4", Host.FREE, URL.RETURN)])
    assert len(book) == 0 and book.closing
    # leases that arrive after (a sync that was out) go straight back
    assert book.add(leased(("d", "5"))) == [Release("d", "5", Host.FREE, URL.RETURN)]
    assert len(book) == 0


def test_runs_pay_only_after_short_waits():
    book = LeaseBook(max_backlog=100)
    assert not book.runs_pay()  # a new worker asks for none
    for i in range(10):
        book.add(leased((f"h{i}", str(i))))
        book.ended(book.next(), Host.OK, 0.0)
    assert book.runs_pay()
    for i in range(10, 20):
        book.add(leased((f"h{i}", str(i))))
        book.ended(book.next(), Host.OK, 0.5)
    assert not book.runs_pay()


def test_random_workers_lose_nothing_against_the_real_frontier(redis_url):
    """Two lease books drive the real sync script through random downloads,
    failures, runs, drops and a shutdown: every URL is downloaded or back in
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
        books = [LeaseBook(max_backlog=3), LeaseBook(max_backlog=3)]
        done: set[bytes] = set()          # URLs whose page was done
        out: dict[int, list] = {0: [], 1: []}
        stale = 0

        def sync(w, lease_n=0):
            nonlocal stale
            bs: dict[int, Batch] = {p: Batch(lease=lease_n, run=3) for p in range(2)}
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
                releases, run_in = book.ended(lease, fate, rng.choice([0.0, 0.001, 0.03]))
                out[w] += releases
                busy.discard(lease.host)
                if run_in is not None:
                    book.continue_run(lease.host)
            elif action < 0.8 and ended:
                lease = rng.choice(ended)
                out[w] += book.done(lease)
                done.add(lease.payload)
            elif action < 0.85 and fetching:  # dropped before the downloader
                lease = rng.choice(fetching)
                out[w] += book.done(lease, Host.FREE, 0.0)
                done.add(lease.payload)
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
                out[w] += books[w].ended(lease, Host.FAIL, 0.0)[0]
        downloaded_not_done = [x for b in books for x in b if x.state == ENDED]
        assert downloaded_not_done
        for w in (0, 1):
            out[w] += books[w].give_back()
            sync(w)
        status = f.status()
        assert stale == 0 and done
        assert (status["hosts_leased"], status["pages_pending"]) == (0, 0)
        # what is left in the frontier is exactly every URL whose page was not done
        left = []
        for _ in range(200):
            got = [x for r in f.sync({p: Batch(lease=1000) for p in range(2)}).values()
                   for x in r.leased]
            if not got:
                if not f.status()["queued"]:
                    break
                time.sleep(0.01)  # hosts still waiting out their politeness or backoff
            left += [x.payload for x in got]
            f.sync({p: Batch(release=[Release(x.host, x.token, Host.FREE, URL.DONE)
                                      for x in got if x.partition == p]) for p in range(2)})
        assert sorted(left) == sorted({u.encode() for u in urls} - done)
