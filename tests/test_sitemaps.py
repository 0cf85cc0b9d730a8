"""Sitemaps, piece by piece: the parser on real-shaped and hostile files, the
location rules, robots.txt's Sitemap lines, lastmod, and what a lastmod does
to a scheduled page in a real Redis."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from types import SimpleNamespace

import pytest
import redis

from crawlproj.frontier import codec
from crawlproj.frontier.frontier import URL, Batch, Frontier, Host, Release
from crawlproj.recrawl.record import pack_payload, unpack_payload
from crawlproj.recrawl.schedule import Recrawl
from crawlproj.recrawl.state import REPORTED, Observation, RecrawlState, update
from crawlproj.redis.keyspace import Keyspace
from crawlproj.sitemaps.budget import FileBudget
from crawlproj.sitemaps.discovery import SitemapScope, read_meta, sitemap_lines
from crawlproj.sitemaps.lastmod import LastmodFeed, observe, w3c_datetime
from crawlproj.sitemaps.parse import SitemapReader
from crawlproj.urls import host_of

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
MB = 1024 * 1024


def urlset(n: int, host: str = "www.example.org", extra: str = "") -> bytes:
    """A urlset as sites publish them: an XML declaration, the namespace, an
    image extension, lastmod with a time zone, changefreq and priority."""
    rows = "\n".join(
        f"  <url>\n    <loc>https://{host}/articles/{i}.html?lang=en&amp;p={i}</loc>\n"
        f"    <lastmod>2024-05-{1 + i % 28:02d}T08:30:00+02:00</lastmod>\n"
        f"    <changefreq>weekly</changefreq>\n    <priority>0.5</priority>\n"
        f"    <image:image><image:loc>https://{host}/img/{i}.jpg</image:loc></image:image>\n"
        f"  </url>" for i in range(n))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}\n'
            f'  xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">\n'
            f"{rows}\n{extra}</urlset>\n").encode()


def read(body: bytes, max_urls: int = 50_000, max_bytes: int = 50 * MB):
    reader = SitemapReader(body, max_urls, max_bytes)
    return reader, list(reader)


def reasons(reader) -> list[str]:
    return [r for r, _ in reader.problems]


# -- the parser ------------------------------------------------------------------


def test_a_urlset_gives_its_locs_and_lastmods_and_nothing_of_the_extensions():
    reader, entries = read(urlset(3))
    assert reader.kind == "urlset" and reader.problems == []
    assert [e.loc for e in entries] == [f"https://www.example.org/articles/{i}.html?lang=en&p={i}"
                                        for i in range(3)]
    assert entries[1].lastmod == "2024-05-02T08:30:00+02:00"


def test_an_index_gives_its_sitemaps():
    body = (f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex {NS}>'
            "<sitemap><loc>https://www.example.org/sitemap-posts.xml.gz</loc>"
            "<lastmod>2024-05-01</lastmod></sitemap>"
            "<sitemap><loc> https://www.example.org/sitemap-pages.xml </loc></sitemap>"
            "</sitemapindex>").encode()
    reader, entries = read(body)
    assert reader.kind == "index"
    assert [e.loc for e in entries] == ["https://www.example.org/sitemap-posts.xml.gz",
                                        "https://www.example.org/sitemap-pages.xml"]


def test_a_text_sitemap_is_one_url_a_line():
    body = ("\ufeffhttps://www.example.org/\r\nhttps://www.example.org/about\r\n\r\n"
            "not a url\nhttps://www.example.org/caf\u00e9").encode()
    reader, entries = read(body)
    assert reader.kind == "text"
    assert [e.loc for e in entries] == ["https://www.example.org/", "https://www.example.org/about",
                                        "https://www.example.org/caf\u00e9"]
    assert reader.bad_entries == 1 and reasons(reader) == ["bad_entry"]


def test_gzip_is_told_by_its_magic_bytes_not_its_name():
    reader, entries = read(gzip.compress(urlset(5)))
    assert reader.compressed and reader.kind == "urlset" and len(entries) == 5
    # a file called .xml.gz that is plain XML is read as XML
    reader, entries = read(urlset(5))
    assert not reader.compressed and len(entries) == 5
    # and gzip members one after another are one file (RFC 1952 §2.2)
    text = b"https://www.example.org/a\n"
    reader, entries = read(gzip.compress(text) + gzip.compress(b"https://www.example.org/b\n"))
    assert [e.loc for e in entries] == ["https://www.example.org/a", "https://www.example.org/b"]


def test_a_truncated_gzip_keeps_what_came_before_the_cut():
    body = gzip.compress(urlset(2000))
    reader, entries = read(body[:len(body) // 2])
    assert reasons(reader) == ["not_gzip"]
    assert "truncated" in reader.problems[0][1]
    assert 100 < len(entries) < 2000  # the first half's entries, none made up
    assert all(e.loc.endswith(f"p={i}") for i, e in enumerate(entries))


def test_a_cut_document_gives_no_half_entry():
    body = urlset(3)
    cut = body[:body.index(b"/articles/2.html")]
    reader, entries = read(cut)
    assert [e.loc[-4:] for e in entries] == ["&p=0", "&p=1"] and reasons(reader) == ["malformed"]


def test_garbage_after_the_gzip_magic_is_no_sitemap():
    reader, entries = read(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 10)
    assert entries == [] and reader.kind is None and reasons(reader) == ["not_gzip"]


def test_malformed_xml_keeps_the_entries_before_the_error():
    body = urlset(10).replace(b"<url>\n    <loc>https://www.example.org/articles/6.html",
                              b"<url>\n    <loc>https://www.example.org/articles/6.html</oops>", 1)
    reader, entries = read(body)
    assert len(entries) == 6 and reasons(reader) == ["malformed"]


@pytest.mark.parametrize("body", [
    b"<!DOCTYPE html>\n<html><head><title>Not found</title></head><body>Oops</body></html>",
    b'<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "x">\n'
    b'<html xmlns="http://www.w3.org/1999/xhtml"><body><a href="/x">x</a></body></html>',
    b'<?xml version="1.0"?><rss version="2.0"><channel><link>http://a/</link></channel></rss>',
    b"{\"urls\": [\"https://www.example.org/\"]}",
    b"",
])
def test_what_is_no_sitemap_is_said_so(body):
    reader, entries = read(body)
    assert entries == [] and reader.kind is None and reasons(reader) == ["not_sitemap"]


def test_past_max_urls_reading_stops():
    reader, entries = read(urlset(150), max_urls=100)
    assert len(entries) == 100 and reasons(reader) == ["too_many_urls"]


def test_past_max_bytes_reading_stops_and_keeps_the_whole_entries():
    body = urlset(200)
    reader, entries = read(body, max_bytes=len(body) // 4)
    assert reasons(reader) == ["too_large"]
    assert reader.size == len(body) // 4 and 20 < len(entries) < 60
    text = b"".join(b"https://www.example.org/%d\n" % i for i in range(1000))
    reader, entries = read(text, max_bytes=1000)
    assert [e.loc for e in entries] == [f"https://www.example.org/{i}" for i in range(len(entries))]
    assert reasons(reader) == ["too_large"]  # no half URL from the cut line


def _gzip_bomb(megabytes: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = f'<?xml version="1.0"?><urlset {NS}><url><loc>https://www.example.org/a</loc></url>'
    out = [z.compress(head.encode())]
    block = b" " * MB
    for _ in range(megabytes):
        out.append(z.compress(block))
    out.append(z.compress(b"</urlset>") + z.flush())
    return b"".join(out)


def test_a_gzip_bomb_is_inflated_up_to_the_limit_only():
    bomb = _gzip_bomb(300)  # 300 MB of blanks in about 300 KB
    assert len(bomb) < MB
    tracemalloc.start()
    try:
        reader, entries = read(bomb, max_bytes=2 * MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [e.loc for e in entries] == ["https://www.example.org/a"]
    assert reasons(reader) == ["too_large"] and reader.size == 2 * MB
    assert peak < 8 * MB, peak  # the limit's worth, not the bomb's 300 MB


def test_a_billion_laughs_is_refused_not_expanded():
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY l0 "lol">{laughs}]>'
            f"<urlset {NS}><url><loc>https://www.example.org/&l9;</loc></url>"
            f"<url><loc>https://www.example.org/ok</loc></url></urlset>").encode()
    tracemalloc.start()
    try:
        reader, entries = read(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # libxml2 refuses the amplification itself; the entity, had it been
    # expanded, was 3 GB of "lol"
    assert entries == [] and reasons(reader) == ["malformed"] and peak < 4 * MB


def test_an_external_entity_is_never_fetched(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{secret}">]>'
            f"<urlset {NS}><url><loc>https://www.example.org/&xxe;</loc></url>"
            f"<url><loc>https://www.example.org/ok?a=1&amp;b=2</loc></url></urlset>").encode()
    reader, entries = read(body)
    assert [e.loc for e in entries] == ["https://www.example.org/ok?a=1&b=2"]
    assert reader.bad_entries == 1 and reasons(reader) == ["bad_entry"]


def test_an_endlessly_nested_document_stops_at_lxmls_depth_bound():
    body = f"<urlset {NS}>".encode() + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</urlset>"
    reader, entries = read(body)
    assert entries == [] and reasons(reader) == ["malformed"]


def test_a_whole_protocol_sized_sitemap_is_read():
    body = gzip.compress(urlset(50_000))
    reader, entries = read(body)
    assert len(entries) == 50_000 and reader.problems == []


# -- where sitemaps come from, and what they may list -----------------------------


def test_robots_txt_names_sitemaps_in_any_case_anywhere():
    robots = (b"User-agent: *\nDisallow: /private/\n\nSitemap: https://www.example.org/s1.xml\n"
              b"SITEMAP:https://www.example.org/s2.xml.gz # the news\n"
              b"User-agent: otherbot\nsitemap: /relative.xml\nSitemap: ftp://x.example/s.xml\n"
              b"Sitemap: https://www.example.org/s1.xml\n")
    assert sitemap_lines(robots, "https://www.example.org") == [
        "https://www.example.org/s1.xml", "https://www.example.org/s2.xml.gz",
        "https://www.example.org/relative.xml"]
    assert sitemap_lines(None, "https://www.example.org") == []


def test_a_sitemap_lists_its_own_directory_of_its_own_origin():
    scope = SitemapScope("https://www.example.org/catalog/sitemap.xml")
    assert scope.check("https://www.example.org/catalog/shoes.html") == (
        "https://www.example.org/catalog/shoes.html", None)
    assert scope.check("https://www.example.org/about.html") == (None, "outside_path")
    assert scope.check("http://www.example.org/catalog/x") == (None, "cross_host")
    assert scope.check("https://evil.example/catalog/x") == (None, "cross_host")
    assert scope.check("javascript:alert(1)") == (None, "malformed")
    assert scope.check("https://www.example.org/" + "a" * 2100) == (None, "malformed")


def test_a_sitemap_robots_txt_names_lists_its_origin_and_the_naming_one():
    scope = SitemapScope("https://cdn.example.net/sitemaps/www.xml", "https://www.example.org")
    assert scope.check("https://www.example.org/any/path")[1] is None
    assert scope.check("https://cdn.example.net/other/path")[1] is None
    assert scope.check("https://shop.example.org/")[1] == "cross_host"


def test_sitemap_meta_from_a_payload_is_checked():
    assert read_meta([2, "https://www.example.org"]) == (2, "https://www.example.org")
    for bad in (None, "x", [1], [-1, ""], [True, ""], [1, 5], {"a": 1}):
        assert read_meta(bad) is None


# -- lastmod -------------------------------------------------------------------------


def test_w3c_datetimes():
    assert w3c_datetime("2005-01-01") == 1104537600.0
    assert w3c_datetime("2004-12-23T18:00:15+00:00") == 1103824815.0
    assert w3c_datetime("1997-07-16T19:20:30.45+01:00") == pytest.approx(869077230.45)
    assert w3c_datetime("1997-07") == 867715200.0
    for bad in ("yesterday", "2024-13-01", "2024-01-01T10:00", "2024-01-01T10:00+25:00", "", None):
        assert w3c_datetime(bad) is None


HOST = "www.example.org"


def scheduled(fetched_at: float, lm: int = 0, digest: bytes = b"\x07" * 8) -> bytes:
    """A page's payload in its host's recrawl queue after its first fetch."""
    state = update(RecrawlState(), Observation(fetched_at, True, float(lm) or None))
    return pack_payload("/news", False, 1, [state.pack(), '"e1"', lm, digest])


def test_a_lastmod_past_the_last_fetch_is_a_change_dated_by_it():
    payload = scheduled(1000.0, lm=900)
    assert observe(payload, 999.0, 5000.0) is None          # not moved
    new, old_bucket, new_bucket = observe(payload, 3000.0, 5000.0)
    tail, https, depth, record = unpack_payload(new)
    state = RecrawlState.unpack(record[0])
    assert (tail, depth, record[1], record[2]) == ("/news", 1, '"e1"', 900)
    # the reported change, and the first fetch's Last-Modified (its age, 100 s)
    assert (state.fetches, state.changes, state.lm_changes) == (1, 1, 2)
    assert state.last_fetch == 5000.0 and state.lm_exposure == pytest.approx(2100.0)
    assert state.flags & REPORTED and record[3] == b"\x07" * 8
    assert old_bucket == 0 and new_bucket > 0


def test_the_fetch_after_a_lastmod_change_counts_it_once():
    """Without the rebase, the fetch that follows would find the digest
    changed and count the change the lastmod had counted already."""
    from scrapy import Request

    from crawlproj.recrawl.record import HELD, OBSERVED, STORED, Fetch

    recrawl = Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0)
    new, _, _ = observe(scheduled(1000.0), 3000.0, 5000.0)
    record = unpack_payload(new)[3]
    fetch = Fetch(200, '"e2"', None, None, b"\x09" * 8, 6000.0)
    request = Request(f"http://{HOST}/news", meta={HELD: record, OBSERVED: fetch})
    after = recrawl.after(request, recrawl=True)
    record = codec.decode(after.payload, host=HOST).meta.get(STORED) or \
        unpack_payload(after.payload)[3]
    state = RecrawlState.unpack(record[0])
    assert (state.fetches, state.changes) == (1, 1) and state.last_fetch == 6000.0
    assert record[3] == b"\x09" * 8 and not state.flags & REPORTED


@pytest.fixture
def frontier(redis_url):
    r = redis.Redis.from_url(redis_url)
    return Frontier(r, Keyspace.open(r, "sm", 1))


def schedule(f: Frontier, url: str, payload: bytes, due_s: float = 3600.0) -> str:
    """Enqueue url, lease it, and release it into its host's recrawl queue."""
    host = host_of(url)
    f.sync({0: Batch(enqueue=[f.entry(host, url, 0.0, b"x")])})
    (leased,) = f.sync({0: Batch(lease=1)})[0].leased
    f.sync({0: Batch(release=[Release(host, leased.token, Host.OK, URL.RECRAWL, 0, -1,
                                      int(due_s * 1000), payload, -1, 0)])})
    return str(f.due.fingerprint(url))


