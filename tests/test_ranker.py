"""The ranker on a real server: PageRank of the stored link graph rewrites the
frontier's queued priorities; its lock passes on when its holder is killed;
and inside a crawl it runs while workers fetch."""

from __future__ import annotations

import signal
import subprocess
import sys

import networkx as nx
import pytest
import redis

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.due.urlseen import DueConfig
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.ranker.extension import RankerCadence
from crawlproj.ranker.loop import Ranker, RankerLock
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from crawlproj.stores.linkstore import LinkStore, encode_page
from crawlproj.urls import host_of
from tests.e2e import ROOT, Workers, stat, wait_for


def url(i: int) -> str:
    return f"http://h{i % 4}.ex/p{i}"


# crawled pages 0..3 and their links; 4..9 are known only as link targets
LINKS = {0: [1, 2, 4, 5], 1: [2, 6, 7], 2: [0, 6, 8], 3: [6, 9, 2]}


def frontier_of(r, crawl, partitions=1, **kw) -> Frontier:
    return Frontier(r, Keyspace.open(r, crawl, partitions), **kw)


def store_links(r, f, tmp_path, links=LINKS) -> LinkStore:
    store = LinkStore(r, f.keyspace, tmp_path / "links")
    entries = []
    for src, dsts in links.items():
        value, _ = encode_page(url(src), 1.0, [{"url": url(d), "anchor": ""} for d in dsts])
        entries.append((f.partition_of(host_of(url(src))), value))
    store.append(entries)
    return store


def queue(f: Frontier, nodes):
    batches: dict[int, Batch] = {}
    for i in nodes:
        h = host_of(url(i))
        batches.setdefault(f.partition_of(h), Batch()).enqueue.append(
            f.entry(h, url(i), 0.0, url(i).encode()))
    f.sync(batches)


def expected_ranks(links=LINKS, d=0.9) -> dict[str, float]:
    g = nx.DiGraph()
    for s, ts in links.items():
        g.add_edges_from((url(s), url(t)) for t in ts)
    pr = nx.pagerank(g, alpha=d, tol=1e-12, max_iter=1000)
    n = g.number_of_nodes()
    cho = {u: v * n for u, v in pr.items()}  # Cho's scale: mean 1
    # what the ranker writes solves IR = (1 - d) + d sum IR(T)/c(T) without the
    # dangling pages' share, as the estimate for new URLs does: a rescaling
    dangling = sum(v for u, v in cho.items() if g.out_degree(u) == 0) / n
    factor = (1 - d) / ((1 - d) + d * dangling)
    return {u: v * factor for u, v in cho.items()}


def test_ranker_rewrites_queued_scores_with_pagerank(redis_url, tmp_path):
    r = redis.Redis.from_url(redis_url)
    f = frontier_of(r, "rank", partitions=2)
    store = store_links(r, f, tmp_path)
    queue(f, [4, 5, 6, 7, 8, 9])
    ranker = Ranker(f, store, damping=0.9, tol=1e-10)
    run = ranker.run_once()
    assert (run.nodes, run.edges, run.queued, run.changed) == (10, 13, 6, 6)
    want = expected_ranks()
    got = {}
    for p in range(2):
        for h in f.queued_hosts(p):
            for fp, score in r.zrange(f.keyspace.queue(p, h), 0, -1, withscores=True):
                got[int(fp)] = -score
    for i in [4, 5, 6, 7, 8, 9]:
        assert got[url_fingerprint(url(i))] == pytest.approx(want[url(i)], abs=1e-6)
    # warm start: a second run on the same graph converges at once, also in
    # another process, from the vector the first one kept
    ranker.save(tmp_path / "vector.npz")
    later = Ranker(f, store, damping=0.9, tol=1e-10)
    later.load(tmp_path / "vector.npz")
    again = later.run_once()
    assert again.iterations <= 2 and again.changed == 0
    for kept in (tmp_path / "no-such.npz", tmp_path / "empty.npz", tmp_path / "cut.npz"):
        if kept.name == "empty.npz":
            kept.write_bytes(b"")
        elif kept.name == "cut.npz":
            kept.write_bytes((tmp_path / "vector.npz").read_bytes()[:100])
        cold = Ranker(f, store, damping=0.9, tol=1e-10)
        cold.load(kept)  # a run starts cold, never fails on it
        assert cold.run_once().iterations > 2


