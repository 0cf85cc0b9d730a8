"""bench/scale_bench.py's pure helpers: which structure a key belongs to, the
server's CPU per page split from INFO commandstats, and the capacity sums
docs/scale.md is built on. No server: the bench measures, these only count."""

from __future__ import annotations

import importlib
import sys

import pytest

from crawlproj.redis.keyspace import Keyspace
from tests.e2e import ROOT


@pytest.fixture
def scale_bench(monkeypatch):
    # crawl_bench, which scale_bench imports, puts the code under test (--src)
    # first on sys.path: here the work tree itself, and sys.path is restored after
    monkeypatch.setattr(sys, "argv", ["scale_bench.py", "--src", "worktree"])
    monkeypatch.setattr(sys, "path", [str(ROOT / "bench"), *sys.path])
    return importlib.import_module("scale_bench")


def test_every_key_of_a_crawl_is_filed_under_its_structure(scale_bench):
    ks = Keyspace("c", 12)  # partitions 1 and 10: one prefix must not swallow the other
    expected = {}
    for p in (1, 10):
        expected.update({
            ks.queue(p, "h.example"): "frontier queues",
            ks.payloads(p, "h.example"): "frontier queues",
            ks.heap(p): "frontier host state", ks.leases(p): "frontier host state",
            ks.stats(p): "frontier host state",
            ks.due(p): "DUE (exact)",
            ks.seen_pattern(p)[:-1] + "3:5": "DUE (exact)",
            ks.bloom_pattern(p, 2)[:-1] + "7": "DUE (bloom)",
            ks.pagemeta(p, 4095): "page metadata",
            ks.links(p): "link store working set", ks.link_segments(p): "link store working set",
            ks.robots(p, "h.example"): "robots.txt rules",
            ks.trap_hashes(p, "h.example"): "trap guard", ks.trapped(p): "trap guard",
            ks.recrawl_queue(p, "h.example"): "recrawl schedule",
            ks.content(p): "content-seen", ks.sketch(p + 12): "content-seen",
            ks.near_band(p + 24): "content-seen",
        })
    expected[ks.index_queue] = "index hand-over"
    expected[ks.meta] = "crawl-wide"
    expected[ks.worker("w1")] = "crawl-wide"
    expected[Keyspace("other", 1).heap(0)] = "other"
    filed = scale_bench.classify(expected, ks)
    got = {key: kind for kind, keys in filed.items() for key in keys}
    assert got == expected


def test_the_servers_cpu_per_page_is_split_into_scripts_commands_and_the_rest(scale_bench):
    # commandstats: 10 script calls (1,000 us with the HSETs they ran), 30 HSETs
    # of which the clients sent 10, 5 RPUSHes all from clients, and the bench's INFO
    commands = {"evalsha": (10, 1000), "hset": (30, 300), "rpush": (5, 50), "info": (3, 99)}
    clients = {"EVALSHA": 10, "HSET": 10, "RPUSH": 5}
    got = scale_bench.per_page_cpu(0.002, commands, clients, pages=10)
    assert got["us_per_page"] == 200.0
    assert got["scripts_us_per_page"] == 100.0
    assert got["direct_commands_us_per_page"] == 15.0  # 300 x 10/30 + 50, per page
    assert got["rest_us_per_page"] == 85.0
    assert got["direct_by_command_us_per_page"] == {"hset": 10.0, "rpush": 5.0}
    assert got["script_calls_per_page"] == 1.0
    assert "info" not in got["usec_by_command_per_page"]


def test_capacity_is_cores_over_cpu_per_page_shared_by_the_busiest_core(scale_bench):
    assert scale_bench.capacity(50.0, 1, 100.0) == {"pages_per_s": 20000, "workers": 200.0}
    # three cores, the busiest carrying half the work: 3 x (1/3)/(1/2) = 2 cores' worth
    assert scale_bench.capacity(50.0, 3, 100.0, (1 / 3) / 0.5) == {"pages_per_s": 40000,
                                                                   "workers": 400.0}


def test_the_projection_takes_the_default_stack_and_the_clusters_measured_overhead(scale_bench):
    def frontier(setup, partitions, enq, lease, shares=(1.0,)):
        return {"phase": "frontier", "setup": setup, "partitions": partitions, "clients": 1,
                "enqueue": {"server_cpu_us_per_url": enq, "per_server_share": list(shares)},
                "lease_release": {"server_cpu_us_per_lease": lease}}

    rows = [
        {"phase": "crawl", "config": "cp1", "pages_per_s": 300.0, "worker_cpu_s": [9.0],
         "server": {"us_per_page": 20.0}},
        {"phase": "crawl", "config": "full1", "pages_per_s": 100.0, "worker_cpu_s": [9.0],
         "server": {"us_per_page": 40.0}},
        {"phase": "crawl", "config": "full2", "pages_per_s": 280.0, "worker_cpu_s": [9.0, 9.0],
         "server": {"us_per_page": 60.0}},  # two workers: 140 pages/s each
        {"phase": "frontier", "spread": {"16 primaries": {
            "partitions": 32, "over_crawl_ids": {"busiest_share_mean": 0.125}}}},
        frontier("single-1", 1, 6.0, 14.0),
        frontier("single-9", 9, 7.0, 17.0),       # 1.2x single-1
        frontier("single-32", 32, 9.0, 21.0),     # 1.5x single-1
        frontier("cluster3-9", 9, 9.0, 21.0, (0.4, 0.3, 0.3)),  # 1.5x single-1, 1.25x single-9
        frontier("cluster3-9", 9, 99.0, 99.0, (0.9, 0.1, 0.0)) | {"clients": 8},  # not 1 client
    ]
    got = scale_bench.project(rows)
    assert (got["us_per_page"], got["pages_per_worker_s"]) == (50.0, 120.0)
    assert got["one core"] == {"pages_per_s": 20000, "workers": 166.7}
    assert got["cluster_cpu_per_op_over_single"] == 1.5
    # 75 us a page on three cores, the busiest at 0.4 of the work
    assert got["3 primaries"]["pages_per_s"] == round(3 * (1 / 3) / 0.4 * 1e6 / 75)
    # 16: 1.5 (32 partitions) x 1.25 (the cluster over one server) = 1.875 x 50 us,
    # the busiest primary at 0.125
    assert got["16 primaries"]["cpu_per_op_over_single"] == 1.88
    assert got["16 primaries"]["pages_per_s"] == round(16 * (1 / 16) / 0.125 * 1e6 / (50 * 1.875))
