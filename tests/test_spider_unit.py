"""The `web` spider on hand-built responses: items, scope, non-HTML, seeds."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.test import get_crawler

from crawlproj.errors import CrawlprojError
from crawlproj.items import PAGE_ITEM_FIELDS, PageItem
from crawlproj.spiders.web import WebSpider

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)

HOME = b"""<html><head><title>Home page</title></head><body>
<h1>Welcome</h1><p>Some text.</p>
<a href="/about">About us</a>
<a href="https://shop.example.com/cart">Shop</a>
<a href="http://other.example.org/">Elsewhere</a>
<a href="http://b.example.net/x">Second seed site</a>
<a href="mailto:hi@example.com">Mail</a>
<a href="#top">Top</a>
</body></html>"""


def make_spider(settings: dict | None = None, **kwargs) -> WebSpider:
    crawler = get_crawler(WebSpider, settings or {})
    return WebSpider.from_crawler(crawler, **kwargs)


def start_requests(spider: WebSpider) -> list[Request]:
    async def collect():
        return [r async for r in spider.start()]

    return asyncio.run(collect())


def html_response(url: str, body: bytes = HOME, *, status: int = 200, meta: dict | None = None,
                  content_type: str | None = "text/html; charset=utf-8",
                  request_url: str | None = None) -> HtmlResponse:  # fmt: skip
    request = Request(request_url or url, meta=meta or {})
    headers = {"Content-Type": content_type} if content_type else {}
    return HtmlResponse(url, body=body, status=status, headers=headers, request=request)


def split(results) -> tuple[list[PageItem], list[Request]]:
    results = list(results)
    items = [r for r in results if isinstance(r, PageItem)]
    requests = [r for r in results if isinstance(r, Request)]
    assert len(items) + len(requests) == len(results)
    return items, requests


# --------------------------------------------------------------------------
# Items
# --------------------------------------------------------------------------


def test_html_page_item_fields():
    spider = make_spider({"CRAWL_SCOPE": "any"})
    meta = {"depth": 2, "download_latency": 0.25, "redirect_urls": ["http://example.com/old"]}
    response = html_response("http://example.com/", meta=meta, request_url="http://example.com/")
    before = time.time()
    [item], requests = split(spider.parse(response))
    assert set(item.keys()) == set(PAGE_ITEM_FIELDS) == {
        "url", "final_url", "status", "content_type", "length", "fetch_time",
        "download_time", "depth", "title", "text", "outlinks", "duplicate_of",
        "robots", "canonical",
    }  # fmt: skip
    assert item["url"] == "http://example.com/old"  # as requested, before the redirect
    assert item["final_url"] == "http://example.com/"
    assert item["status"] == 200
    assert item["content_type"] == "text/html"
    assert item["length"] == len(HOME)
    assert before <= item["fetch_time"] <= time.time()
    assert item["download_time"] == 0.25
    assert item["depth"] == 2
    assert item["title"] == "Home page"
    assert item["text"].startswith("Welcome Some text. About us Shop")
    assert item["outlinks"] == [
        {"url": "http://example.com/about", "anchor": "About us"},
        {"url": "https://shop.example.com/cart", "anchor": "Shop"},
        {"url": "http://other.example.org/", "anchor": "Elsewhere"},
        {"url": "http://b.example.net/x", "anchor": "Second seed site"},
    ]
    assert item["duplicate_of"] is None
    # scope "any": every outlink is followed, by method name.
    assert [r.url for r in requests] == [o["url"] for o in item["outlinks"]]
    for request in requests:
        assert request.callback == spider.parse
        assert not request.dont_filter
        # nothing of ours is stored per queued URL: the link's texts go to the
        # link context (crawlproj/prioritizers/linkcontext.py), which the codec never stores
        assert list(request.meta) == ["link_text"]
    assert requests[0].meta["link_text"] == ("About us", "")


def test_item_without_redirect_and_frontier_download_time():
    spider = make_spider()
    meta = {"download_latency": 0.5, "crawlproj_download_time": 0.125}
    response = html_response("http://example.com/p", meta=meta)
    [item], _ = split(spider.parse(response))
    assert item["url"] == item["final_url"] == "http://example.com/p"
    assert item["download_time"] == 0.125  # the frontier's figure wins
    assert item["depth"] == 0


def test_item_when_no_timing_is_known():
    spider = make_spider()
    response = HtmlResponse("http://example.com/", body=HOME, headers={"Content-Type": "text/html"})
    [item], _ = split(spider.parse(response))  # a response tied to no request
    assert item["download_time"] is None and item["url"] == "http://example.com/"


def test_text_cap_from_settings():
    spider = make_spider({"PAGE_TEXT_MAX_CHARS": 20})
    [item], _ = split(spider.parse(html_response("http://example.com/")))
    assert len(item["text"]) <= 20


# --------------------------------------------------------------------------
# Non-HTML
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("image/png", PNG),
        ("application/pdf", b"%PDF-1.4 <a href='/x'>"),
        ("application/json", b'{"html": "<a href=\\"/x\\">x</a>"}'),
        ("application/octet-stream", HOME),
        ("text/plain", HOME),
        (None, PNG),  # no Content-Type: sniffed as binary
        ("text/html", PNG),  # mislabelled: sniffed as binary
    ],
)
def test_non_html_is_recorded_not_parsed(content_type, body):
    spider = make_spider()
    headers = {"Content-Type": content_type} if content_type else {}
    request = Request("http://example.com/file", meta={"depth": 1})
    response = Response("http://example.com/file", body=body, headers=headers, request=request)
    [item], requests = split(spider.parse(response))
    assert requests == []
    assert item["outlinks"] == [] and item["text"] == "" and item["title"] == ""
    assert item["content_type"] == (content_type or "")
    assert item["length"] == len(body) and item["depth"] == 1
    assert spider.crawler.stats.get_value("web/pages/other") == 1


def test_html_without_content_type_is_sniffed():
    spider = make_spider({"CRAWL_SCOPE": "any"})
    request = Request("http://example.com/")
    response = Response("http://example.com/", body=HOME, request=request)  # plain Response
    [item], requests = split(spider.parse(response))
    assert item["title"] == "Home page" and len(requests) == 4


def test_non_utf8_page_through_scrapy_encoding():
    body = "<title>Привет</title><a href='/путь'>ссылка</a>".encode("cp1251")
    response = html_response(
        "http://example.ru/", body=body, content_type="text/html; charset=windows-1251"
    )
    [item], [request] = split(make_spider().parse(response))
    assert item["title"] == "Привет"
    url = "http://example.ru/%D0%BF%D1%83%D1%82%D1%8C"
    assert item["outlinks"] == [{"url": url, "anchor": "ссылка"}]
    assert request.url == item["outlinks"][0]["url"]


def test_error_status_page_gets_an_item_but_links_are_not_followed():
    # Only reaches parse() if HTTPERROR_ALLOWED_CODES lets it through.
    response = html_response("http://example.com/missing", status=404)
    [item], requests = split(make_spider().parse(response))
    assert item["status"] == 404 and item["title"] == "Home page"
    assert len(item["outlinks"]) == 4 and requests == []


# --------------------------------------------------------------------------
# Scope
# --------------------------------------------------------------------------


def test_host_scope_follows_only_seed_hosts():
    spider = make_spider({"CRAWL_SCOPE": "host"}, seeds="http://example.com/,http://b.example.net/")
    _, requests = split(spider.parse(html_response("http://example.com/")))
    assert [r.url for r in requests] == ["http://example.com/about", "http://b.example.net/x"]
    stats = spider.crawler.stats
    assert stats.get_value("web/links/followed") == 2
    assert stats.get_value("web/links/out_of_scope") == 2


def test_domain_scope_follows_seed_domains():
    spider = make_spider({"CRAWL_SCOPE": "domain"}, seeds="http://www.example.com/")
    _, requests = split(spider.parse(html_response("http://www.example.com/")))
    assert [r.url for r in requests] == [
        "http://www.example.com/about", "https://shop.example.com/cart"
    ]


def test_scope_argument_overrides_setting():
    spider = make_spider({"CRAWL_SCOPE": "any"}, seeds="http://example.com/", scope="host")
    assert spider.scope.mode == "host"
    _, requests = split(spider.parse(html_response("http://example.com/")))
    assert [r.url for r in requests] == ["http://example.com/about"]


def test_page_off_the_seed_hosts_has_its_links_dropped():
    # e.g. a seed that redirected to another site
    spider = make_spider({"CRAWL_SCOPE": "host"}, seeds="http://seed.example/")
    [item], requests = split(spider.parse(html_response("http://example.com/")))
    assert requests == [] and len(item["outlinks"]) == 4


def test_worker_without_seeds_stays_on_the_page_host(caplog):
    spider = make_spider({"CRAWL_SCOPE": "host"})
    with caplog.at_level(logging.WARNING):
        assert start_requests(spider) == []
    assert any("without seeds" in r.getMessage() for r in caplog.records)
    _, requests = split(spider.parse(html_response("http://example.com/")))
    assert [r.url for r in requests] == ["http://example.com/about"]


def test_bad_scope_values():
    with pytest.raises(CrawlprojError, match="scope must be one of"):
        WebSpider(scope="planet")
    with pytest.raises(CrawlprojError, match="CRAWL_SCOPE must be one of"):
        make_spider({"CRAWL_SCOPE": "planet"})


# --------------------------------------------------------------------------
# Seeds and start()
# --------------------------------------------------------------------------


def test_start_yields_seed_requests_and_counts_problems(tmp_path, caplog):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# seeds\nhttp://a.example/\nb.example\nftp://nope\nhttp://a.example/\n")
    # with a contact, so that the seed's is the one warning
    spider = make_spider({"CRAWL_CONTACT": "https://ops.example/"}, seeds=str(seeds))
    with caplog.at_level(logging.WARNING):
        requests = start_requests(spider)
    assert [r.url for r in requests] == ["http://a.example/", "http://b.example/"]
    for request in requests:
        assert request.callback == spider.parse
        assert request.dont_filter is False  # the frontier deduplicates seeds
    stats = spider.crawler.stats
    assert stats.get_value("seeds/accepted") == 2
    assert stats.get_value("seeds/invalid") == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"seed skipped: {seeds}:4: not an http(s) URL: 'ftp://nope'"]


def test_comma_separated_seeds():
    spider = make_spider(seeds="http://a.example/, https://b.example/x")
    assert [r.url for r in start_requests(spider)] == ["http://a.example/", "https://b.example/x"]


def test_seeds_as_a_python_list():
    spider = make_spider(seeds=["http://a.example/x,y", "b.example", "ftp://no", "b.example"])
    assert spider.seed_urls == ["http://a.example/x,y", "http://b.example/"]
    assert spider.seed_problems == ["seeds[3]: not an http(s) URL: 'ftp://no'"]


def test_no_seeds_joins_a_running_crawl():
    spider = make_spider()
    assert start_requests(spider) == []
    assert spider.crawler.stats.get_value("seeds/accepted") == 0
    assert spider.crawler.stats.get_value("seeds/invalid") == 0


def test_missing_seeds_file_fails_in_the_constructor(tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(CrawlprojError) as info:
        make_spider(seeds=str(missing))
    assert str(info.value) == f"seeds file not found: {str(missing)!r}"
    with pytest.raises(CrawlprojError):
        WebSpider(seeds=str(missing))  # without a crawler, too


def test_spider_name():
    assert WebSpider.name == "web"


# --------------------------------------------------------------------------
# What pages say to crawlers (crawlproj/robots/meta.py)
# --------------------------------------------------------------------------

TOLD = b"""<html><head><title>Told</title>%s</head><body><p>Words.</p>
<a href="/plain">plain</a>
<a href="/marked" rel="nofollow">marked</a>
<a href="/ugc" rel="ugc noopener">user content</a>
<a href="/both" rel="sponsored">ad</a> <a href="/both">editorial</a>
</body></html>"""


def told(head: bytes = b"", headers: dict | None = None, url: str = "http://example.com/p",
         body: bytes | None = None) -> HtmlResponse:
    h = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
    return HtmlResponse(url, body=TOLD % head if body is None else body, headers=h,
                        request=Request(url))


def parsed(spider, response):
    [item], requests = split(spider.parse(response))
    marks = {o["url"].rsplit("/", 1)[1]: bool(o.get("nofollow")) for o in item["outlinks"]}
    return item, sorted(r.url.rsplit("/", 1)[1] for r in requests), marks


def test_nofollow_links_are_recorded_marked_and_not_followed():
    spider = make_spider({"CRAWL_SCOPE": "any"})
    item, followed, marks = parsed(spider, told())
    assert followed == ["both", "plain"]  # "both" is also linked without a nofollow type
    assert marks == {"plain": False, "marked": True, "ugc": True, "both": False}
    assert item["robots"] == [] and item["canonical"] is None
    stats = spider.crawler.stats
    assert stats.get_value("robotsmeta/links/nofollow") == 2
    assert stats.get_value("web/links/followed") == 2
    assert stats.get_value("web/links/out_of_scope") is None


@pytest.mark.parametrize("head, headers, robots, followed", [
    (b'<meta name="robots" content="nofollow">', {}, ["nofollow"], []),
    (b'<meta name="ROBOTS" content="NONE">', {}, ["noindex", "nofollow"], []),
    (b'<meta name="crawlproj" content="noindex">', {}, ["noindex"], ["both", "plain"]),
    (b'<meta name="googlebot" content="noindex, nofollow">', {}, [], ["both", "plain"]),
    (b"", {"X-Robots-Tag": "noarchive, nosnippet"}, ["noarchive", "nosnippet"], ["both", "plain"]),
    (b"", {"X-Robots-Tag": "otherbot: nofollow"}, [], ["both", "plain"]),
    (b"", {"X-Robots-Tag": ["otherbot: noindex", "crawlproj: nofollow"]}, ["nofollow"], []),
    (b'<meta name="robots" content="noindex">', {"X-Robots-Tag": "nofollow"}, ["noindex", "nofollow"], []),
    (b'<meta name="robots" content="index, follow, max-snippet:-1">', {}, [], ["both", "plain"]),
])  # fmt: skip
def test_robots_meta_tags_and_headers_are_obeyed(head, headers, robots, followed):
    spider = make_spider({"CRAWL_SCOPE": "any"})
    item, got, marks = parsed(spider, told(head, headers))
    assert item["robots"] == robots
    assert got == followed
    if "nofollow" in robots:
        assert all(marks.values()) and len(marks) == 4  # every link recorded, marked
    for name in robots:
        assert spider.crawler.stats.get_value(f"robotsmeta/pages/{name}") == 1


def test_robots_meta_obey_off_ignores_them_all():
    spider = make_spider({"CRAWL_SCOPE": "any", "ROBOTS_META_OBEY": False})
    item, followed, marks = parsed(spider, told(b'<meta name="robots" content="none">',
                                                {"X-Robots-Tag": "noindex, nofollow, noarchive"}))
    assert item["robots"] == [] and followed == ["both", "marked", "plain", "ugc"]
    assert not any(marks.values())


def test_the_bots_own_name_from_its_settings():
    spider = make_spider({"CRAWL_SCOPE": "any", "USER_AGENT": "ExampleBot/2.0 (+https://x.example/)"})
    item, followed, _ = parsed(spider, told(b'<meta name="examplebot" content="nofollow">'))
    assert item["robots"] == ["nofollow"] and followed == []
    item, _, _ = parsed(spider, told(b"", {"X-Robots-Tag": "ExampleBot: noindex"}))
    assert item["robots"] == ["noindex"]


def test_a_refresh_page_is_parsed_and_its_target_followed_as_a_redirect():
    spider = make_spider({"CRAWL_SCOPE": "host"}, seeds="http://example.com/")
    head = b'<meta http-equiv="refresh" content="0; url=http://elsewhere.example/new">'
    item, followed, marks = parsed(spider, told(head))
    # its links as any page's, and the target, off the seeds' host, as a redirect would be
    assert followed == ["both", "new", "plain"]
    assert marks["new"] is False and item["title"] == "Told"
    # the Refresh header; a nofollow page's refresh still leads on
    head = b'<meta name="robots" content="nofollow">'
    item, followed, _ = parsed(spider, told(head, {"Refresh": "5; url=/moved"}))
    assert followed == ["moved"] and item["outlinks"][-1] == {"url": "http://example.com/moved", "anchor": ""}
    # a page that reloads itself leads nowhere
    _, followed, marks = parsed(spider, told(b'<meta http-equiv="refresh" content="30">'))
    assert followed == ["both", "plain"] and "p" not in marks
    assert spider.crawler.stats.get_value("web/refresh/followed") == 2


@pytest.mark.parametrize("head, headers, canonical", [
    (b'<link rel="canonical" href="/main">', {}, "http://example.com/main"),
    (b"", {"Link": '<http://example.com/main>; rel="canonical"'}, "http://example.com/main"),
    (b'<link rel="canonical" href="/main">', {"Link": "</main>; rel=canonical"}, "http://example.com/main"),
    (b'<link rel="canonical" href="/main">', {"Link": "</other>; rel=canonical"}, None),
    (b'<link rel="canonical" href="/p">', {}, "http://example.com/p"),
    (b"", {}, None),
])  # fmt: skip
def test_canonical_url_of_a_page(head, headers, canonical):
    spider = make_spider({"CRAWL_SCOPE": "any"})
    item, _, _ = parsed(spider, told(head, headers))
    assert item["canonical"] == canonical
    counted = spider.crawler.stats.get_value("robotsmeta/pages/canonical")
    assert counted == (1 if canonical not in (None, "http://example.com/p") else None)


def test_x_robots_tag_of_a_document_that_is_not_html():
    spider = make_spider({"CRAWL_SCOPE": "any"})
    response = Response("http://example.com/doc.pdf", body=b"%PDF-1.4 ...", request=Request(
        "http://example.com/doc.pdf"), headers={"Content-Type": "application/pdf",
                                                "X-Robots-Tag": "noarchive"})
    [item], requests = split(spider.parse(response))
    assert item["robots"] == ["noarchive"] and requests == []
