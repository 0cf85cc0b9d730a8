"""Requests to msgpack and back: callbacks by name, meta kept, never pickle."""

from __future__ import annotations

import msgpack
import pytest
from scrapy import Request, Spider

from crawlproj.frontier import codec


class S(Spider):
    name = "s"

    def parse(self, response):
        yield from ()

    def parse_other(self, response):
        yield from ()

    def failed(self, failure):
        return None


def test_round_trip_keeps_what_describes_the_url():
    spider = S()
    r = Request("http://a.ex/p?q=1", callback=spider.parse_other, errback=spider.failed,
                meta={"depth": 3, "crawl_delay": 2.5, "download_slot": "a.ex",
                      "frontier_score": 1.0, "not_data": object()},
                headers={"Referer": "http://a.ex/"}, priority=4, dont_filter=True)
    back = codec.decode(codec.encode(r, spider), spider)
    assert back.url == r.url and back.priority == 4 and back.dont_filter
    assert back.meta == {"depth": 3, "crawl_delay": 2.5}  # transient and unpackable keys dropped
    assert back.headers[b"Referer"] == b"http://a.ex/"
    assert back.callback == spider.parse_other and back.errback == spider.failed


def test_default_callback_stays_none_and_named_ones_are_one_object():
    spider = S()
    plain = codec.encode(Request("http://a.ex/1"), spider)
    assert "callback" not in msgpack.unpackb(plain)
    assert codec.decode(plain, spider).callback is None  # Scrapy calls spider._parse
    other = codec.encode(Request("http://a.ex/2", callback=spider.parse_other), spider)
    # one bound method per spider, so Scrapy's per-callable checks are cached
    assert codec.decode(other, spider).callback is codec.decode(other, spider).callback


def test_unknown_callback_is_a_clear_error():
    payload = msgpack.packb({"url": "http://a.ex/", "callback": "gone"})
    with pytest.raises(ValueError, match="'gone' not found"):
        codec.decode(payload, S())


def test_referer_is_stored_as_a_tail_of_the_url():
    spider = S()
    r = Request("http://h1.sim.test/p/004567.html", meta={"depth": 3},
                headers={"Referer": "http://h1.sim.test/p/001234.html", "X-A": "1"})
    payload = codec.encode(r, spider)
    d = msgpack.unpackb(payload)
    assert d["r"] == [len("http://h1.sim.test/p/00"), b"1234.html"]
    plain = Request(r.url, meta={"depth": 3}, headers={"Referer": "http://h1.sim.test/p/001234.html"})
    assert len(codec.encode(plain, spider)) == len(r.url) + 30  # URL, depth, 9-byte tail, framing
    back = codec.decode(payload, spider)
    assert back.headers[b"Referer"] == b"http://h1.sim.test/p/001234.html"
    assert back.headers[b"X-A"] == b"1" and back.meta == {"depth": 3}
    # another host's page: the whole Referer is the tail
    r = Request("https://b.ex/", headers={"Referer": "http://a.ex/x"})
    assert codec.decode(codec.encode(r, spider), spider).headers[b"Referer"] == b"http://a.ex/x"


def test_payloads_with_full_field_names_are_read():
    payload = msgpack.packb({"url": "http://a.ex/", "meta": {"depth": 1},
                             "headers": {b"Referer": [b"http://a.ex/r"]}}, use_bin_type=True)
    back = codec.decode(payload, S())
    assert (back.url, back.meta, back.headers[b"Referer"]) == ("http://a.ex/", {"depth": 1},
                                                              b"http://a.ex/r")


@pytest.mark.parametrize("url,stored", [
    ("http://h1.sim.test/p/1.html", "/p/1.html"),
    ("https://h1.sim.test/?q=1", "/?q=1"),
    ("http://h1.sim.test", ""),
    ("http://h1.sim.test.evil.ex/", "http://h1.sim.test.evil.ex/"),  # not the host
    ("http://h1.sim.test#top", "http://h1.sim.test#top"),
])
def test_url_kept_without_its_host(url, stored):
    spider = S()
    payload = codec.encode(Request(url), spider, "h1.sim.test")
    assert msgpack.unpackb(payload)["u"] == stored
    assert codec.decode(payload, spider, "h1.sim.test").url == Request(url).url
    if stored != url:
        with pytest.raises(ValueError, match="needs its host"):
            codec.decode(payload, spider)
