"""The crawl's one URL rule (crawlproj.urls) against the WHATWG URL test data,
and the components that use it agreeing on every URL.

shared/data/url/urltestdata.json is web-platform-tests' list of inputs with
what the URL Standard makes of them (the href, each part, or failure). The
cases that matter to a crawler are links on an http(s) page: every case with
an http(s) base, and every case without a base whose input is an absolute
http(s) URL. For each:

* the extractor resolves the link to the Standard's href without its
  fragment, and to None exactly where the Standard fails or gives another
  scheme (it also drops, by design, hrefs that name the page itself: empty
  or fragment-only);
* every URL it yields passes admission's refusal(), keeps the Standard's host
  as its politeness key (host_of), is a valid seed as it is, and keeps that
  host through Scrapy's Request (what admission sees).

These tests need ../shared/data/url and fail when it is missing (tests/data.py).
"""

from __future__ import annotations

import json
import re

import pytest
import redis
from scrapy import Request

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.extract import extract_page, resolve_link
from crawlproj.frontier.admission import Refused, admit
from crawlproj.frontier.frontier import Frontier
from crawlproj.prioritizers.basic import BreadthFirst
from crawlproj.redis.keyspace import Keyspace
from crawlproj.scope import Scope
from crawlproj.seeds import check_seed
from crawlproj.stores.crawllog import Line
from crawlproj.stores.report import CrawlReport
from crawlproj.urls import host_of, refusal, server_key
from tests.data import SHARED_DATA, require


def _load(name: str) -> list[dict]:
    path = require(SHARED_DATA / "url" / name)
    return [e for e in json.loads(path.read_text(encoding="utf-8")) if isinstance(e, dict)]


URLTESTS = _load("urltestdata.json")
TOASCII = _load("toascii.json")
_SCHEME = re.compile(r"^[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")
NO_LIMIT = 1 << 30  # refusal()'s length limit is a policy, not the URL rule


def _link_cases() -> list[tuple[dict, str]]:
    """(case, base) for every link a crawler can meet in urltestdata.json."""
    cases = []
    for e in URLTESTS:
        base = e.get("base")
        if base is not None:
            if base.startswith(("http:", "https:")):
                cases.append((e, base))
            continue
        m = _SCHEME.match(e["input"])
        if m and m.group(1).lower() in ("http", "https"):
            # A base of the other special scheme leaves an absolute URL's parse
            # as it is without a base (URL Standard, scheme state: only a base
            # of the same scheme makes "http:x" relative).
            other = "https://base.invalid/" if m.group(1).lower() == "http" else "http://base.invalid/"
            cases.append((e, other))
    return cases


LINKS = _link_cases()


def _expected(e: dict) -> str | None:
    """The URL a browser fetches for the case, without fragment, or None."""
    if e.get("failure") or e["protocol"] not in ("http:", "https:"):
        return None
    return e["href"].split("#", 1)[0]  # a serialised URL has no "#" before its fragment


def _same_document(href: str) -> bool:
    """An href that names the page itself (empty, or a fragment only)."""
    start = href.lstrip("".join(map(chr, range(0x21))))
    return not start or start.startswith("#")


def test_the_data_holds_the_cases_that_matter():
    with_base = sum(1 for e, _ in LINKS if e.get("base"))
    assert with_base == 202 and len(LINKS) == 481
    assert sum(_expected(e) is None for e, _ in LINKS) > 150
    assert sum(bool(e.get("failure")) for e, _ in LINKS) > 80


def test_extractor_resolves_links_as_the_url_standard():
    wrong = []
    for e, base in LINKS:
        want = _expected(e)
        if _same_document(e["input"]):
            # dropped by design; the Standard makes it the page itself
            assert want == base.split("#", 1)[0] or want is None, e
            want = None
        got = resolve_link(base, e["input"])
        if got != want:
            wrong.append((e["input"], e.get("base"), got, want))
    assert not wrong, f"{len(wrong)} of {len(LINKS)} cases differ, e.g. {wrong[:5]}"