def test_cross_host_only_ignores_links_within_a_host(redis_url, tmp_path):
    r = redis.Redis.from_url(redis_url)
    f = frontier_of(r, "xhost")
    # url(i) is on host h(i mod 4): 0 -> 4 and 0 -> 8 stay on h0, 1 -> 4 crosses
    links = {0: [4, 8], 1: [4]}
    store = store_links(r, f, tmp_path, links)
    queue(f, [4, 8])
    Ranker(f, store, cross_host_only=True, tol=1e-10).run_once()
    s = dict(r.zrange(f.keyspace.queue(0, "h0.ex"), 0, -1, withscores=True))
    # only 1 -> 4 counts: 4 ranks above 8, which only a same-host link reaches
    assert s[str(url_fingerprint(url(4))).encode()] < s[str(url_fingerprint(url(8))).encode()]


def test_nofollow_links_give_no_credit(redis_url, tmp_path):
    """A link marked nofollow (crawlproj/robots/meta.py) counts for nothing,
    in Redis and in a segment: the ranks are those of the graph without it."""
    r = redis.Redis.from_url(redis_url)
    f = frontier_of(r, "nofollow")
    store = LinkStore(r, f.keyspace, tmp_path / "links", segment_pages=2)
    marked = {(0, 4), (1, 6), (3, 6)}
    for src, dsts in LINKS.items():
        value, _ = encode_page(url(src), 1.0, [{"url": url(d), "anchor": "", "nofollow": (src, d) in marked}
                                               for d in dsts])
        store.append([(0, value)])
    assert store.compact(0) == 2  # two pages in a segment, two in Redis
    queue(f, [4, 5, 6, 7, 8, 9])
    run = Ranker(f, store, damping=0.9, tol=1e-10).run_once()
    assert run.edges == 13 - len(marked)
    followed = {s: [d for d in ds if (s, d) not in marked] for s, ds in LINKS.items()}
    want = expected_ranks(followed)
    got = {int(fp): -score for h in f.queued_hosts(0)
           for fp, score in r.zrange(f.keyspace.queue(0, h), 0, -1, withscores=True)}
    for i in [5, 6, 7, 8, 9]:  # 4 is linked by nofollow alone: no node of the graph
        assert got[url_fingerprint(url(i))] == pytest.approx(want[url(i)], abs=1e-6)


def test_the_ranker_reads_the_crawls_fingerprint_width_and_fixes_nothing(redis_url, tmp_path):
    r = redis.Redis.from_url(redis_url)
    keyspace = Keyspace.open(r, "width")
    # a ranker started before any worker leaves the DUE's configuration to them
    ranker = Ranker(Frontier(r, keyspace), LinkStore(r, keyspace, tmp_path / "links"))
    assert r.hget(keyspace.meta, "due") is None
    # a worker then fixes 128-bit fingerprints, which are not the link store's node ids
    Frontier(r, keyspace, due=DueConfig(bits=128))
    with pytest.raises(CrawlprojError, match="64-bit"):
        ranker.run_once()
    with pytest.raises(CrawlprojError, match="64-bit"):
        Ranker(Frontier(r, keyspace), LinkStore(r, keyspace, tmp_path / "links"))


def rank_process(redis_url, crawl_id, log_path, ttl="2"):
    env = {"REDIS_URL": redis_url, "CRAWL_ID": crawl_id, "PYTHONUNBUFFERED": "1",
           "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "scrapy", "rank", "--interval", "0.5",
           "-s", f"RANKER_LOCK_TTL={ttl}", "-s", "LOG_LEVEL=INFO"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log_path, "wb"),
                            stderr=subprocess.STDOUT)


@pytest.mark.faults
def test_lock_passes_to_another_ranker_when_its_holder_is_killed(redis_url, tmp_path):
    r = redis.Redis.from_url(redis_url)
    Keyspace.agree(r, "lock", 1, prioritizer="pagerank")  # `scrapy rank` ranks such a crawl
    f = frontier_of(r, "lock")
    queue(f, [4])
    lock = RankerLock(r, f.keyspace)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    a = rank_process(redis_url, "lock", logs[0])
    try:
        assert wait_for(lambda: "Ranker lock taken" in logs[0].read_text()), logs[0].read_text()
        b = rank_process(redis_url, "lock", logs[1])
        try:
            assert wait_for(lambda: "waiting" in logs[1].read_text()), logs[1].read_text()
            holder = lock.holder()
            a.send_signal(signal.SIGKILL)
            a.wait()
            assert wait_for(lambda: "Ranker lock taken" in logs[1].read_text())
            assert lock.holder() not in (None, holder)
            assert wait_for(lambda: logs[1].read_text().count("Ranker: ") >= 1)
        finally:
            b.send_signal(signal.SIGINT)
            b.wait(30)
        assert lock.holder() is None  # released on Ctrl-C
    finally:
        if a.poll() is None:
            a.kill()


