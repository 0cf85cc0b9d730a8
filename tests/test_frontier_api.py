"""Frontier's typed interface (URLFrontier's terms) on a real server, and the
per-crawler components registry (crawlproj/components.py)."""

from __future__ import annotations

import gc
import subprocess
import time

import redis as redis_lib
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawlproj.components import component, register, registered
from crawlproj.frontier import codec
from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release, Status
from crawlproj.recrawl.record import pack_payload
from crawlproj.redis.keyspace import Keyspace


def _frontier(r, crawl: str, partitions: int = 2, **kw) -> Frontier:
    return Frontier(r, Keyspace.open(r, crawl, partitions), **kw)


def _entries(f: Frontier, urls: list[str], first_score: float = 0.0):
    out = []
    for i, url in enumerate(urls):
        host = url.split("/")[2]
        out.append((f.partition_of(host), f.entry(host, url, first_score + i,
                                                  codec.encode(Request(url), None, host))))
    return out


def _lease_all(f: Frontier, n: int = 10):
    res = f.sync({p: Batch(lease=n) for p in range(f.partitions)})
    return [x for r in res.values() for x in r.leased]


def test_put_urls_adds_new_urls_once_and_counts_the_duplicates(redis_url):
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-put")
    urls = ["http://a.ex/1", "http://a.ex/2", "http://b.ex/1"]
    put = f.put_urls(_entries(f, urls))
    assert (put.added, put.duplicates) == (3, 0)
    again = f.put_urls(_entries(f, urls[:2] + ["http://c.ex/1"]))
    assert (again.added, again.duplicates) == (1, 2)
    assert f.put_urls([]).added == 0
    assert f.status().queued == 4


def test_status_is_typed_and_counts_hosts_by_state(redis_url):
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-status")
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2", "http://b.ex/1"]))
    st = f.status()
    assert isinstance(st, Status)
    assert (st.queued, st.hosts_ready + st.hosts_waiting, st.hosts_leased,
            st.oldest_lease_age_s) == (3, 2, 0, None)
    leased = _lease_all(f, 1)
    st = f.status()
    assert st.hosts_leased == len(leased) > 0 and st.oldest_lease_age_s is not None
    assert st.as_dict()["counters"]["enqueued"] == 3


def test_list_queues_names_each_hosts_state_and_failures(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, "api-list", backoff_base=2.0)
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2", "http://b.ex/1", "http://c.ex/1"]))
    leased = {x.host: x for x in _lease_all(f)}
    assert set(leased) == {"a.ex", "b.ex", "c.ex"}
    # a.ex: downloaded, waits 60 s with a URL left; b.ex: a failure, done;
    # c.ex stays leased
    for host, fate, url_fate in (("a.ex", Host.OK, URL.DONE), ("b.ex", Host.FAIL, URL.DONE)):
        x = leased[host]
        f.sync({x.partition: Batch(release=[Release(host, x.token, fate, url_fate, 60_000)])})
    queues = f.list_queues(limit=100)
    assert queues["a.ex"].state == "waiting" and queues["a.ex"].until_ms > f.now_ms()
    assert queues["a.ex"].record is not None  # sync.lua's record of its download's end
    assert queues["b.ex"].state == "idle" and queues["b.ex"].fails == 1
    assert queues["c.ex"].state == "leased" and queues["c.ex"].fails == 0
    assert {q.partition for q in queues.values()} == {f.partition_of(h) for h in queues}
    # the lengths of their back queues
    for h, n in (("a.ex", 1), ("c.ex", 0)):
        assert f.queue_lengths(f.partition_of(h), [h]) == [n]
    assert f.queue_sizes([(f.partition_of("a.ex"), "a.ex")]) == [1]


