"""The content-seen test (crawlproj.due.contentseen) on a real Redis-protocol server."""

from __future__ import annotations

import random

import pytest
import redis
from scrapy.http import HtmlResponse, Request
from scrapy.utils.test import get_crawler

from crawlproj.due.contentseen import (
    ContentSeen,
    bands,
    content_fingerprint,
    is_text,
    resemblance,
    sketch,
    words,
)
from crawlproj.redis.keyspace import Keyspace
from crawlproj.spiders.web import WebSpider

VOCAB = [f"word{i}" for i in range(5000)]


def page(text_words, title="t", links=()):
    body = " ".join(text_words)
    anchors = "".join(f'<a href="{u}">{u}</a>\n' for u in links)
    return (f"<html><head><title>{title}</title><style>p {{color: red}}</style></head>"
            f"<body><div class='nav'>Home | About</div><p>{body}</p>{anchors}</body></html>"
            ).encode()


def text(n, seed):
    rng = random.Random(seed)
    return [rng.choice(VOCAB) for _ in range(n)]


def content_seen(redis_url, crawl="cs", **kw):
    r = redis.Redis.from_url(redis_url)
    return ContentSeen(r, Keyspace.open(r, crawl, kw.pop("partitions", 1)), **kw)


def test_text_fingerprints_ignore_whitespace_binary_ones_do_not():
    a = b"<html>\n  <body><p>Hello   world</p>\n</body></html>\n"
    b = b"<html> <body><p>Hello world</p> </body></html>"
    assert content_fingerprint(a) == content_fingerprint(b)
    assert content_fingerprint(a) != content_fingerprint(b"<html><body><p>Hello world!</p>")
    assert content_fingerprint(a, text=False) != content_fingerprint(b, text=False)
    assert is_text(b"text/html; charset=utf-8") and is_text("application/xhtml+xml")
    assert not is_text(b"image/png") and not is_text(None)


def test_a_document_seen_under_another_url_names_the_first(redis_url):
    cs = content_seen(redis_url, partitions=4)
    body = page(text(200, 1))
    first = cs.test("http://a.ex/", body)
    assert first.duplicate_of is None and (first.commands, first.round_trips) == (1, 1)
    again = cs.test("http://mirror.ex/copy", body.replace(b" ", b"\n  "))
    assert again.duplicate_of == "http://a.ex/" and not again.near
    assert (again.commands, again.round_trips) == (1, 1)
    # the same URL fetched again (a retry, a recrawl) is not a duplicate of itself
    assert cs.test("http://a.ex/", body).duplicate_of is None
    assert cs.test("http://b.ex/", page(text(200, 2))).duplicate_of is None
    # the sets live in the crawl's partitions, spread by fingerprint
    r, ks = cs.redis, cs.keyspace
    assert sum(any(r.scan_iter(ks.content_pattern(p))) for p in range(ks.partitions)) >= 2


def test_one_batch_tests_its_documents_in_order_in_one_round_trip(redis_url):
    """The middleware's GroupCall hands the responses that arrive together to
    test_many: a copy in the same batch as its first URL is its duplicate."""
    cs = content_seen(redis_url, partitions=4)
    a, b = page(text(200, 11)), page(text(200, 12))
    cs.test("http://old.ex/", b)
    verdicts = cs.test_many([("http://a.ex/", a, True, 1.5), ("http://b.ex/", b, True, None),
                             ("http://mirror.ex/", a.replace(b" ", b"\n "), True, 2.5),
                             ("http://a.ex/", a, True, 3.0)])
    assert [(v.duplicate_of, v.captured) for v in verdicts] == [
        (None, None), ("http://old.ex/", None), ("http://a.ex/", 1.5), (None, None)]
    assert [v.commands for v in verdicts] == [1, 1, 1, 1]
    assert cs.test_many([]) == []


def test_sketches_estimate_resemblance():
    base = text(400, 3)
    edited = list(base)
    for i in (40, 200, 350):
        edited[i] = "changed"
    other = text(400, 4)
    sa, sb, sc = sketch([w.encode() for w in base]), sketch([w.encode() for w in edited]), \
        sketch([w.encode() for w in other])
    assert resemblance(sa, sb) > 0.85
    assert resemblance(sa, sc) < 0.1
    assert set(bands(sa, 6)) & set(bands(sb, 6))
    assert not set(bands(sa, 6)) & set(bands(sc, 6))
    assert words(b"<p>Hello, <b>World</b></p><script>var x</script>") == [b"hello", b"world"]


def test_near_duplicates_are_a_setting_away(redis_url):
    base = text(400, 5)
    edited = list(base)
    for i in (10, 150, 390):
        edited[i] = "different"
    exact = content_seen(redis_url)
    exact.test("http://a.ex/1", page(base))
    assert exact.test("http://a.ex/2", page(edited)).duplicate_of is None

    near = content_seen(redis_url, crawl="near", near=True)
    near.test("http://b.ex/1", page(base))
    v = near.test("http://b.ex/2", page(edited))
    assert v.duplicate_of == "http://b.ex/1" and v.near and v.resemblance >= 0.9
    assert v.round_trips == 2  # bands matched: the candidate's sketch was read
    # the same template around other text is not a near duplicate
    u = near.test("http://b.ex/3", page(text(400, 6)))
    assert u.duplicate_of is None and u.round_trips == 1
    # half the text changed: not "a few words"
    half = base[:200] + text(200, 7)
    assert near.test("http://b.ex/4", page(half)).duplicate_of is None


def test_threshold_is_checked():
    with pytest.raises(ValueError, match="CONTENTSEEN_NEAR_THRESHOLD"):
        ContentSeen(None, Keyspace("cs", 1), threshold=1.5)


def test_spider_records_a_duplicate_without_following_its_links():
    spider = WebSpider.from_crawler(get_crawler(WebSpider, {}))
    body = page(text(50, 8), links=["/x", "/y"])
    request = Request("http://m.ex/", meta={"duplicate_of": "http://a.ex/"})
    response = HtmlResponse("http://m.ex/", body=body, request=request,
                            headers={"Content-Type": "text/html"})
    out = list(spider.parse(response))
    assert len(out) == 1 and out[0]["duplicate_of"] == "http://a.ex/"
    assert out[0]["outlinks"] == []
    # the same page, not a duplicate: its links are followed
    response = HtmlResponse("http://m.ex/", body=body, request=Request("http://m.ex/"),
                            headers={"Content-Type": "text/html"})
    out = list(spider.parse(response))
    assert out[0]["duplicate_of"] is None
    assert {r.url for r in out[1:]} == {"http://m.ex/x", "http://m.ex/y"}
