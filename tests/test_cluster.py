"""The frontier on a real Redis Cluster: three valkey nodes on loopback.

Every key of a frontier partition carries the partition's hash tag, so each
sync script runs atomically on the node holding that slot, and one worker's
pipeline fans out over the nodes. Same tests as on a single server: the core
on many partitions, and workers crawling the simulated web.
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from pathlib import Path

import pytest
import redis
import redis.cluster
from scrapy.utils.test import get_crawler

from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb.testing import SimWebServer
from crawlproj.spiders.web import WebSpider
from crawlproj.urls import host_of
from tests.conftest import RedisServer
from tests.e2e import Workers, stat
from tests.test_crawl_e2e import WEB, assert_fetched_once_and_politely, expected

pytestmark = pytest.mark.cluster

SLOTS = 16384


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def cluster_ports(n: int) -> list[int]:
    """n ports whose cluster bus ports (port + 10000) are free too, all below
    the ephemeral range: a bus port found free there could be taken by an
    outgoing connection's local port before its node binds it."""
    out = []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        room = max(1, _ephemeral_low() - 10000 - 5000 - 10000)
        start = 10000 + s.getsockname()[1] % room
    for port in range(start, start + 5000):
        if _free(port) and _free(port + 10000):
            out.append(port)
            if len(out) == n:
                return out
    pytest.fail(f"no {n} free ports with free bus ports among {start}-{start + 4999}: "
                "loopback ports are exhausted", pytrace=False)


def start_cluster(directory: Path, n: int = 3) -> list[RedisServer]:
    """n primaries on loopback sharing the slots evenly, returned once the
    cluster is up; the caller stops them (bench/partitions_bench.py too)."""
    nodes = []
    try:
        for i, port in enumerate(cluster_ports(n)):
            nodes.append(RedisServer(directory / f"node{i}", port=port, appendonly=False,
                                     extra={"cluster-enabled": "yes",
                                            "cluster-config-file": "nodes.conf",
                                            "cluster-node-timeout": "5000"}))
        clients = [node.client() for node in nodes]
        per = SLOTS // len(nodes)
        for i, c in enumerate(clients):
            last = SLOTS - 1 if i == len(nodes) - 1 else (i + 1) * per - 1
            c.execute_command("CLUSTER ADDSLOTSRANGE", i * per, last)
        for node in nodes[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(c.cluster("info")["cluster_state"] == "ok" for c in clients):
                return nodes
            time.sleep(0.2)
        raise AssertionError("cluster did not come up")
    except BaseException:
        for node in nodes:
            node.stop()
        raise


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory):
    nodes = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield nodes[0].url.rsplit("/", 1)[0]
    finally:
        for node in nodes:
            node.stop()


def test_partitions_spread_over_nodes_and_each_script_is_atomic(cluster_url):
    rc = redis.cluster.RedisCluster.from_url(cluster_url)
    rc.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
    f = Frontier(rc, Keyspace.open(rc, "cl", 16))
    nodes = {rc.get_node_from_key(f.prefix(p)).name for p in range(16)}
    assert len(nodes) == 3  # the hash tags spread the partitions
    urls = [f"http://h{h}.ex/{i}" for h in range(60) for i in range(5)]
    batches: dict[int, Batch] = {}
    for i, u in enumerate(urls):
        host = host_of(u)
        batches.setdefault(f.partition_of(host), Batch()).enqueue.append(
            f.entry(host, u, i, u.encode()))
    res = f.sync(batches)
    assert sum(r.added for r in res.values()) == 300
    assert sum(r.duplicates for r in f.sync(batches).values()) == 300
    assert f.rescore(lambda fps: [-1.0] * len(fps))["changed"] == 300  # the ranker's path
    got, rounds = [], 0
    while len(got) < 300 and rounds < 20:
        leased = [x for r in f.sync({p: Batch(lease=100) for p in range(16)}).values()
                  for x in r.leased]
        assert len({x.host for x in leased}) == len(leased)  # one URL per host at a time
        got += leased
        rel: dict[int, Batch] = {}
        for x in leased:
            rel.setdefault(x.partition, Batch()).release.append(Release(x.host, x.token, Host.OK, URL.DONE))
        f.sync(rel)
        rounds += 1
    assert sorted(x.payload.decode() for x in got) == sorted(urls)
    st = f.status()
    assert (st.queued, st.hosts_leased) == (0, 0)


def test_a_new_crawl_gets_a_few_partitions_per_primary_spread_evenly(cluster_url):
    """FRONTIER_PARTITIONS None on a cluster of three primaries: 6 to 11
    partitions, keys of each on every primary, the count with the most even
    spread (the fewest on a tie), fixed for the crawl by its first process."""
    rc = redis.cluster.RedisCluster.from_url(cluster_url)
    rc.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
    primaries = rc.get_primaries()
    n = Keyspace.fitted_partitions(rc, "fit")
    assert 2 * len(primaries) <= n < 4 * len(primaries)
    keyspace = Keyspace.open(rc, "fit", n)
    for p in range(n):
        rc.set(keyspace.prefix(p) + "probe", p)
    held = [len(redis.Redis(host=node.host, port=node.port).keys("*:probe")) for node in primaries]
    assert sum(held) == n and min(held) >= 1  # where the keys went: every primary

    def busiest(count):  # the largest share of the partitions on one primary
        per = SLOTS // 3  # the fixture's slot ranges
        on = Counter(min(rc.keyslot(Keyspace("fit", count).prefix(p)) // per, 2)
                     for p in range(count))
        return max(on.values()) / count if len(on) == 3 else 1.0

    shares = {count: busiest(count) for count in range(6, 12)}
    assert shares[n] == min(shares.values())
    assert all(shares[c] > shares[n] for c in range(6, n))
    settings = get_crawler(WebSpider, {"CRAWL_ID": "fit", "REDIS_CLUSTER": True}).settings
    assert Keyspace.from_settings(settings, rc) == Keyspace("fit", n)


@pytest.mark.e2e
def test_workers_crawl_on_a_cluster(cluster_url, tmp_path):
    """With the partition count the crawl's first worker fits to the cluster."""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds, reachable = expected(sw)
        workers = Workers(sw, cluster_url + "/0", tmp_path, seeds, "onclus", {
            "FRONTIER_DELAY_FACTOR": 2.0, "RETRY_TIMES": 1, "REDIS_CLUSTER": "true"})
        workers.start(2)
        assert workers.wait() == [0, 0]
        assert_fetched_once_and_politely(sw, reachable)
        assert all(stat(workers.log(i), "frontier/released") > 0 for i in range(2))
        rc = redis.cluster.RedisCluster.from_url(cluster_url)
        partitions = Keyspace.fitted_partitions(rc, "onclus")
        assert Keyspace.existing(rc, "onclus") == Keyspace("onclus", partitions)
        assert all(f"crawl 'onclus', {partitions} partition(s)" in workers.log(i) for i in range(2))