def test_host_tells_one_hosts_state_counts_and_next_urls(redis_url):
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-host")
    f.put_urls(_entries(f, ["http://a.ex/3", "http://a.ex/1", "http://a.ex/2"]))
    view = f.host("a.ex")
    # a new host's time has come: on the heap until a sync makes it ready
    assert view.next_contact_ms <= f.now_ms() and view.queued == 3
    assert view.lease_deadline_ms is None
    assert view.known() and not f.host("nowhere.ex").known()
    # best first: the scores given were 0, 1, 2 in the order put
    assert [codec.decode(p, None, "a.ex").url for p in f.queued_urls("a.ex", 2)] == \
        ["http://a.ex/3", "http://a.ex/1"]
    (x,) = _lease_all(f)
    view = f.host("a.ex")
    assert not view.ready and view.lease_deadline_ms is not None and view.queued == 2
    (times,) = f.host_times([(x.partition, "a.ex")])
    assert times.lease_deadline_ms == view.lease_deadline_ms and times.next_contact_ms is None
    f.sync({x.partition: Batch(release=[Release("a.ex", x.token, Host.OK, URL.DONE, 30_000)])})
    view = f.host("a.ex")
    assert view.lease_deadline_ms is None and view.next_contact_ms is not None
    assert f.host_times([(x.partition, "a.ex")])[0].next_contact_ms == view.next_contact_ms
    assert view.pages_leased is None  # the trap guard's page budget is off


def test_overview_counts_and_samples_hosts_with_work(redis_url):
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-overview")
    f.put_urls(_entries(f, [f"http://h{i}.ex/" for i in range(6)]))
    leased = _lease_all(f, 2)
    o = f.overview(f.now_ms(), sample=100)
    assert o.ready + o.waiting + o.leased == 6 and o.leased == len(leased) > 0
    assert sorted(h for _, h in o.leased_sample) == sorted(x.host for x in leased)
    assert {h for _, h in o.sample} == {f"h{i}.ex" for i in range(6)} - {x.host for x in leased}


def test_pages_leased_counts_the_trap_guards_page_budget(redis_url):
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-pages", host_max_pages=10)
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2", "http://b.ex/1"]))
    _lease_all(f)
    assert sorted(f.pages_leased(limit=10)) == [1, 1]
    assert f.pages_leased(limit=0) is None  # more hosts than the limit: not read


def test_the_recrawl_schedule_is_read_through_the_frontier(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, "api-sched", partitions=1, budget=1.0)
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2"]))
    x = next(x for x in _lease_all(f) if x.host == "a.ex")
    fp = str(f.due.fingerprint("http://a.ex/1"))
    payload = pack_payload("/1", False, 0, [b"\0" * 36, "", 0, b"d" * 8])
    f.sync({0: Batch(release=[Release("a.ex", x.token, Host.OK, URL.RECRAWL, 0, -1, 60_000,
                                      payload, -1, 0)])})
    ((got, due),) = f.scheduled("a.ex", [fp])
    assert got == payload and due is not None and due > f.now_ms()
    assert f.scheduled("a.ex", [str(f.due.fingerprint("http://a.ex/2"))]) == [(None, None)]
    assert list(f.scheduled_payloads()) == [("a.ex", payload)]
    counts, new = f.schedule_population()
    assert counts == {0: 1} and new == 1
    leased, waited = f.recrawl_progress()
    assert leased == 1 and waited == 0.0


def test_nothing_outside_the_frontier_package_names_a_frontier_key():
    """The interface is the one way to the frontier's keys (crawlproj/ and
    middlewares/: the product; tests and benches may look at Redis directly)."""
    names = ("heap", "ready", "leases", "idle", "pending", "queue", "payloads",
             "recrawl_queue", "recrawl_ready", "queues_pattern", "payloads_pattern",
             "recrawl_queues_pattern", "fails", "host_records", "host_pages", "rate_buckets")
    pattern = r"\b(keyspace|ks)\.(" + "|".join(names) + r")\("
    found = subprocess.run(["git", "grep", "-nE", pattern, "--", "crawlproj", "middlewares",
                            ":!crawlproj/frontier/"], capture_output=True, text=True)
    assert found.stdout == ""


# -- the per-crawler components registry ---------------------------------------

class _Part:
    built = 0

    def __init__(self, crawler):
        type(self).built += 1
        self.crawler = crawler


def test_a_component_is_built_once_per_crawler():
    a, b = get_crawler(), get_crawler()
    one = component(a, _Part)
    assert component(a, _Part) is one and one.crawler is a
    other = component(b, _Part)
    assert other is not one and other.crawler is b
    assert registered(a, _Part) is one and registered(get_crawler(), _Part) is None