def test_a_lastmod_makes_a_scheduled_page_due_now_in_redis(frontier):
    f = frontier
    ks = f.keyspace
    now = time.time()
    moved = schedule(f, f"http://{HOST}/news", scheduled(now - 100.0))
    still = schedule(f, f"http://{HOST}/still", scheduled(now - 100.0))
    due_before = f.redis.zscore(ks.recrawl_queue(0, HOST), moved)
    feed = LastmodFeed(f, Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0))
    # server's clock 1000 s ahead of ours: lastmods are read by their age at its Date
    date = now + 1000.0
    revised, future = feed.feed([(f"http://{HOST}/news", date - 50.0),     # after the fetch
                                 (f"http://{HOST}/still", date - 500.0),   # before it
                                 (f"http://{HOST}/never-crawled", date - 1.0),
                                 (f"http://{HOST}/future", date + 3600.0)], date, now)
    assert (revised, future) == (1, 1)
    dues = dict(f.redis.zrange(ks.recrawl_queue(0, HOST), 0, -1, withscores=True))
    seconds, micros = f.redis.time()  # due times are the server's clock
    server_ms = seconds * 1000 + micros // 1000
    assert dues[moved.encode()] <= server_ms < due_before
    assert dues[still.encode()] > server_ms
    record = unpack_payload(f.redis.hget(ks.payloads(0, HOST), moved))[3]
    state = RecrawlState.unpack(record[0])
    assert state.changes == 1 and state.flags & REPORTED
    # the host, waiting for its later recrawl, may be contacted now
    assert f.redis.zscore(ks.heap(0), HOST) <= time.time() * 1000
    assert [x.payload[:1] for x in f.sync({0: Batch(lease=1)})[0].leased] == [b"\xc1"]