def test_url_rule_resolves_every_case_including_same_document_links():
    from crawlproj.urls import resolve

    wrong = [(e["input"], base) for e, base in LINKS
             if resolve(e["input"], base) != _expected(e)]
    assert not wrong, wrong[:5]


def test_what_the_extractor_yields_every_component_accepts_with_the_standards_host():
    """A URL the extractor yields is never refused by admission for its host;
    its politeness key is the Standard's host; it is a seed as it stands; the
    crawl scope sees the Standard's host name; Scrapy's Request keeps it valid
    with the same key and the same fingerprint (admission gets request.url,
    the link graph the extracted URL)."""
    from crawlproj.urls import hostname

    checked = 0
    for e, base in LINKS:
        url = resolve_link(base, e["input"])
        if url is None:
            continue
        checked += 1
        assert refusal(url, NO_LIMIT) is None, (e["input"], url)
        assert host_of(url) == server_key(e["host"]), (e["input"], url)
        assert hostname(url) == e["hostname"], (e["input"], url)
        assert check_seed(url, NO_LIMIT) == (url, None), (e["input"], url)
        assert Scope("host").key(url) == e["hostname"].strip("[]").rstrip("."), url
        fetched = Request(url).url
        assert refusal(fetched, NO_LIMIT) is None, (url, fetched)
        assert host_of(fetched) == server_key(e["host"]), (url, fetched)
        assert url_fingerprint(fetched) == url_fingerprint(url), (url, fetched)
    assert checked > 230  # measured 237


def test_what_admission_refuses_the_extractor_never_yields():
    """On the absolute http(s) inputs: admission refuses one exactly where
    the Standard fails, and then the extractor yields nothing for it."""
    for e, base in LINKS:
        if e.get("base") is not None:
            continue
        refused = refusal(e["input"], NO_LIMIT) is not None
        assert refused == bool(e.get("failure")), e
        if refused:
            assert resolve_link(base, e["input"]) is None, e
            url, problem = check_seed(e["input"].strip(), NO_LIMIT)
            assert url is None, (e["input"], url)


def test_host_rule_is_the_standards_on_toascii_data():
    """A host given alone (seeds, scope): the Standard's domain-to-ASCII,
    IPv4 and IPv6 rules, on web-platform-tests' toascii.json."""
    from crawlproj.urls import parse_host, valid_hostname

    assert len(TOASCII) > 80
    for e in TOASCII:
        assert parse_host(e["input"]) == e["output"], e
        assert valid_hostname(e["input"]) == (e["output"] is not None), e
    assert parse_host("::1") == parse_host("[::1]") == "[::1]"
    assert parse_host("a.example:80") is None and parse_host("[::1]:80") is None
    assert parse_host("a/b") is None and parse_host("user@a") is None


# -- one host, one answer -------------------------------------------------------


def _frontier(redis_url) -> Frontier:
    r = redis.Redis.from_url(redis_url)
    return Frontier(r, Keyspace.open(r, "t", 1))


@pytest.mark.parametrize("link, host", [
    ("http://my_host.example/", "my_host.example"),       # not LDH; browsers fetch it
    ("http://-x-.example/", "-x-.example"),
    ("http://faß.example/", "xn--fa-hia.example"),         # UTS #46, not "fass"
    ("http://%6D%79.example/", "my.example"),              # percent-encoded host
    ("http://0x7f.1:8080/", "127.0.0.1:8080"),             # IPv4 as browsers read it
    ("http://[0:0::1]:80/", "[::1]"),                      # default port dropped
    ("http://example.com./", "example.com"),               # one server, one key
])
def test_one_link_one_answer_everywhere(redis_url, link, host):
    """The extractor yields the link, the seeds accept it, the scope allows it
    from a page on its host, and admission admits it under the same host."""
    page = "http://page.example/dir/"
    [(url, _)] = extract_page(f'<a href="{link}">x</a>'.encode(), page).links
    assert host_of(url) == host
    assert check_seed(link) == (url, None)
    assert Scope("host", [link]).allows(page, url)
    assert Scope("host").allows(url, url + "next")
    frontier = _frontier(redis_url)
    request = Request(url)
    partition, entry = admit(frontier, BreadthFirst(), request, None, 2083)
    assert partition == frontier.partition_of(host)