@pytest.mark.e2e
def test_ranker_runs_inside_a_pagerank_crawl(redis_url, tmp_path):
    web = {"seed": 4, "hosts": 40, "pages": 600, "page_bytes": 500, "latency_ms": 2}
    with SimWebServer(web, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        workers = Workers(sw, redis_url, tmp_path, seeds, "prcrawl", {
            "FRONTIER_PRIORITIZER": "pagerank", "FRONTIER_DELAY_FACTOR": 1,
            "RANKER_TICK": 0.2, "RANKER_INTERVAL": 0.5, "CONCURRENT_REQUESTS": 4})
        workers.start(2)
        assert workers.wait() == [0, 0]
        runs = [stat(workers.log(i), "ranker/runs") for i in range(2)]
        assert sum(runs) > 0
        assert sum(stat(workers.log(i), "ranker/rescored") for i in range(2)) > 0
        assert sum(stat(workers.log(i), "ranker/errors") for i in range(2)) == 0
        assert set(checks.fetch_counts(sw.read_log())) == sw.web.reachable(seeds)
        # each run in a process of its own, which returns the graph's memory
        # when it exits: never in the worker's
        ran = [line.split("Ranker process ", 1)[1].split()[:4] for i in range(2)
               for line in workers.log(i).splitlines() if "Ranker process " in line]
        assert len(ran) == sum(runs)
        assert all(pid != parent for pid, _, _, parent in ran)


def test_cadence_keeps_pace_with_the_crawls_growth():
    """RANKER_GROWTH 0.5: a run once the leased URLs have grown by half since the
    last run, whatever the clock says (RANKER_INTERVAL out of reach)."""
    c = RankerCadence(interval=86400.0, growth=0.5)
    now = c.last_run
    assert not c.due(0, now)
    assert c.due(1, now)  # the crawl's first URL: the estimates have nothing yet
    c.ran(1, now)
    assert not c.due(1, now)
    assert c.due(2, now)
    c.ran(100, now)
    assert not c.due(149, now)
    assert c.due(150, now)
    # the interval still counts, and RANKER_EVERY_PAGES alone when growth is off
    assert c.due(100, now + 86400.0)
    fixed = RankerCadence(interval=86400.0, every_pages=30)
    fixed.ran(1000, now)
    assert not fixed.due(1029, now) and fixed.due(1030, now)
    assert not RankerCadence(interval=86400.0).counts_pages


def test_a_long_run_rests_nine_times_its_length_before_the_interval_counts():
    """The interval brings a run only once the last one's length, nine times
    over, has passed: the ranker takes at most a tenth of the time however
    large the graph (and the queue it rescores) grows. Growth still counts."""
    c = RankerCadence(interval=60.0, growth=0.1)
    now = c.last_run
    c.ran(1000, now, seconds=2.0)
    assert c.due(1000, now + 60.0)           # a short run: the interval as set
    c.ran(1000, now, seconds=30.0)
    assert not c.due(1000, now + 60.0)       # 30 s long: 270 s of rest first
    assert not c.due(1000, now + 269.0)
    assert c.due(1000, now + 270.0)
    assert c.due(1100, now + 1.0)            # the graph grew by a tenth


def ranker_nodes(log: str) -> list[int]:
    """The graph size of each ranker run, from the worker's log lines."""
    return [int(line.split("Ranker: ", 1)[1].split(" nodes", 1)[0].replace(",", ""))
            for line in log.splitlines() if "Ranker: " in line and " nodes" in line]


@pytest.mark.e2e
def test_ranker_runs_early_in_a_crawl_shorter_than_its_interval(redis_url, tmp_path):
    """With RANKER_INTERVAL out of the crawl's reach, the growth rule alone runs
    the ranker, and its first run ranks a graph of less than half the web: the
    pages fetched first are ordered by PageRank, not by the enqueue-time
    estimates only (docs/ordering.md, "Live, polite crawls")."""
    web = {"seed": 4, "hosts": 40, "pages": 600, "page_bytes": 500}
    with SimWebServer(web, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(1)
        workers = Workers(sw, redis_url, tmp_path, seeds, "prgrowth", {
            "FRONTIER_PRIORITIZER": "pagerank", "FRONTIER_DELAY_FACTOR": 0,
            "RANKER_TICK": 0.1, "RANKER_INTERVAL": 86400, "CONCURRENT_REQUESTS": 2})
        workers.start(1)
        assert workers.wait() == [0]
        fetched = len(checks.fetch_counts(sw.read_log()))
        log = workers.log(0)
        nodes = ranker_nodes(log)
        assert stat(log, "ranker/runs") == len(nodes) >= 2
        assert nodes[0] < fetched / 2, (nodes, fetched)