def test_a_revision_never_undoes_a_fetch_made_meanwhile(frontier):
    f = frontier
    payload = scheduled(time.time() - 100.0)
    fp = schedule(f, f"http://{HOST}/news", payload)
    new, old_bucket, new_bucket = observe(payload, time.time() - 10.0, time.time())
    # another worker fetched the page meanwhile: its payload is another
    fresher = scheduled(time.time() - 1.0)
    f.redis.hset(f.keyspace.payloads(0, HOST), fp, fresher)
    assert f.revise(HOST, [(fp, payload, new, old_bucket, new_bucket, "1")]) == 0
    assert f.redis.hget(f.keyspace.payloads(0, HOST), fp) == fresher


def test_the_file_budget_is_one_for_the_whole_crawl(frontier):
    f = frontier
    a, b = FileBudget(f.redis, f.keyspace, 5), FileBudget(f.redis, f.keyspace, 5)
    assert [a.take(HOST, 3), b.take(HOST, 3), a.take(HOST, 3), b.take("other.example", 2)] \
        == [3, 2, 0, 2]
    assert FileBudget(f.redis, f.keyspace, 0).take(HOST, 7) == 7


def test_a_page_the_plan_gives_nothing_is_revised_not_made_due(frontier):
    """Optimal's cut-off: a page changing too fast for the budget is stale
    again soon after any fetch; its reported change is counted, its due time
    stays."""
    from crawlproj.recrawl import buckets
    from crawlproj.recrawl.schedule import live_bucket

    f = frontier
    now = time.time()
    state = RecrawlState()
    for i in range(20):  # seen changed at every fetch, 15 minutes apart
        at = now - 20_000 + i * 900
        state = update(state, Observation(at, True, at - 60))
    fast, slow = live_bucket(state), buckets.bucket_of(0.1 / 86400)
    recrawl = Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1e-4)
    recrawl.set_plan({fast: 100, slow: 100}, 0)
    assert recrawl.starved(fast) and not recrawl.starved(slow)
    fp = schedule(f, f"http://{HOST}/fast", pack_payload("/fast", False, 0,
                                                          [state.pack(), "", 0, b"\x01" * 8]))
    due = f.redis.zscore(f.keyspace.recrawl_queue(0, HOST), fp)
    assert LastmodFeed(f, recrawl).feed([(f"http://{HOST}/fast", now - 30)], now, now) == (1, 0)
    assert f.redis.zscore(f.keyspace.recrawl_queue(0, HOST), fp) == due
    record = unpack_payload(f.redis.hget(f.keyspace.payloads(0, HOST), fp))[3]
    assert RecrawlState.unpack(record[0]).changes == state.changes + 1


