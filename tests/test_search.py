"""The crawl's index and its search: documents, hand-over, indexer, ranking,
bad input. Real tantivy indexes in tmp_path, a real Redis server for the
hand-over list and the indexer's lock; pages rendered by the simulated web
and extracted as the spider does."""

from __future__ import annotations

import html
import os
import signal
import subprocess
import sys
import time

import pytest
import redis as redis_lib

from crawlproj.extract import extract_page
from crawlproj.redis.keyspace import Keyspace
from crawlproj.search.document import Document
from crawlproj.search.export import export
from crawlproj.search.handover import HandOver
from crawlproj.search.index import IndexUnavailable, PageIndex
from crawlproj.search.indexer import Indexer, IndexerLock
from crawlproj.search.searcher import QueryError, Searcher
from crawlproj.simweb.model import SimWeb
from tests.e2e import ROOT

T0 = 1.7e9


def web_documents(pages=400, hosts=8, seed=3):
    web = SimWeb.generate(seed=seed, hosts=hosts, pages=pages, page_bytes=2000)
    docs = []
    for node in range(pages):
        url = web.url(node)
        e = extract_page(web.render(node), url, "utf-8")
        docs.append(Document(url, e.title, e.text, T0 + node, e.links))
    return docs


def doc(url, title="", text="", t=T0, links=()):
    return Document(url, title, text, t, list(links))


@pytest.fixture
def index(tmp_path):
    ix = PageIndex(tmp_path / "index", write=True)
    yield ix
    ix.close()


def test_a_page_is_found_by_its_title_at_rank_one(index):
    docs = web_documents()
    indexer = Indexer(index, None, batch=100)
    for i in range(0, len(docs), 100):
        indexer.write(docs[i:i + 100])
    indexer.maybe_rank(force=True)
    s = Searcher(index)
    first = sum(s.search(d.title).results[0].url == d.url for d in docs)
    assert first >= 0.95 * len(docs)
    assert index.num_docs() == len(docs)


def test_a_page_fetched_again_replaces_its_old_version_whatever_the_order(index):
    indexer = Indexer(index, None)
    indexer.write([doc("http://a.example/p?b=2&a=1", "old title", "apricot", T0)])
    # the same page under another spelling of its URL, fetched later: one document, the new text
    indexer.write([doc("http://A.example/p?a=1&b=2#top", "new title", "blueberry", T0 + 60)])
    s = Searcher(index)
    assert s.search("blueberry").total == 1 and s.search("apricot").total == 0
    # a fetch older than the indexed one (handed over late) changes nothing
    indexer.write([doc("http://a.example/p?a=1&b=2", "older", "cherry", T0 + 30)])
    assert s.search("cherry").total == 0 and s.search("blueberry").total == 1
    # two fetches of one page in one batch: the later wins
    indexer.write([doc("http://a.example/q", "", "damson", T0 + 90),
                   doc("http://a.example/q", "", "elderberry", T0 + 80)])
    assert (s.search("damson").total, s.search("elderberry").total) == (1, 0)
    assert index.num_docs() == 2


def test_duplicates_errors_and_non_html_are_not_documents():
    item = {"url": "http://a.example/", "final_url": "http://a.example/", "status": 200,
            "content_type": "text/html", "title": "t", "text": "x", "fetch_time": T0,
            "outlinks": [{"url": "http://b.example/", "anchor": "b"}], "duplicate_of": None}
    assert Document.from_item(item).outlinks == [("http://b.example/", "b")]
    assert Document.from_item({**item, "duplicate_of": "http://c.example/"}) is None
    assert Document.from_item({**item, "status": 404}) is None
    assert Document.from_item({**item, "content_type": "image/png"}) is None
    # no Content-Type, but the spider parsed it as HTML
    assert Document.from_item({**item, "content_type": ""}) is not None


def test_anchor_text_of_links_found_after_the_page_is_indexed(index):
    indexer = Indexer(index, None)
    indexer.write([doc("http://b.example/", "bee", "plain words")])
    s = Searcher(index)
    assert s.search("zephyrine").total == 0
    indexer.write([doc("http://a.example/", "ay", "other words", links=[("http://b.example/", "zephyrine")])])
    hits = s.search("zephyrine").results
    assert [h.url for h in hits] == ["http://b.example/"]
    # the link is gone from the page's new version: so is the anchor text
    indexer.write([doc("http://a.example/", "ay", "other words", T0 + 1)])
    assert s.search("zephyrine").total == 0


