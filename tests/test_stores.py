"""Page metadata, link store, crawl log and report on a real Redis server."""

from __future__ import annotations

import time

import msgpack
import pyarrow.parquet as pq
import pytest
import redis as redis_lib
from scrapy.http import HtmlResponse, Request

from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.crawllog import format_line, parse_line
from crawlproj.stores.exchange import Exchange, FailedAttempt
from crawlproj.stores.graph import export_graph
from crawlproj.stores.linkstore import LinkStore, decode_page, encode_page, node_id
from crawlproj.stores.pagemeta import PageMetaStore
from crawlproj.stores.report import SIZE_BINS, CrawlReport, outcome, size_bin


def fetch(url, body=b"<html>x</html>", status=200, at=None, ctype="text/html"):
    req = Request(url)
    resp = HtmlResponse(url, status=status, body=body, request=req,
                        headers={"Content-Type": ctype})
    t = time.time() if at is None else at
    return Exchange.capture(req, resp, t, t + 0.01)


@pytest.fixture
def r(redis_url):
    client = redis_lib.Redis.from_url(redis_url)
    yield client
    client.close()


def test_page_metadata_history(r):
    store = PageMetaStore(r, Keyspace.open(r, "meta", 4), buckets=64)
    url = "http://h1.example/a.html"
    t0 = 1_700_000_000.0
    bodies = [b"A", b"A", b"B", b"B", b"A"]
    for i, body in enumerate(bodies):
        store.write([store.entry(fetch(url, body, at=t0 + i))])
    # an error in between does not count as a change, nor reset the digest
    store.write([store.entry(fetch(url, b"oops", status=500, at=t0 + 10))])
    store.write([store.entry(fetch(url, b"A", at=t0 + 11))])
    m = store.get(url)
    assert (m.fetches, m.changes) == (7, 2)
    assert m.first_fetch == pytest.approx(t0) and m.last_fetch == pytest.approx(t0 + 11)
    assert (m.status, m.content_type, m.length) == (200, "text/html", 1)
    assert m.digest == fetch(url, b"A").digest64.hex()
    assert m.rate_bucket == 0
    assert store.get("http://h1.example/never.html") is None


def test_page_metadata_batch_across_partitions_counts_every_fetch(r):
    keyspace = Keyspace.open(r, "meta2", 4)
    store = PageMetaStore(r, keyspace, buckets=16)
    urls = [f"http://h{i}.example/p{j}.html" for i in range(20) for j in range(5)]
    created = store.write([store.entry(fetch(u)) for u in urls] + [store.entry(fetch(urls[0]))])
    assert created == len(urls)
    assert store.get(urls[0]).fetches == 2
    assert sum(1 for _ in store.scan()) == len(urls)
    # keys are hash-tagged by the partition of the URL's host
    key, _ = store.key(urls[7])
    assert key.startswith(keyspace.prefix(keyspace.partition_of("h1.example")))


def test_page_metadata_keeps_the_canonical_url_of_the_latest_body(r):
    store = PageMetaStore(r, Keyspace.open(r, "meta3", 4), buckets=64)
    url, canon = "http://h1.example/a.html?ref=feed", "http://h1.example/a.html"
    t0 = 1_700_000_000.0
    # no record yet (its fetch's comes first): nothing to add it to
    store.write([store.canonical_entry(url, t0, canon)])
    assert store.get(url) is None
    store.write([store.entry(fetch(url, b"A", at=t0)), store.canonical_entry(url, t0 + 0.5, canon)])
    m = store.get(url)
    assert m.canonical == canon and (m.fetches, m.status) == (1, 200)
    # a self-referencing canonical, in any spelling, is not recorded
    assert store.canonical_entry(url, t0, "http://H1.example/a.html?ref=feed#top") is None
    # a 304 keeps it, an error keeps it; a new body clears it until parsed
    store.write([store.entry(fetch(url, b"", status=304, at=t0 + 1))])
    store.write([store.entry(fetch(url, b"oops", status=500, at=t0 + 2))])
    assert store.get(url).canonical == canon
    store.write([store.entry(fetch(url, b"B", at=t0 + 3))])
    m = store.get(url)
    assert m.canonical == "" and (m.fetches, m.changes) == (4, 1)
    # the parse of an older fetch, late, does not set it on the newer one
    store.write([store.canonical_entry(url, t0 + 2.5, canon)])
    assert store.get(url).canonical == ""
    store.write([store.canonical_entry(url, t0 + 3.5, "http://h1.example/b.html")])
    assert store.get(url).canonical == "http://h1.example/b.html"


