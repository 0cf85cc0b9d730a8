"""crawlproj.redis.keyspace: the one place a crawl's Redis keys are named.

The source checks (no key string typed elsewhere, no import into the frontier
from the components below it), the layout of existing crawls kept byte for
byte, the partition agreement against a real server, and the components that
need only keys opening them without setting up the DUE.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from scrapy.utils.test import get_crawler

from crawlproj.due.middleware import ContentSeenMiddleware
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.pipelines.links import LinkStorePipeline
from crawlproj.pipelines.pagemeta import PageMetaPipeline
from crawlproj.redis.keyspace import CrawlIdError, Keyspace
from crawlproj.spiders.web import WebSpider
from crawlproj.stores.linkstore import LinkStore, encode_page
from crawlproj.stores.pagemeta import PageMetaStore
from crawlproj.urls import host_of
from tests.e2e import ROOT
from tests.test_stores import fetch

# -- the source --------------------------------------------------------------------

KEYED = ("crawlproj", "middlewares", "settings", "bench")


def python_files(root: Path, folders) -> list[Path]:
    return sorted(p for f in folders for p in (root / f).rglob("*.py"))


def docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _is_prefix_call(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "prefix")


def typed_keys(root: Path) -> list[str]:
    """Places that spell a key outside crawlproj/redis/keyspace.py: a string holding
    the layout's root ``cp:`` (docstrings aside), or a name glued to a
    partition prefix (``x.prefix(p) + "links"``, ``f"{x.prefix(p)}pm:..."``)."""
    found = []
    for path in python_files(root, KEYED):
        rel = path.relative_to(root).as_posix()
        if rel == "crawlproj/redis/keyspace.py":
            continue
        tree = ast.parse(path.read_text(), rel)
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in skip and ("cp:{" in node.value
                                                  or node.value.startswith("cp:")):
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) \
                    and _is_prefix_call(node.left) and isinstance(node.right, ast.Constant):
                found.append(f"{rel}:{node.lineno}: prefix(...) + {node.right.value!r}")
            elif isinstance(node, ast.JoinedStr):
                parts = node.values
                for a, b in zip(parts, parts[1:]):
                    if isinstance(a, ast.FormattedValue) and _is_prefix_call(a.value) \
                            and isinstance(b, ast.Constant):
                        found.append(f"{rel}:{node.lineno}: f-string prefix(...) + {b.value!r}")
    return found


def test_no_key_is_typed_outside_the_keyspace():
    assert typed_keys(ROOT) == []


# Packages the frontier is built on or beside: they must not need it.
BELOW = ("crawlproj/due", "crawlproj/prioritizers", "crawlproj/stores", "middlewares",
         "crawlproj/pipelines", "crawlproj/ranker", "crawlproj/redis/keyspace.py", "crawlproj/urls.py")
# Imports that stay, and why.
ALLOWED = {
    # the ranker rewrites the frontier's queued scores (Frontier.rescore, lua/rescore.lua):
    # a use of the frontier, not of its keys
    ("crawlproj/ranker/extension.py", "crawlproj.frontier.frontier"),
    ("crawlproj/ranker/process.py", "crawlproj.frontier.frontier"),
    # the frontier's own middlewares' entry points (the lease check, the links
    # sent lately): Scrapy finds them in middlewares/, their code is the frontier's
    ("middlewares/lease.py", "crawlproj.frontier.lease"),
    ("middlewares/recentlinks.py", "crawlproj.frontier.recentlinks"),
}


def imports_of(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def upward_imports(root: Path) -> list[tuple[str, str]]:
    found = []
    for entry in BELOW:
        paths = [p for p in [root / entry] if p.exists()] if entry.endswith(".py") \
            else python_files(root, [entry])
        for path in paths:
            rel = path.relative_to(root).as_posix()
            for name in sorted(imports_of(ast.parse(path.read_text(), rel))):
                if name.startswith("crawlproj.frontier") and not any(
                        rel == f and (name == m or name.startswith(m + "."))
                        for f, m in ALLOWED):
                    found.append((rel, name))
    return found


def test_components_below_the_frontier_do_not_import_it():
    assert upward_imports(ROOT) == []


# -- the layout ----------------------------------------------------------------------

def test_keys_and_partitions_of_existing_crawls_are_unchanged():
    # crawls written before this module read the same keys and hosts' partitions
    ks = Keyspace("c-1", 64)
    assert (ks.meta, ks.ranker_lock, ks.prefix(3)) == ("cp:{c-1}:meta", "cp:{c-1}:ranker",
                                                       "cp:{c-1/3}:")
    assert (ks.queue(3, "a.ex"), ks.payloads(3, "a.ex"), ks.due(3), ks.links_lock(3),
            ks.pagemeta(3, 17)) == ("cp:{c-1/3}:q:a.ex", "cp:{c-1/3}:p:a.ex", "cp:{c-1/3}:due",
                                    "cp:{c-1/3}:links:lock", "cp:{c-1/3}:pm:17")
    assert ks.content(-1) == "cp:{c-1/63}:cs:ffffffffffffffff"  # by fingerprint, not host
    hosts = ["example.com", "a.ex", "h17.example:8080", "xn--bcher-kva.example",
             "127.0.0.1:8899"]
    assert [ks.partition_of(h) for h in hosts] == [51, 57, 30, 26, 0]
    assert [Keyspace("c-1", 7).partition_of(h) for h in hosts] == [4, 1, 2, 3, 1]


def test_the_lua_scripts_write_the_keys_the_keyspace_names(redis_url, tmp_path):
    r = redis.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "names", 4)
    f = Frontier(r, ks)
    url = "http://a.ex/1"
    p = ks.partition_of(host_of(url))
    f.sync({p: Batch(enqueue=[f.entry("a.ex", url, 0, b"x")])})
    assert r.type(ks.queue(p, "a.ex")) == b"zset" and r.type(ks.payloads(p, "a.ex")) == b"hash"
    assert r.exists(ks.heap(p)) + r.exists(ks.ready(p)) == 1
    assert int(r.hget(ks.stats(p), "enqueued")) == 1
    assert r.hget(ks.due(p), "mode") == b"exact"
    assert [k.decode() for k in r.scan_iter(ks.queues_pattern(p))] == [ks.queue(p, "a.ex")]
    assert len(list(r.scan_iter(ks.seen_pattern(p)))) == 1
    assert len(f.sync({p: Batch(lease=1)})[p].leased) == 1
    assert r.zscore(ks.leases(p), "a.ex") is not None
    # the link store's commit script keeps its segments where the keyspace says
    store = LinkStore(r, ks, tmp_path / "links", segment_pages=1)
    store.append([(p, encode_page(url, 1.0, [{"url": "http://b.ex/"}])[0])])
    assert store.compact(p) == 1
    assert r.llen(ks.link_segments(p)) == 1 and r.llen(ks.links(p)) == 0
    # every key of the crawl is the meta hash or under a partition prefix
    keys = {k.decode() for k in r.scan_iter()}
    assert keys == {ks.meta} | {k.decode() for k in r.scan_iter(ks.partitions_pattern())}


# -- agreement with the crawl ----------------------------------------------------------

def test_the_first_process_fixes_the_partition_count_later_ones_adopt_it(redis_url):
    r = redis.Redis.from_url(redis_url)
    assert Keyspace.existing(r, "c") is None
    assert not r.exists(Keyspace("c", 1).meta)  # looking fixed nothing
    assert Keyspace.open(r, "c", 4) == Keyspace("c", 4)
    assert Keyspace.open(r, "c", 16) == Keyspace("c", 4)
    assert Keyspace.existing(r, "c") == Keyspace("c", 4)
    assert Keyspace.open(r, "other", 2).partitions == 2  # each crawl its own
    assert Keyspace.crawl_ids(r) == ["c", "other"]


def test_from_settings_opens_the_crawl_the_settings_name(redis_url):
    r = redis.Redis.from_url(redis_url)
    settings = get_crawler(WebSpider, {"CRAWL_ID": "s", "FRONTIER_PARTITIONS": 3}).settings
    assert Keyspace.from_settings(settings, r) == Keyspace("s", 3)
    assert r.hget(Keyspace("s", 1).meta, "partitions") == b"3"


def test_without_a_partition_count_a_crawl_gets_the_servers(redis_url):
    """FRONTIER_PARTITIONS None: a new crawl on a single server gets one
    partition; a crawl that exists keeps its own."""
    r = redis.Redis.from_url(redis_url)
    assert Keyspace.fitted_partitions(r, "new") == 1
    settings = get_crawler(WebSpider, {"CRAWL_ID": "new"}).settings
    assert settings.get("FRONTIER_PARTITIONS") is None
    assert Keyspace.from_settings(settings, r) == Keyspace("new", 1)
    Keyspace.open(r, "old", 5)
    settings = get_crawler(WebSpider, {"CRAWL_ID": "old"}).settings
    assert Keyspace.from_settings(settings, r) == Keyspace("old", 5)


@pytest.mark.parametrize("crawl_id", ["a{b", "a}b", "{x}", ""])
def test_a_crawl_id_that_cannot_be_a_hash_tag_is_refused_before_any_key(redis_url, crawl_id):
    r = redis.Redis.from_url(redis_url)
    with pytest.raises(CrawlIdError, match="CRAWL_ID must") as exc:
        Keyspace.open(r, crawl_id, 1)
    assert isinstance(exc.value, CrawlprojError)  # commands print it as one line
    assert r.dbsize() == 0


def test_the_partition_count_must_be_positive():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(CrawlIdError, match="partition count"):
            Keyspace("c", bad)


def test_the_frontier_command_refuses_a_bad_crawl_id_in_one_line(redis_url):
    run = subprocess.run([sys.executable, "-m", "scrapy", "frontier", "--crawl-id", "a{b"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2
    assert run.stderr.strip() == "crawlproj: CRAWL_ID must not contain { or }: 'a{b'"


def test_scan_patterns_match_their_own_crawl_only(redis_url):
    # glob characters in a crawl id are taken literally
    r = redis.Redis.from_url(redis_url)
    star, other = Keyspace.open(r, "a*", 1), Keyspace.open(r, "ab", 1)
    store = PageMetaStore(r, other)
    store.write([store.entry(fetch("http://a.ex/"))])
    assert list(PageMetaStore(r, star).scan()) == []
    assert len(list(PageMetaStore(r, other).scan())) == 1
    assert list(r.scan_iter(star.partitions_pattern())) == []


# -- components that need only keys ------------------------------------------------------

def test_components_that_need_only_keys_leave_the_due_alone(redis_url, tmp_path):
    crawler = get_crawler(WebSpider, {
        "REDIS_URL": redis_url, "CRAWL_ID": "keys", "FRONTIER_PARTITIONS": 2,
        "CRAWL_DATA_DIR": str(tmp_path), "DUE_MODE": "bloom"})
    ContentSeenMiddleware.from_crawler(crawler)
    for pipeline in (LinkStorePipeline(crawler), PageMetaPipeline(crawler)):
        pipeline.open_spider()
    r = redis.Redis.from_url(redis_url)
    ks = Keyspace("keys", 2)
    assert set(r.hkeys(ks.meta)) == {b"partitions", b"created"}
    assert not any(r.exists(ks.due(p)) for p in range(2))
