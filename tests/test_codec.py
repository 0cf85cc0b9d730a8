"""Requests to msgpack and back: callbacks by name, meta kept, never pickle."""

from __future__ import annotations

import msgpack
import pytest
from scrapy import FormRequest, Request, Spider

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
    assert b"X-A" not in back.headers and back.meta == {"depth": 3}  # not a header the spider keeps
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
    ("http://h1.sim.test.evil.ex/", "http://h1.sim.test.evil.ex/"),  # not the host
])
def test_url_kept_without_its_host(url, stored):
    spider = S()
    payload = codec.encode(Request(url), spider, "h1.sim.test")
    assert msgpack.unpackb(payload)["u"] == stored
    if ".evil." in url:  # a URL kept under another host's key is refused on decode
        with pytest.raises(codec.BadPayload, match="is not on h1.sim.test"):
            codec.decode(payload, spider, "h1.sim.test")
        return
    assert codec.decode(payload, spider, "h1.sim.test").url == Request(url).url
    if stored != url:
        with pytest.raises(ValueError, match="needs its host"):
            codec.decode(payload, spider)


@pytest.mark.parametrize("url", ["http://h1.sim.test", "http://h1.sim.test#top"])
def test_url_without_a_path_comes_back_as_scrapy_made_it(url):
    """w3lib 2.6 gives such a URL the path "/", earlier releases did not: kept
    without its host or whole, it is decoded as the request had it."""
    request = Request(url)
    spider = S()
    back = codec.decode(codec.encode(request, spider, "h1.sim.test"), spider, "h1.sim.test")
    assert back.url == request.url



# -- a payload is no more trusted than a URL from the web ------------------------


def bad(payload: dict, spider=None, host="a.ex", max_url_length=2083) -> str:
    with pytest.raises(codec.BadPayload) as info:
        codec.decode(msgpack.packb(payload, use_bin_type=True), spider or S(), host,
                     max_url_length)
    return info.value.reason


def test_a_payload_naming_a_class_is_refused_without_importing_it(tmp_path, monkeypatch):
    (tmp_path / "crawlproj_probe_module.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_suffix('.imported').touch()\n"
        "from scrapy import Request as Req\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert bad({"u": "/", "_class": "crawlproj_probe_module.Req"}) == "class"
    assert not (tmp_path / "crawlproj_probe_module.imported").exists()
    # the classes a request of a spider may be are read
    form = codec.encode(FormRequest("http://a.ex/f", formdata={"q": "1"}), S(), "a.ex")
    assert type(codec.decode(form, S(), "a.ex")) is FormRequest


@pytest.mark.parametrize("url", ["file:///etc/passwd", "data:text/html,<p>x</p>",
                                 "ftp://a.ex/pub/", "s3://bucket/key", "gopher://a.ex/"])
def test_only_http_and_https_urls_are_read(url):
    assert bad({"url": url}) == "scheme"


@pytest.mark.parametrize("name", ["start_requests", "from_crawler", "update_settings", "close",
                                  "__init__", "__class__", "logger", "crawler", "settings",
                                  "parse.__globals__", "missing", 42])
def test_callbacks_are_the_spiders_own_methods_only(name):
    assert bad({"u": "/", "callback": name}) == "callback"


def test_a_subclass_of_a_spider_has_its_bases_methods():
    class T(S):
        def parse_more(self, response):
            yield from ()

    payload = msgpack.packb({"u": "/", "callback": "parse_other", "errback": "failed"})
    back = codec.decode(payload, T(), "a.ex")
    assert back.callback.__name__ == "parse_other" and back.errback.__name__ == "failed"


def test_sizes_are_bounded():
    assert bad({"u": "/" + "a" * (codec.MAX_PAYLOAD + 1)}) == "size"
    assert bad({"u": "/" + "a" * 3000}) == "url_too_long"
    assert bad({"u": "/" + "a" * 90}, max_url_length=50) == "url_too_long"


def test_the_url_is_on_the_host_whose_queue_held_it():
    assert bad({"url": "http://b.ex/"}, host="a.ex") == "host"
    assert codec.decode(msgpack.packb({"url": "http://a.ex/p"}), S(), "a.ex").url == "http://a.ex/p"


@pytest.mark.parametrize("payload,reason", [
    ({"u": "/", "method": "CONNECT"}, "method"),
    ({"u": "/", "dont_filter": True, "evil": 1}, "malformed"),
    ({"u": "/", "meta": [1, 2]}, "malformed"),
    ({"u": 7}, "malformed"),
])
def test_fields_are_those_of_a_request(payload, reason):
    assert bad(payload) == reason


def test_meta_and_headers_that_decide_the_download_are_dropped():
    payload = msgpack.packb({
        "u": "/p", "m": {"depth": 2, "proxy": "http://evil.ex:3128", "_auth_proxy": "x",
                         "download_maxsize": 0, "dont_obey_robotstxt": True,
                         "bindaddress": ["10.0.0.1", 0], "download_slot": "other.ex"},
        "h": {b"Host": [b"169.254.169.254"], b"Authorization": [b"Basic eA=="],
              b"Cookie": [b"a=b"], b"X-Kept": [b"1"]},
    }, use_bin_type=True)
    back = codec.decode(payload, S(), "a.ex")
    assert back.meta == {"depth": 2}
    assert dict(back.headers) == {}

    class Keeps(S):
        frontier_headers = ("Referer", "X-Kept", "Cookie", "Host")

    back = codec.decode(payload, Keeps(), "a.ex")
    assert dict(back.headers) == {b"X-Kept": [b"1"]}  # credentials and Host never, whatever it keeps


def test_a_queued_request_keeps_no_header_of_the_worker_that_queued_it():
    """A retry or a redirect goes back to the frontier after the downloader
    middlewares set the worker's own headers: the worker that fetches it next
    sends its own User-Agent, not the first one's."""
    spider = S()
    r = Request("http://a.ex/p", headers={"User-Agent": "worker-one/1", "Accept-Language": "en",
                                          "X-Forwarded-For": "203.0.113.9", "Referer": "http://a.ex/"})
    stored = msgpack.unpackb(codec.encode(r, spider, "a.ex"))
    assert "h" not in stored and stored["r"][1] == b""  # the Referer alone, as a tail
    back = codec.decode(codec.encode(r, spider, "a.ex"), spider, "a.ex")
    assert dict(back.headers) == {b"Referer": [b"http://a.ex/"]}

    class Keeps(S):
        frontier_headers = ("Accept-Language",)

    back = codec.decode(codec.encode(r, Keeps(), "a.ex"), Keeps(), "a.ex")
    assert dict(back.headers) == {b"Accept-Language": [b"en"]}


@pytest.mark.parametrize("stored,reason", [("file:///etc/passwd", "scheme"), ("javascript:x()", "scheme"),
                                           ("data:,x", "scheme"), ("a/b", "malformed")])
def test_a_url_stored_without_its_origin_is_judged_as_read(stored, reason):
    with pytest.raises(codec.BadPayload) as exc:
        codec.decode(msgpack.packb({"u": stored}), S(), "h1.sim.test")
    assert exc.value.reason == reason
    assert stored in str(exc.value) and "h1.sim.test" not in str(exc.value)