def _page(i, n_links=5):
    return ([{"url": f"http://h{(i + k) % 7}.example/p{i + k}.html", "anchor": f"a{i} {k}"}
             for k in range(n_links)])


def test_link_store_working_set_segments_and_export(r, tmp_path):
    store = LinkStore(r, Keyspace.open(r, "links", 2), tmp_path / "segments", segment_pages=10)
    expected = set()
    due = set()
    for i in range(45):
        src = f"http://h{i % 7}.example/p{i}.html"
        links = _page(i, i % 6)  # some pages have no links
        value, n = encode_page(src, 1000.0 + i, links)
        due.update(store.append([(store.partition_of(src), value)]))
        expected.update((node_id(src), node_id(x["url"]), x["anchor"]) for x in links)
    for p in sorted(due):
        while store.compact(p):
            pass
    stats = store.stats()
    assert stats["segment_pages"] > 0 and stats["redis_pages"] > 0
    assert stats["segment_pages"] + stats["redis_pages"] == 45
    # a page fetched again: only its latest links are exported
    src = "http://h0.example/p0.html"
    value, _ = encode_page(src, 5000.0, [{"url": "http://h9.example/new.html", "anchor": "new"}])
    store.append([(store.partition_of(src), value)])
    expected = {e for e in expected if e[0] != node_id(src)}
    expected.add((node_id(src), node_id("http://h9.example/new.html"), "new"))

    counts = export_graph(store, tmp_path / "out")
    edges = pq.read_table(tmp_path / "out" / "edges.parquet").to_pylist()
    urls = pq.read_table(tmp_path / "out" / "urls.parquet").to_pylist()
    assert {(e["src"], e["dst"], e["anchor"]) for e in edges} == expected
    assert len(edges) == len(expected) == counts["edges"]
    ids = {u["id"]: u for u in urls}
    assert all(e["src"] in ids and e["dst"] in ids for e in edges)
    assert sum(u["crawled"] for u in urls) == 45 == counts["pages"]
    assert ids[node_id("http://h9.example/new.html")]["url"] == "http://h9.example/new.html"
    assert ids[node_id(src)]["host"] == "h0.example"


def test_nofollow_marks_in_the_working_set_segments_and_export(r, tmp_path):
    """A link the crawler did not follow for nofollow is stored, marked, in
    Redis and in segments, and exported with nofollow true; a copy's
    fingerprint and the marks travel together; segments written before
    links carried marks export them as followed."""
    store = LinkStore(r, Keyspace.open(r, "nofollow", 1), tmp_path / "segments", segment_pages=4)
    marked = set()
    for i in range(10):
        src = f"http://h1.example/p{i}.html"
        links = _page(i, 11)  # more than a byte of marks
        for k in range(len(links)):
            if (i + k) % 3 == 0:
                links[k]["nofollow"] = True
                marked.add((node_id(src), node_id(links[k]["url"])))
        value, _ = encode_page(src, 1000.0 + i, links, "http://h1.example/orig.html" if i == 2 else None)
        page = decode_page(value)
        assert page.nofollow().tolist() == [bool(x.get("nofollow")) for x in links]
        assert page.duplicate_of == (node_id("http://h1.example/orig.html") if i == 2 else None)
        store.append([(0, value)])
    plain, _ = encode_page("http://h1.example/plain.html", 1.0, _page(3))
    assert decode_page(plain).marks == b"" and len(msgpack.unpackb(plain)) == 4  # nothing added
    assert store.compact(0) == 4 and store.compact(0) == 4
    export_graph(store, tmp_path / "out")
    edges = pq.read_table(tmp_path / "out" / "edges.parquet").to_pylist()
    assert len(edges) == 110
    assert {(e["src"], e["dst"]) for e in edges if e["nofollow"]} == marked
    # a segment of an earlier version, without the column
    first = store.segments(0)[0]["files"]["edges"]
    pq.write_table(pq.read_table(first).drop_columns(["nofollow"]), first)
    export_graph(store, tmp_path / "out2")
    edges = pq.read_table(tmp_path / "out2" / "edges.parquet").to_pylist()
    older = {node_id(f"http://h1.example/p{i}.html") for i in range(4)}
    assert {(e["src"], e["dst"]) for e in edges if e["nofollow"]} == {m for m in marked if m[0] not in older}