def test_the_crawl_log_and_scrapy_report_tell_urls_from_sitemaps():
    """Heritrix's hop M (Hop.MANIFEST) ends the discovery path of a sitemap
    and of the URLs it lists; `scrapy report` counts their attempts."""
    from scrapy import Request

    from crawlproj.stores.crawllog import Line
    from crawlproj.stores.exchange import discovery_path
    from crawlproj.stores.report import CrawlReport

    assert discovery_path(Request("http://a.test/p", meta={"depth": 2, "hop": "M"})) == "LM"
    assert discovery_path(Request("http://a.test/s.xml", meta={"hop": "M", "sitemap": [0, ""]})) == "M"
    assert discovery_path(Request("http://a.test/q", meta={"depth": 2})) == "LL"

    def line(status, url, hops):
        return Line(status, 10, url, hops, "-", "text/html", "#001", "-", "-")

    report = CrawlReport.from_lines([line(200, "http://a.test/p", "LM"), line(404, "http://a.test/x", "M"),
                                     line(200, "http://a.test/q", "LL")])
    assert (report.sitemap_attempts, report.sitemap_documents) == (2, 1)
    assert "URLs from sitemaps (discovery path M): 2 attempts, 1 documents" in report.text()


def test_a_lastmods_age_counts_the_clock_the_pages_server_dates_by():
    """A page whose server was found dating by the wall clock while the
    crawl clock runs RECRAWL_TIME_SCALE times as fast (state flag
    WALL_DATES): its lastmod's age at the sitemap's Date is that many crawl
    seconds; otherwise the server's seconds are the crawl's."""
    from crawlproj.recrawl.state import WALL_DATES

    recrawl = Recrawl(SimpleNamespace(new_share=0.0), "optimal", 1.0, scale=17280.0)
    feed = LastmodFeed(None, recrawl)
    state = update(RecrawlState(), Observation(1000.0, True, 900.0))
    calendar = pack_payload("/a", False, 0, [state.pack(), "", 900, b"\x07" * 8])
    from dataclasses import replace
    wall = pack_payload("/a", False, 0, [replace(state, flags=state.flags | WALL_DATES).pack(),
                                         "", 900, b"\x07" * 8])
    assert feed.on_crawl_clock(calendar, 5.0, 1e6) == 1e6 - 5.0
    assert feed.on_crawl_clock(wall, 5.0, 1e6) == 1e6 - 5.0 * 17280.0