def test_links_between_pages_of_one_batch_count_at_once(index):
    # the indexer hands a batch to tantivy before recording its links: the
    # anchor text it writes must be what the links will be once recorded
    indexer = Indexer(index, None)
    indexer.write([doc("http://a.example/", "", "x", links=[("http://b.example/", "oldword")])])
    indexer.write([doc("http://a.example/", "", "x", T0 + 1, links=[("http://b.example/", "newword")]),
                   doc("http://b.example/", "", "y"),
                   doc("http://c.example/", "", "z", links=[("http://a.example/", "cword")])])
    s = Searcher(index)
    assert [h.url for h in s.search("anchors:newword").results] == ["http://b.example/"]
    assert [h.url for h in s.search("anchors:cword").results] == ["http://a.example/"]
    assert s.search("anchors:oldword").total == 0
    assert not index.anchors.stale(10)


def test_links_read_the_same_from_the_merged_and_the_recent_level(tmp_path):
    """The anchor store keeps links in two levels (anchors.py): what an
    indexer reads must not depend on which level a link sits in, and a page
    fetched again takes its old links back from either."""
    docs = web_documents(pages=200, hosts=5)
    # a page's new version: half its links, and one to a page it did not link to
    again = [Document(d.url, d.title, d.text, T0 + 1000, d.outlinks[: len(d.outlinks) // 2]
                      + [(docs[(i * 7 + 3) % len(docs)].url, "zebrawood")])
             for i, d in enumerate(docs[:60])]
    seen = {}
    for name, merge_min in (("merged", 1), ("recent", 10**9)):
        ix = PageIndex(tmp_path / name, write=True)
        ix.anchors.merge_min = merge_min
        indexer = Indexer(ix, None, batch=50)
        for i in range(0, len(docs), 50):
            indexer.write(docs[i:i + 50])
        indexer.write(again[:30])
        indexer.write(again[30:])
        while ix.anchors.stale(1):
            indexer.write([])
        indexer.maybe_rank(force=True)
        db = ix.anchors.db
        levels = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("anchors", "recent")]
        keys = [d.key for d in docs]
        texts = ix.anchors.anchor_texts(keys)
        s = Searcher(ix)
        seen[name] = (levels, {k: sorted(t.split()) for k, t in texts.items()},
                      sorted(h.url for h in s.search("anchors:zebrawood", n=100, per_host=0).results),
                      [round(ix.anchors.pagerank_of(k), 9) for k in keys])
        ix.close()
    (merged_levels, *merged), (recent_levels, *recent) = seen["merged"], seen["recent"]
    assert merged_levels[0] > 0 and recent_levels == [0, sum(merged_levels)]
    assert merged == recent
    # the new links' targets, found by the new anchor text alone
    assert merged[1] == sorted({docs[(i * 7 + 3) % len(docs)].url for i in range(60)})


def test_pagerank_orders_pages_of_equal_text(index):
    indexer = Indexer(index, None)
    pages = [doc("http://pop.example/", "", "quince orchard"), doc("http://lone.example/", "", "quince orchard")]
    # many pages link to pop (with anchors that do not name the query)
    pages += [doc(f"http://f{i}.example/", "", "filler", links=[("http://pop.example/", "here")])
              for i in range(20)]
    indexer.write(pages)
    s = Searcher(index)
    before = [h.url for h in s.search("quince").results]
    indexer.maybe_rank(force=True)
    after = s.search("quince").results
    assert [h.url for h in after] == ["http://pop.example/", "http://lone.example/"]
    assert after[0].score > after[1].score
    assert index.anchors.pagerank_of("http://pop.example/") > index.anchors.pagerank_of("http://lone.example/")
    assert len(before) == 2


def test_at_most_two_results_per_host_on_the_first_page(index):
    indexer = Indexer(index, None)
    big = [doc(f"http://big.example/{i}", "rhubarb " * (5 - i % 5), "rhubarb") for i in range(8)]
    small = [doc(f"http://small{i}.example/", "", "rhubarb") for i in range(3)]
    indexer.write(big + small)
    s = Searcher(index)
    first = s.search("rhubarb", n=5).results
    hosts = [h.host for h in first]
    assert hosts.count("big.example") == 2 and len(first) == 5
    # the rest follow on later pages: every page exactly once across pages
    urls = [h.url for off in range(0, 11, 5) for h in s.search("rhubarb", n=5, offset=off).results]
    assert sorted(urls) == sorted(d.url for d in big + small)
    # asked for: every result of the host first, by score
    assert [h.host for h in s.search("rhubarb", n=5, per_host=0).results].count("big.example") == 5