@pytest.mark.parametrize("link", [
    "http://127.0.0.256/", "http://foo.09/", "http://a|b.example/", "http://a b.example/",
    "http://[::1/", "http://xn--ls8h.123/", "http://a.example:99999/",
])
def test_a_refused_host_is_never_yielded(redis_url, link):
    frontier = _frontier(redis_url)
    assert refusal(link, 2083) is not None
    assert extract_page(f'<a href="{link}">x</a>'.encode(), "http://page.example/").links == []
    assert check_seed(link)[0] is None
    try:
        request = Request(link)
    except ValueError:
        return  # Scrapy refuses it itself
    with pytest.raises(Refused):
        admit(frontier, BreadthFirst(), request, None, 2083)


@pytest.mark.parametrize("char", list("[\\]^`{|}"))
def test_a_link_and_the_request_scrapy_sends_have_one_fingerprint(char):
    """Scrapy's Request escapes characters the URL Standard leaves raw in a
    path or query; the page fetched and the link to it must stay one node of
    the link graph (ids are fingerprints)."""
    [(url, _)] = extract_page(f'<a href="/x{char}y?q{char}r">x</a>'.encode(),
                              "http://a.example/").links
    fetched = Request(url).url
    assert url_fingerprint(fetched) == url_fingerprint(url), (url, fetched)


def test_query_in_the_page_encoding():
    """Browsers send a link's query in the page's encoding; a character the
    encoding lacks as an escaped character reference (URL Standard,
    "percent-encode after encoding")."""
    from crawlproj.urls import resolve

    base = "http://a.example/"
    assert resolve("/s?q=ü#f", base, "cp1252") == "http://a.example/s?q=%FC"
    assert resolve("/s?q=ü", base, "cp1251") == "http://a.example/s?q=%26%23252%3B"
    assert resolve("/ü?q=ü", base, "utf-16-le") == "http://a.example/%C3%BC?q=%C3%BC"
    assert resolve("/s?q=ü", base, "utf-8") == "http://a.example/s?q=%C3%BC"


def test_report_counts_servers_by_the_politeness_key():
    lines = [Line(status=200, size=1, url=u, hops="L", via="-", mime="text/html", thread="#000",
                  fetched="-", digest="-", source="w")
             for u in ("http://a.example/1", "http://A.example:80/2", "http://a.example:8080/3",
                       "http://[::1]:8080/")]
    rep = CrawlReport.from_lines(lines)
    assert rep.pages_per_host == {"a.example": 2, "a.example:8080": 1, "[::1]:8080": 1}
    hosts, _ = rep.tlds()
    assert hosts == {".example": 2, "raw IP addresses": 1}


@pytest.mark.parametrize("spellings", [
    ("http://h0001.example/", "http://H0001.EXAMPLE./a", "http://h0001.example:80/b",
     "https://h0001.example:443/c", "http://h0001.example.:80/d"),
    ("http://bücher.de/", "http://XN--BCHER-KVA.DE./", "http://Bücher.de:80/"),
    ("http://h.example:8080/", "http://H.example.:8080/x"),
    ("http://127.0.0.1/", "http://127.0.0.1./", "http://0x7f.1:80/"),
])
def test_one_politeness_key_per_server(spellings):
    """Case, the DNS root's trailing dot, the scheme's default port and IDNA
    name one server: one back queue, one lease, one robots.txt entry."""
    assert len({host_of(url) for url in spellings}) == 1, [host_of(u) for u in spellings]