def test_a_registered_component_is_found_by_its_class_and_typed():
    crawler = get_crawler()
    part = register(crawler, _Part(crawler))
    assert registered(crawler, _Part) is part and component(crawler, _Part) is part
    try:
        register(crawler, object(), _Part)
    except TypeError:
        pass
    else:
        raise AssertionError("an object of another class was registered as _Part")
    assert registered(crawler, _Part) is part


def test_a_crawlers_components_go_with_it():
    import weakref

    crawler = get_crawler()
    part = component(crawler, _Part)
    gone = weakref.ref(part)
    del part, crawler
    gc.collect()
    assert gone() is None


def test_the_stores_and_the_scheduler_share_one_worker_id():
    from crawlproj.stores.common import WorkerId, worker_id

    crawler = get_crawler()
    register(crawler, WorkerId("h:1:x"))
    assert worker_id(crawler) == "h:1:x"
    fresh = get_crawler()
    assert worker_id(fresh) == worker_id(fresh) != worker_id(get_crawler())


def test_a_blocked_host_is_not_leased_until_its_block_ends_or_is_lifted(redis_url):
    """URLFrontier's BlockQueueUntil: a host blocked ready, waiting or leased
    is leased by nobody before the block's end; lifted, it is leased again."""
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-block", partitions=1)
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2", "http://b.ex/1", "http://c.ex/1"]))
    till = f.block("a.ex", 60_000)
    assert till > f.now_ms() + 50_000
    assert {x.host for x in _lease_all(f)} == {"b.ex", "c.ex"}  # a.ex ready, blocked
    assert _lease_all(f) == []
    view = f.host("a.ex")
    assert view.blocked_until_ms == till and view.next_contact_ms == till and view.queued == 2
    assert f.block("a.ex", 0) == 0  # lifted: back at once
    (x,) = _lease_all(f)
    assert x.host == "a.ex" and f.host("a.ex").blocked_until_ms is None
    # blocked while leased: the download runs on, the next waits for the block
    f.block("a.ex", 60_000)
    f.sync({x.partition: Batch(release=[Release("a.ex", x.token, Host.OK, URL.DONE, 0)])})
    assert _lease_all(f) == []
    f.block("a.ex", 1)  # a block that has passed leases as none
    time.sleep(0.01)
    assert [y.host for y in _lease_all(f)] == ["a.ex"]


def test_a_hosts_least_delay_holds_whatever_the_worker_asks(redis_url):
    """URLFrontier's SetDelay: a release asking 0 ms waits the operator's
    least delay; lifted, the worker's delay is the host's again."""
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-delay", partitions=1)
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2", "http://a.ex/3"]))
    assert f.set_delay("a.ex", 30_000) == 30_000 and f.host("a.ex").least_delay_ms == 30_000
    (x,) = _lease_all(f)
    f.sync({x.partition: Batch(release=[Release("a.ex", x.token, Host.OK, URL.DONE, 0)])})
    assert _lease_all(f) == []
    assert f.host("a.ex").next_contact_ms > f.now_ms() + 25_000
    f.set_delay("a.ex", 0)
    f.block("a.ex", 0)  # nothing to lift: the host waits on
    assert _lease_all(f) == [] and f.host("a.ex").least_delay_ms is None


def test_a_host_whose_lease_expired_waits_its_least_delay(redis_url):
    """A worker gone mid-download: its host comes back after the operator's
    least delay, not at once."""
    f = _frontier(redis_lib.Redis.from_url(redis_url), "api-delay-expired", partitions=1,
                  lease_ttl=0.05)
    f.put_urls(_entries(f, ["http://a.ex/1", "http://a.ex/2"]))
    f.set_delay("a.ex", 30_000)
    assert [x.host for x in _lease_all(f)] == ["a.ex"]
    time.sleep(0.1)
    assert _lease_all(f) == []  # expired, back on the heap for the delay
    assert f.host("a.ex").next_contact_ms > f.now_ms() + 25_000