def test_phrases_fields_and_non_ascii(index):
    indexer = Indexer(index, None)
    indexer.write([doc("http://a.example/", "Grüße aus Köln", "the red fox jumps"),
                   doc("http://b.example/", "fox", "red and a fox"),
                   doc("http://c.example/", "日本語のページ", "東京 text")])
    s = Searcher(index)
    assert [h.url for h in s.search('"red fox"').results] == ["http://a.example/"]
    assert s.search("red fox").total == 2
    assert [h.url for h in s.search("köln").results] == ["http://a.example/"]
    assert [h.url for h in s.search("title:fox").results] == ["http://b.example/"]
    assert [h.url for h in s.search("host:c.example").results] == ["http://c.example/"]
    assert s.search("東京").total == 1


def test_bad_queries_get_a_clear_message(index):
    Indexer(index, None).write([doc("http://a.example/", "alert box", "script alert words")])
    s = Searcher(index)
    for q, says in [("", "empty query"), ("   ", "empty query"), ("x" * 10_000, "query too long"),
                    ("()", "no words to search for")]:
        with pytest.raises(QueryError, match=says):
            s.search(q)
    with pytest.raises(QueryError, match="n must be"):
        s.search("alert", n=0)
    with pytest.raises(QueryError, match="offset"):
        s.search("alert", offset=5000)
    # a query that does not parse is searched as its words, and says so
    r = s.search("<script>alert(")
    assert r.notice and "syntax error" in r.notice and [h.url for h in r.results] == ["http://a.example/"]


def test_markup_in_pages_and_queries_stays_text(index):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    Indexer(index, None).write([doc("http://a.example/", f"mango {evil}", f"{evil} mango {evil} & more")])
    r = Searcher(index).search("mango")
    hit = r.results[0]
    assert hit.title == f"mango {evil}"   # plain text in the API: the client escapes it
    assert "<script" not in hit.snippet and "<img" not in hit.snippet
    assert html.escape("<script>") in hit.snippet and "<mark>mango</mark>" in hit.snippet


def test_a_corrupt_index_is_refused_and_left_as_it_is(tmp_path):
    path = tmp_path / "index"
    ix = PageIndex(path, write=True)
    Indexer(ix, None).write([doc("http://a.example/", "t", "x")])
    ix.close()
    meta = path / "meta.json"
    meta.write_text('{"segments": [garbage')
    before = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    with pytest.raises(IndexUnavailable, match="cannot be opened.*--rebuild"):
        PageIndex(path)
    with pytest.raises(IndexUnavailable, match="cannot be opened"):
        PageIndex(path, write=True)
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()} == before
    with pytest.raises(IndexUnavailable, match="no index at"):
        PageIndex(tmp_path / "nothing")


def test_a_second_writer_is_refused_while_readers_read(tmp_path):
    path = tmp_path / "index"
    writer = PageIndex(path, write=True)
    try:
        Indexer(writer, None).write([doc("http://a.example/", "t", "kiwi")])
        # tantivy's lock file is per process: a writer in another process is refused
        code = ("import sys; from crawlproj.search.index import PageIndex, IndexUnavailable\n"
                "try:\n  PageIndex(sys.argv[1], write=True)\n"
                "except IndexUnavailable as e:\n  print(e); sys.exit(3)\n")
        p = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 3 and "being written by another process" in p.stdout
        assert Searcher(PageIndex(path)).search("kiwi").total == 1
    finally:
        writer.close()


