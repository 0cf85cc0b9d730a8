"""A crawl's record and the guard rails built on it.

The first process that adds URLs to a crawl fixes its partitions, prioritizer
and DUE configuration in the crawl's meta hash; a later worker (or `scrapy
seed`) that differs in any of the first three refuses to join, naming each
difference. Tools given a crawl id that names no crawl refuse it rather than
create an empty crawl; `scrapy rank` refuses a crawl whose prioritizer is not
pagerank unless forced; `scrapy crawls list|delete` shows and removes crawls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from scrapy.utils.test import get_crawler

from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import URL, Batch, CrawlMismatch, Frontier, Host, Release, join
from crawlproj.redis.keyspace import Keyspace
from crawlproj.spiders.web import WebSpider
from crawlproj.stores.linkstore import LinkStore, encode_page
from crawlproj.urls import host_of
from tests.test_bad_inputs import one_line

ROOT = Path(__file__).resolve().parents[1]


def settings(crawl_id="c", **own):
    return get_crawler(WebSpider, {"CRAWL_ID": crawl_id, **own}).settings


def scrapy(*args, redis_url, **env):
    base = {k: v for k, v in os.environ.items()
            if k not in ("REDIS_URL", "CRAWL_DATA_DIR", "CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT,
                          env={**base, "REDIS_URL": redis_url, **env},
                          capture_output=True, text=True, timeout=120)


def refusal(run) -> str:
    """The one line (tests/test_bad_inputs.py) of a command that refused, exit status 2."""
    assert run.returncode == 2, run.stderr
    return one_line(run)


# -- joining a crawl -------------------------------------------------------------------

def test_the_first_process_records_the_crawl_later_ones_must_match(redis_url):
    r = redis.Redis.from_url(redis_url)
    first = settings(FRONTIER_PARTITIONS=4, FRONTIER_PRIORITIZER="opic", DUE_MODE="bloom",
                     DUE_BLOOM_CAPACITY=1000)
    assert join(first, r) == Keyspace("c", 4)
    record = Keyspace.record(r, "c")
    assert (record["partitions"], record["prioritizer"]) == ("4", "opic")
    assert json.loads(record["due"])["mode"] == "bloom"
    # the same settings join, also with the prioritizer named by its class path
    same = settings(FRONTIER_PARTITIONS=4, DUE_MODE="bloom", DUE_BLOOM_CAPACITY=1000,
                    FRONTIER_PRIORITIZER="crawlproj.prioritizers.links.OPIC")
    assert join(same, r) == Keyspace("c", 4)
    # each difference is named, with the crawl's value and this process's
    for own, said in [
        ({"FRONTIER_PARTITIONS": 2}, "FRONTIER_PARTITIONS 4 (not 2)"),
        ({"FRONTIER_PRIORITIZER": "bfs"}, "FRONTIER_PRIORITIZER opic (not bfs)"),
        ({"DUE_MODE": "exact"}, "DUE_MODE bloom (not exact)"),
    ]:
        other = settings(**{"FRONTIER_PARTITIONS": 4, "FRONTIER_PRIORITIZER": "opic",
                            "DUE_MODE": "bloom", "DUE_BLOOM_CAPACITY": 1000, **own})
        with pytest.raises(CrawlMismatch) as info:
            join(other, r)
        assert str(info.value) == (f"crawl 'c' runs with {said}: give this process the "
                                   "crawl's settings, or another CRAWL_ID")
        assert isinstance(info.value, CrawlprojError)
    with pytest.raises(CrawlMismatch, match="FRONTIER_PARTITIONS 4 \\(not 1\\) and "
                                            "FRONTIER_PRIORITIZER opic \\(not bfs\\) and "
                                            "DUE_MODE bloom \\(not exact\\): "):
        join(settings(FRONTIER_PARTITIONS=1), r)
    # FRONTIER_PARTITIONS unset (the default) adopts the crawl's count
    with pytest.raises(CrawlMismatch, match="runs with FRONTIER_PRIORITIZER opic \\(not bfs\\) and "
                                            "DUE_MODE bloom \\(not exact\\): "):
        join(settings(), r)
    assert Keyspace.record(r, "c") == record  # refusals change nothing


def test_a_worker_with_another_prioritizer_refuses_to_join_in_one_line(redis_url, tmp_path):
    r = redis.Redis.from_url(redis_url)
    run = scrapy("seed", "http://a.example/", redis_url=redis_url, CRAWL_ID="joined")
    assert run.returncode == 0, run.stderr
    before = sorted(r.scan_iter())
    run = scrapy("crawl", "web", "-s", "FRONTIER_PRIORITIZER=pagerank", redis_url=redis_url,
                 CRAWL_ID="joined", CRAWL_DATA_DIR=str(tmp_path))
    assert refusal(run) == ("crawlproj: crawl 'joined' runs with FRONTIER_PRIORITIZER bfs (not "
                            "pagerank): give this process the crawl's settings, or another "
                            "CRAWL_ID")
    assert sorted(r.scan_iter()) == before and not (tmp_path / "warc").exists()
    # seeding is adding URLs too: the same rule
    run = scrapy("seed", "http://b.example/", "-s", "DUE_MODE=bloom", redis_url=redis_url,
                 CRAWL_ID="joined")
    assert refusal(run) == ("crawlproj: crawl 'joined' runs with DUE_MODE exact (not bloom): "
                            "give this process the crawl's settings, or another CRAWL_ID")


# -- tools and crawl ids ---------------------------------------------------------------

def test_rank_refuses_a_crawl_that_does_not_exist_and_creates_none(redis_url):
    run = scrapy("rank", "--once", redis_url=redis_url, CRAWL_ID="typo")
    assert refusal(run) == ("crawlproj: no crawl 'typo' on this server (`scrapy crawls list` "
                            "shows the crawls there are)")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_tools_refuse_a_crawl_that_does_not_exist(redis_url, tmp_path):
    for args in (["frontier", "--crawl-id", "typo"], ["crawls", "delete", "typo", "--yes"],
                 ["export-graph", str(tmp_path / "out"), "--crawl-id", "typo"]):
        assert refusal(scrapy(*args, redis_url=redis_url)) == (
            "crawlproj: no crawl 'typo' on this server (`scrapy crawls list` shows the crawls "
            "there are)")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def rank_ready(r, crawl_id: str, prioritizer: str | None) -> None:
    """A crawl of `prioritizer` with one queued URL and a link to it."""
    fields = {} if prioritizer is None else {"prioritizer": prioritizer}
    keyspace, _ = Keyspace.agree(r, crawl_id, 1, **fields)
    f = Frontier(r, keyspace)
    f.sync({0: Batch(enqueue=[f.entry("b.ex", "http://b.ex/", 0.0, b"x")])})
    LinkStore(r, keyspace, Path("unused")).append(
        [(0, encode_page("http://a.ex/", 1.0, [{"url": "http://b.ex/", "anchor": ""}])[0])])


@pytest.mark.parametrize("prioritizer", ["bfs", None])
def test_rank_refuses_a_crawl_of_another_prioritizer_unless_forced(redis_url, prioritizer):
    r = redis.Redis.from_url(redis_url)
    rank_ready(r, "bfs", prioritizer)
    queue = Keyspace("bfs", 1).queue(0, "b.ex")
    run = scrapy("rank", "--once", "--crawl-id", "bfs", redis_url=redis_url)
    said = prioritizer or "a prioritizer it did not record"
    assert refusal(run) == (f"crawlproj: crawl 'bfs' orders its frontier by {said}, not "
                            "pagerank: ranking would overwrite its priorities with PageRank; "
                            "--force to rank it all the same")
    assert r.zrange(queue, 0, -1, withscores=True)[0][1] == 0.0  # untouched
    run = scrapy("rank", "--once", "--crawl-id", "bfs", "--force", redis_url=redis_url)
    assert run.returncode == 0, run.stderr
    assert r.zrange(queue, 0, -1, withscores=True)[0][1] < 0  # PageRank's score now


def test_rank_ranks_a_pagerank_crawl(redis_url):
    r = redis.Redis.from_url(redis_url)
    rank_ready(r, "pr", "pagerank")
    run = scrapy("rank", "--once", redis_url=redis_url, CRAWL_ID="pr")
    assert run.returncode == 0, run.stderr
    assert r.zrange(Keyspace("pr", 1).queue(0, "b.ex"), 0, -1, withscores=True)[0][1] < 0


# -- scrapy crawls list|delete ---------------------------------------------------------

def test_crawls_list_shows_each_crawl_and_changes_nothing(redis_url):
    r = redis.Redis.from_url(redis_url)
    run = scrapy("crawls", "list", redis_url=redis_url)
    assert run.returncode == 0 and run.stdout.strip() == "no crawls on this server"
    join(settings("one", FRONTIER_PARTITIONS=2, FRONTIER_PRIORITIZER="opic"), r)
    f = Frontier.from_settings(settings("two", DUE_MODE="bloom", DUE_BLOOM_CAPACITY=1000), r)
    entries = [f.entry(host_of(u), u, 0.0, b"x") for u in ("http://a.ex/", "http://a.ex/2")]
    f.sync({0: Batch(enqueue=entries)})
    f.sync({0: Batch(lease=1)})
    keys = {k: r.dump(k) for k in r.scan_iter()}
    run = scrapy("crawls", "list", "--json", redis_url=redis_url)
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)
    assert [(c["crawl_id"], c["partitions"], c["prioritizer"], c["due_mode"], c["queued"],
             c["enqueued"], c["leased"], c["live_leases"]) for c in rows] == [
        ("one", 2, "opic", "exact", 0, 0, 0, 0), ("two", 1, "bfs", "bloom", 1, 2, 1, 1)]
    run = scrapy("crawls", "list", redis_url=redis_url)
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["crawl", "created", "(UTC)", "partitions", "prioritizer", "DUE",
                                "queued", "enqueued", "leased", "live", "leases"]
    assert [ln.split()[:1] + ln.split()[3:] for ln in lines[1:]] == [
        ["one", "2", "opic", "exact", "0", "0", "0", "0"],
        ["two", "1", "bfs", "bloom", "1", "2", "1", "1"]]
    assert {k: r.dump(k) for k in r.scan_iter()} == keys  # read only


def test_crawls_delete_asks_for_yes_refuses_a_running_crawl_and_keeps_others(redis_url,
                                                                             tmp_path):
    r = redis.Redis.from_url(redis_url)
    data = {"CRAWL_DATA_DIR": str(tmp_path)}
    kept = Frontier.from_settings(settings("kept", FRONTIER_PARTITIONS=2), r)
    kept.sync({kept.partition_of("a.ex"): Batch(enqueue=[kept.entry("a.ex", "http://a.ex/", 0,
                                                                    b"x")])})
    gone = Frontier.from_settings(settings("gone", FRONTIER_PARTITIONS=3), r)
    url = "http://b.ex/"
    p = gone.partition_of("b.ex")
    gone.sync({p: Batch(enqueue=[gone.entry("b.ex", url, 0, b"x")])})
    # a link-store segment on this machine
    store = LinkStore(r, gone.keyspace, LinkStore.directory_of(settings("gone", **data), "gone"),
                      segment_pages=1)
    store.append([(p, encode_page(url, 1.0, [{"url": "http://c.ex/"}])[0])])
    assert store.compact(p) == 1
    files = list(LinkStore.directory_of(settings("gone", **data), "gone").iterdir())
    assert len(files) == 3
    kept_keys = {k: r.dump(k) for k in r.scan_iter("cp:{kept*")}

    [leased] = gone.sync({p: Batch(lease=1)})[p].leased  # a worker is crawling it
    run = scrapy("crawls", "delete", "gone", "--yes", redis_url=redis_url, **data)
    assert refusal(run) == ("crawlproj: crawl 'gone' has 1 live lease(s): its workers are "
                            "running; stop them first (a killed worker's leases run out after "
                            "FRONTIER_LEASE_TTL)")
    gone.sync({p: Batch(release=[Release(leased.host, leased.token, Host.FREE, URL.RETURN)])})
    run = scrapy("crawls", "delete", "gone", redis_url=redis_url, **data)
    assert refusal(run) == ("crawlproj: deleting crawl 'gone' removes its frontier, DUE, link "
                            "store and page metadata for good; add --yes to delete it")
    assert Keyspace.existing(r, "gone") == Keyspace("gone", 3)

    run = scrapy("crawls", "delete", "gone", "--yes", redis_url=redis_url, **data)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("deleted crawl 'gone': ")
    assert run.stdout.strip().endswith(" Redis key(s), 3 link-store file(s)")
    assert not any(True for _ in r.scan_iter("cp:{gone*"))
    assert not any(f.exists() for f in files)
    assert {k: r.dump(k) for k in r.scan_iter()} == kept_keys
    assert Keyspace.crawl_ids(r) == ["kept"]