def test_compaction_waits_for_the_lock_holder(r, tmp_path):
    keyspace = Keyspace.open(r, "lock", 1)
    store = LinkStore(r, keyspace, tmp_path / "seg", segment_pages=3)
    for i in range(5):
        src = f"http://h1.example/p{i}.html"
        store.append([(0, encode_page(src, 1.0, _page(i))[0])])
    r.set(keyspace.links_lock(0), "someone-else", px=60000)
    assert store.compact(0) == 0
    assert r.llen(keyspace.links(0)) == 5 and store.segments(0) == []
    r.delete(keyspace.links_lock(0))
    assert store.compact(0) == 3
    assert r.llen(keyspace.links(0)) == 2 and store.segments(0)[0]["pages"] == 3


def test_unwritable_segment_directory_keeps_pages_in_redis(r, tmp_path):
    keyspace = Keyspace.open(r, "nodisk", 1)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = LinkStore(r, keyspace, blocker / "seg", segment_pages=2)
    for i in range(3):
        store.append([(0, encode_page(f"http://h1.example/p{i}.html", 1.0, _page(i))[0])])
    with pytest.raises(OSError):
        store.compact(0)
    assert r.llen(keyspace.links(0)) == 3 and store.segments(0) == []
    assert not r.exists(keyspace.links_lock(0))  # released


def test_crawl_log_line_round_trip():
    ex = fetch("http://h1.example/a b.html", b"x" * 1234)
    ex.hops, ex.via, ex.slot = "LLR", "http://h1.example/", 7
    line = format_line(ex, time.time())
    parsed = parse_line(line)
    assert (parsed.status, parsed.size, parsed.hops, parsed.via, parsed.mime, parsed.thread) == \
        (200, 1234, "LLR", "http://h1.example/", "text/html", "#007")
    assert parsed.url == "http://h1.example/a%20b.html" and parsed.digest == ex.payload_digest
    assert parsed.fetched.startswith(time.strftime("%Y", time.gmtime())) and "+" in parsed.fetched
    assert len(line.split()) == 12
    # no response: size '-', as Heritrix writes it; the fetch was tried, so it has a time
    failed = FailedAttempt(None, "http://nx.example/", -1, "DNSLookupError", time.time(), 0.2)
    parsed = parse_line(format_line(failed, time.time()))
    assert (parsed.status, parsed.size, parsed.mime, parsed.thread) == (-1, None, "no-type", "#000")
    assert parsed.fetched != "-"
    assert format_line(failed, time.time()).endswith("err=DNSLookupError")
    # never sent (robots.txt exclusion): no fetch time either
    excluded = FailedAttempt(None, "http://h1.example/p/", -9998, "robots", time.time(), 0.0)
    assert parse_line(format_line(excluded, time.time())).fetched == "-"