def test_documents_go_from_workers_to_one_index_through_redis(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "handover")
    a, b = HandOver(r, ks), HandOver(r, ks)   # two workers
    a.push([doc("http://x.example/", "one", "plum", T0).pack()])
    b.push([doc("http://x.example/", "one", "pear", T0 + 5).pack(),
            doc("http://y.example/", "two", "plum", T0).pack()])
    a.push([b"not msgpack at all \xff"])
    index = PageIndex(tmp_path / "index", write=True)
    try:
        batch = Indexer(index, HandOver(r, ks), batch=2).step()
        assert (batch.taken, batch.written) == (2, 1)
        batch = Indexer(index, HandOver(r, ks), batch=10).step()
        assert batch.taken == 2 and HandOver(r, ks).waiting() == 0
        s = Searcher(index)
        # the page both workers fetched is there once, as fetched last
        assert [h.url for h in s.search("pear").results] == ["http://x.example/"]
        assert [h.url for h in s.search("plum").results] == ["http://y.example/"]
    finally:
        index.close()


def _texts(path, *words):
    reader = Searcher(PageIndex(path))
    return [[h.url for h in reader.search(w).results] for w in words]


def _handover(redis_url, crawl):
    """A crawl's hand-over list on the real Redis: (workers' side, a factory of the indexer's)."""
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace.open(r, crawl)
    return HandOver(r, ks), lambda: HandOver(r, ks)


def test_an_unsearched_index_commits_late_and_a_query_makes_it_commit(redis_url, tmp_path):
    handover, indexers = _handover(redis_url, "idle")
    path = tmp_path / "index"
    index = PageIndex(path, write=True)
    index.commit()  # an empty index a reader can open
    try:
        indexer = Indexer(index, indexers(), batch=10, idle_commit=3600)
        handover.push([doc("http://a.example/", "", "apricot").pack()])
        assert indexer.step().written == 1
        # written, not committed: nobody sees it yet, and it stays handed over
        assert not index.searched_within(30)
        assert handover.waiting() == 1
        assert _texts(path, "apricot") == [[]]   # a query, which marks the index searched
        assert index.searched_within(30)
        handover.push([doc("http://b.example/", "", "blueberry").pack()])
        indexer.step()
        assert handover.waiting() == 0
        assert _texts(path, "apricot", "blueberry") == [["http://a.example/"], ["http://b.example/"]]
    finally:
        index.close()


def test_uncommitted_documents_are_written_again_by_the_next_indexer(redis_url, tmp_path):
    handover, indexers = _handover(redis_url, "lost")
    path = tmp_path / "index"
    index = PageIndex(path, write=True)
    indexer = Indexer(index, indexers(), batch=5, idle_commit=3600)
    handover.push([doc(f"http://h.example/{i}", "", "walnut").pack() for i in range(2)])
    indexer.step()
    handover.push([doc("http://h.example/2", "", "walnut").pack()])
    indexer.step()
    assert indexer.uncommitted == 3
    index.close()  # the lock lost, or the process gone, before a commit
    index = PageIndex(path, write=True)
    try:
        Indexer(index, indexers(), batch=10).step()
        assert handover.waiting() == 0 and index.num_docs() == 3
    finally:
        index.close()


def test_a_hand_over_list_emptied_under_the_indexer_loses_no_new_document(redis_url, tmp_path):
    handover, indexers = _handover(redis_url, "reset")
    index = PageIndex(tmp_path / "index", write=True)
    try:
        indexer = Indexer(index, indexers(), batch=10, idle_commit=3600)
        handover.push([doc(f"http://old.example/{i}", "", "walnut").pack() for i in range(3)])
        indexer.step()
        handover.redis.delete(handover.key)  # `scrapy crawls delete`, a Redis restarted empty
        handover.push([doc(f"http://new.example/{i}", "", "hazel").pack() for i in range(4)])
        indexer.step(commit=True)
        assert Searcher(index).search("hazel").total == 4 and handover.waiting() == 0
    finally:
        index.close()


def test_a_stale_refresh_never_writes_back_an_older_uncommitted_page(redis_url, tmp_path):
    handover, indexers = _handover(redis_url, "refresh")
    index = PageIndex(tmp_path / "index", write=True)
    try:
        indexer = Indexer(index, indexers(), batch=10, idle_commit=3600)
        handover.push([doc("http://a.example/", "", "apricot", T0).pack()])
        indexer.step(commit=True)
        handover.push([doc("http://a.example/", "", "blueberry", T0 + 60).pack()])
        indexer.step()
        # a link to a.example makes it stale; the index's stored copy of it
        # is the committed, older one
        handover.push([doc("http://b.example/", "", "cherry", T0 + 61,
                           links=[("http://a.example/", "zephyrine")]).pack()])
        indexer.step()
        indexer.step(commit=True)
        s = Searcher(index)
        assert [h.url for h in s.search("blueberry").results] == ["http://a.example/"]
        assert s.search("apricot").total == 0
        # once committed, the page is written again with the new anchor text
        handover.push([doc("http://c.example/", "", "damson", T0 + 62).pack()])
        indexer.step(commit=True)
        assert [h.url for h in s.search("zephyrine").results] == ["http://a.example/"]
        assert s.search("blueberry").total == 1
    finally:
        index.close()