def test_scrapy_report_reads_heritrix_crawl_log():
    """tests/fixtures/heritrix-crawl.log: Heritrix 3 crawl.log lines (its
    UriProcessingFormatter's layout): DNS lookups as dns: URIs with status 1
    or -1, robots.txt as a prerequisite, '-' sizes and fetch times of URIs
    that got no response, -6 after a failed DNS lookup, -61, and a line whose
    empty annotations leave eleven fields."""
    import json
    import subprocess
    import sys

    from tests.e2e import ROOT
    log = ROOT / "tests" / "fixtures" / "heritrix-crawl.log"
    run = subprocess.run([sys.executable, "-m", "scrapy", "report", "--json", str(log)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rep = json.loads(run.stdout)
    assert rep["outcomes"] == {"200 OK": 3, "404 Not Found": 1, "3xx redirect": 1,
                               "Excluded by robots.txt": 1, "TCP error": 2, "DNS error": 1, "Other": 1}
    assert rep["attempts"] == 10 and rep["robots_fetches"] == 1
    assert (rep["dns_lookups"], rep["dns_failures"]) == (2, 1)
    assert (rep["documents"], rep["document_bytes"]) == (3, 10422 + 5120 + 2048)
    assert rep["statuses"]["-61"] == 1


def test_report_bins_and_outcomes():
    # Mercator Fig. 8: a document of size n is in the rightmost bin whose label <= n
    assert len(SIZE_BINS) == 22
    assert [size_bin(n) for n in (0, 1, 2, 3, 4, 1023, 1024, 1 << 20, 1 << 30)] == \
        [0, 1, 2, 2, 3, 10, 11, 21, 21]
    assert [outcome(s) for s in (200, 404, 301, 302, -9998, -2, -3, -4, -1, 500, 403, -5)] == \
        ["200 OK", "404 Not Found", "3xx redirect", "3xx redirect", "Excluded by robots.txt",
         "TCP error", "TCP error", "TCP error", "DNS error", "Other", "Other", "Other"]
    lines = [parse_line(f"2026-01-01T00:00:00.000Z {s} {n} {u} {h} - {m} #000 - - - -", "w")
             for s, n, u, h, m in [(200, 100, "http://a.example/1", "L", "text/html"),
                                    (200, 5000, "http://a.example/2", "L", "image/png"),
                                    (200, 70, "http://b.org/", "-", "text/html"),
                                    (404, 10, "http://a.example/x", "L", "text/html"),
                                    (404, 10, "http://a.example/robots.txt", "P", "text/plain"),
                                    (-9998, 0, "http://a.example/private/", "L", "no-type")]]
    rep = CrawlReport.from_lines(lines)
    assert rep.attempts == 5 and rep.robots_fetches == 1 and rep.documents == 3
    assert rep.outcomes["Excluded by robots.txt"] == 1 and rep.outcomes["404 Not Found"] == 1
    assert rep.content_types == {"text/html": 2, "image/png": 1}
    assert rep.servers_with_at_least(rep.pages_per_host) == [(1, 2)]
    hosts, pages = rep.tlds()
    assert hosts == {".example": 1, ".org": 1} and pages == {".example": 2, ".org": 1}
    text = rep.text()
    assert "Outcome of download attempts" in text and "Excluded by robots.txt" in text


def test_a_segment_written_in_chunks_holds_what_one_write_would(r, tmp_path, monkeypatch):
    """Compaction reads, decodes and writes COMPACT_CHUNK pages at a time
    (the worker's heap kept a whole segment's objects): the segment must
    hold every page and edge once, in order, and each URL once, as the
    tables of all its pages at once would."""
    from crawlproj.stores import linkstore
    monkeypatch.setattr(linkstore, "COMPACT_CHUNK", 3)
    store = LinkStore(r, Keyspace.open(r, "chunks", 1), tmp_path / "segments", segment_pages=10)
    values = []
    for i in range(12):
        value, _ = encode_page(f"http://h{i % 3}.example/p{i}.html", 1000.0 + i, _page(i, i % 4 + 2))
        values.append(value)
        store.append([(0, value)])
    assert store.compact(0) == 10
    pages = [decode_page(v) for v in values[:10]]
    edges, urls = linkstore.pages_to_tables(pages)
    files = store.segments(0)[0]["files"]
    assert pq.read_table(files["edges"]).to_pylist() == edges.to_pylist()
    got = pq.read_table(files["urls"]).to_pylist()
    assert len(got) == len({u["id"] for u in got})
    assert sorted(got, key=lambda u: u["id"]) == sorted(urls.to_pylist(), key=lambda u: u["id"])
    assert pq.read_table(files["pages"]).to_pylist() == linkstore.pages_table(pages).to_pylist()
    assert store.stats()["redis_pages"] == 2
    assert not list((tmp_path / "segments").glob("*.tmp"))