def test_the_indexer_lock_passes_on_when_its_holder_dies(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace.open(r, "lock")
    env = dict(os.environ, REDIS_URL=redis_url, CRAWL_ID="lock", CRAWLPROJ_INDEX_DIR=str(tmp_path / "index"),
               CRAWLPROJ_INDEX_LOCK_TTL="1.0", CRAWLPROJ_INDEX_TICK="0.1", CRAWLPROJ_INDEX_IDLE_COMMIT="0")
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", "index"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        lock = IndexerLock(r, ks, ttl=1.0)
        deadline = time.monotonic() + 60
        while lock.holder() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lock.holder() is not None and not lock.hold()
        HandOver(r, ks).push([doc("http://z.example/", "zed", "walnut").pack()])
        while HandOver(r, ks).waiting() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert HandOver(r, ks).waiting() == 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        while not lock.hold() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert lock.hold()
        # the dead writer's index opens for writing, with what it committed
        index = PageIndex(tmp_path / "index", write=True)
        try:
            assert Searcher(index).search("walnut").total == 1
        finally:
            index.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_export_is_bulk_ndjson_and_solr_json(index, tmp_path):
    import json

    Indexer(index, None).write([doc("http://a.example/", "Ä title", "text one", links=[("http://b.example/", "bee")]),
                                doc("http://b.example/", "b", "text two")])
    index.commit()
    out = tmp_path / "bulk.ndjson"
    with open(out, "w", encoding="utf-8") as f:
        assert export(index, f, "ndjson", "crawl") == 2
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    actions, docs = lines[0::2], lines[1::2]
    assert sorted(a["index"]["_id"] for a in actions) == ["http://a.example/", "http://b.example/"]
    assert all(a["index"]["_index"] == "crawl" for a in actions)
    by_url = {d["url"]: d for d in docs}
    assert by_url["http://b.example/"]["anchors"] == "bee" and by_url["http://a.example/"]["title"] == "Ä title"
    assert set(by_url["http://a.example/"]) == {"url", "host", "title", "text", "anchors", "fetched_at", "pagerank"}
    solr = tmp_path / "solr.json"
    with open(solr, "w", encoding="utf-8") as f:
        export(index, f, "solr")
    assert sorted(d["id"] for d in json.loads(solr.read_text(encoding="utf-8"))) == \
        ["http://a.example/", "http://b.example/"]


def test_stale_pages_are_written_again_oldest_first(index):
    indexer = Indexer(index, None, batch=4)   # one stale page written again per batch
    assert indexer.refresh == 1
    indexer.write([doc(f"http://{h}.example/", h, "plain") for h in "zqa"])
    # z and q gain links first (one of them is written again at once), a later:
    # the other of z and q waits longest, whatever the order of the keys
    indexer.write([doc("http://s1.example/", "", "x", links=[("http://z.example/", "zinnia"),
                                                            ("http://q.example/", "quince")])])
    indexer.write([doc("http://s2.example/", "", "x", links=[("http://a.example/", "aster")])])
    s = Searcher(index)
    assert [h.url for h in s.search("zinnia").results] == ["http://z.example/"]
    assert [h.url for h in s.search("quince").results] == ["http://q.example/"]
    assert s.search("aster").total == 0
    indexer.write([])
    assert [h.url for h in s.search("aster").results] == ["http://a.example/"]


def test_an_anchor_store_of_another_layout_is_refused_with_the_way_out(tmp_path):
    import sqlite3

    path = tmp_path / "index"
    PageIndex(path, write=True).close()
    db = sqlite3.connect(path / "anchors.sqlite3")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    for write in (False, True):
        with pytest.raises(IndexUnavailable, match="anchor store.*layout 1.*--rebuild"):
            PageIndex(path, write=write)


_DIE_IN_COMMIT = """
import os, sys
from crawlproj.search.document import Document
from crawlproj.search.index import PageIndex
from crawlproj.search.indexer import Indexer

class Dying:
    # tantivy's writer, but the process dies just before or just after its commit
    def __init__(self, writer, when):
        self.writer, self.when = writer, when
    def commit(self):
        if self.when == "before":
            os._exit(9)
        self.writer.commit()
        os._exit(9)
    def __getattr__(self, name):
        return getattr(self.writer, name)

index = PageIndex(sys.argv[1], write=True)
index.writer = Dying(index.writer, sys.argv[2])
Indexer(index, None).write([Document(f"http://h.example/{i}", "t", "walnut", 1.7e9) for i in range(5)])
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_indexer_killed_in_its_commit_writes_the_batch_again_once(tmp_path, when):
    path = tmp_path / "index"
    p = subprocess.run([sys.executable, "-c", _DIE_IN_COMMIT, str(path), when], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 9, p.stderr
    # the batch is still on the hand-over list: the next indexer writes it again
    index = PageIndex(path, write=True)
    try:
        Indexer(index, None).write([doc(f"http://h.example/{i}", "t", "walnut") for i in range(5)])
        assert Searcher(index).search("walnut").total == 5 and index.num_docs() == 5
    finally:
        index.close()


def test_a_small_batch_writes_few_stale_pages_again(index):
    indexer = Indexer(index, None, batch=40)   # a quarter: 10 stale pages per full batch
    indexer.write([doc(f"http://t{i}.example/", "", "plain") for i in range(20)])
    indexer.write([doc("http://hub.example/", "", "x", links=[(f"http://t{i}.example/", "tansy")
                                                              for i in range(20)])])
    assert len(index.anchors.stale(100)) == 19   # one is written again with the hub
    # a batch of one new page takes one stale page along, not ten: it is searchable sooner
    assert indexer.write([doc("http://new.example/", "", "y")]) == (1, 1)
    # no new pages: a full batch's share
    assert indexer.write([]) == (0, 10)


def test_a_query_server_sees_each_new_pagerank(index):
    indexer = Indexer(index, None)
    pages = [doc("http://pop.example/", "", "quince orchard"), doc("http://lone.example/", "", "quince orchard")]
    indexer.write(pages + [doc(f"http://f{i}.example/", "", "filler", links=[("http://lone.example/", "here")])
                           for i in range(20)])
    indexer.maybe_rank(force=True)
    reader = Searcher(PageIndex(index.directory))   # the query server's own, read-only
    assert [h.url for h in reader.search("quince").results][0] == "http://lone.example/"
    # the links move to pop: once the indexer ranks again, so does the query server
    indexer.write([doc(f"http://f{i}.example/", "", "filler", T0 + 1, links=[("http://pop.example/", "here")])
                   for i in range(20)])
    indexer.maybe_rank(force=True)
    assert [h.url for h in reader.search("quince").results][0] == "http://pop.example/"


def test_the_snippet_is_found_wherever_the_words_are(index):
    far = " ".join(f"filler{i}" for i in range(2000))
    Indexer(index, None).write([
        doc("http://a.example/", "a", f"{far} the Zebra crossing {far}"),
        doc("http://b.example/", "okapi page", "nothing about it here"),
        doc("http://c.example/", "c", "an okapi_ish word and a zebra")])
    s = Searcher(index)
    hit = s.search("zebra crossing").results[0]
    assert hit.url == "http://a.example/" and "<mark>Zebra</mark> <mark>crossing</mark>" in hit.snippet
    # in the title only: the text's beginning
    assert s.search("title:okapi").results[0].snippet == "nothing about it here"
    # words as tantivy cuts them: "okapi_ish" is "okapi" and "ish"
    by_url = {h.url: h.snippet for h in s.search("okapi").results}
    assert by_url["http://c.example/"] == "an <mark>okapi</mark>_ish word and a zebra"


# --------------------------------------------------------------------------
# noindex and canonical URLs (crawlproj/robots/meta.py)
# --------------------------------------------------------------------------


def test_a_page_found_noindex_leaves_the_index(index):
    indexer = Indexer(index, None)
    s = Searcher(index)
    indexer.write([doc("http://a.example/p", "plum", "quince words", links=[("http://b.example/", "bword")]),
                   doc("http://b.example/", "bee", "x")])
    assert s.search("quince").total == 1
    # fetched again, the page says noindex: out of the index, its links kept
    gone = Document.of_page("http://a.example/p", "plum", "quince words", T0 + 10,
                            [("http://b.example/", "bword")], None, ["noindex"])
    assert gone.noindex and not gone.text
    indexer.write([gone])
    assert index.num_docs() == 1  # b alone: no empty document left in a's place
    assert s.search("quince").total == 0 and s.search("plum").total == 0
    assert [h.url for h in s.search("anchors:bword").results] == ["http://b.example/"]
    # an older fetch handed over late does not bring it back; a newer one does
    indexer.write([doc("http://a.example/p", "plum", "quince words", T0 + 5)])
    assert s.search("quince").total == 0
    indexer.write([doc("http://a.example/p", "plum", "quince words again", T0 + 20)])
    assert s.search("quince").total == 1
    # noindex first, never indexed: nothing written
    indexer.write([Document.of_page("http://a.example/n", "t", "raspberry", T0, [], None, ["noindex"])])
    assert s.search("raspberry").total == 0
    assert index.num_docs() == 2


def test_pages_that_name_one_canonical_url_are_one_document(index):
    indexer = Indexer(index, None)
    s = Searcher(index)
    canon = "http://a.example/article"

    def copy(url, t, text):
        return Document.of_page(url, "article", text, t, [], canon, [])

    # two copies (print view, tracking URL): one result, the latest copy's
    indexer.write([copy("http://a.example/article?print=1", T0, "sorbet version one")])
    indexer.write([copy("http://a.example/article?ref=feed", T0 + 10, "sorbet version two")])
    hits = s.search("sorbet").results
    assert [h.url for h in hits] == ["http://a.example/article?ref=feed"]
    # the canonical page itself wins, whenever it comes, and stays
    indexer.write([Document.of_page(canon, "article", "sorbet the original", T0 + 5, [], canon, [])])
    assert [h.url for h in s.search("sorbet").results] == [canon]
    indexer.write([copy("http://a.example/article?print=1", T0 + 30, "sorbet version three")])
    assert [h.url for h in s.search("sorbet").results] == [canon]
    assert s.search("original").total == 1 and s.search("three").total == 0
    # a self-referencing canonical is no canonical: the page is its own document
    self_ref = Document.of_page("http://a.example/other", "t", "tamarind", T0, [], "http://a.example/other", [])
    assert self_ref.canonical == "" and self_ref.key == "http://a.example/other"
    assert index.num_docs() == 1


def test_a_copy_found_noindex_gives_the_canonical_url_up(index):
    indexer = Indexer(index, None)
    s = Searcher(index)
    canon = "http://a.example/c"
    indexer.write([Document.of_page("http://a.example/c?x=1", "t", "ugli fruit", T0, [], canon, [])])
    assert s.search("ugli").total == 1
    indexer.write([Document.of_page("http://a.example/c?x=1", "t", "ugli fruit", T0 + 1, [], canon,
                                    ["noindex"])])
    assert s.search("ugli").total == 0
    # the next copy that names it takes the canonical URL, whatever its fetch time
    indexer.write([Document.of_page("http://a.example/c?y=2", "t", "vanilla", T0 - 100, [], canon, [])])
    assert [h.url for h in s.search("vanilla").results] == ["http://a.example/c?y=2"]


def test_items_with_robots_and_canonical_become_documents():
    item = {"url": "http://a.example/", "final_url": "http://a.example/", "status": 200,
            "content_type": "text/html", "title": "t", "text": "x", "fetch_time": T0,
            "outlinks": [{"url": "http://b.example/", "anchor": "b"},
                         {"url": "http://c.example/", "anchor": "c", "nofollow": True}],
            "duplicate_of": None, "robots": [], "canonical": "http://a.example/main"}
    d = Document.from_item(item)
    assert d.outlinks == [("http://b.example/", "b")]  # a nofollow link vouches for nothing
    assert d.key == "http://a.example/main" and d.own_key == "http://a.example/"
    assert Document.unpack(d.pack()) == d
    gone = Document.from_item({**item, "robots": ["noindex", "nofollow"]})
    assert gone.noindex and gone.text == "" and Document.unpack(gone.pack()) == gone
    # items of before the fields existed
    old = {k: v for k, v in item.items() if k not in ("robots", "canonical")}
    assert Document.from_item(old).key == "http://a.example/"
