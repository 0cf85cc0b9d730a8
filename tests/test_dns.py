"""The parts of the DNS policy (crawlproj/dns.py) one by one: the robots
cache's entries for a name that does not resolve, the crawl log's status of
a URL whose host does not, which seeds a worker looks up itself, and the
lookup through the resolver the downloads use. tests/test_dns_e2e.py has
them together in real crawls."""

from __future__ import annotations

import time

from scrapy.exceptions import CannotResolveHostError
from scrapy.settings import Settings

from crawlproj.addon import apply_table
from crawlproj.dns import HostUnresolvable, _proxied, is_dns_error, lookup
from crawlproj.robots import ALLOW_ALL, NO_HOST, Rules, failed, unresolved
from crawlproj.stores.crawllog import format_line, parse_line
from crawlproj.stores.exchange import (
    S_DOMAIN_PREREQUISITE_FAILURE,
    S_DOMAIN_UNRESOLVABLE,
    FailedAttempt,
)
from crawlproj.stores.record import status_of
from crawlproj.stores.report import outcome
from tests.resolver import StaticResolver


def test_the_robots_entry_counts_failed_lookups_then_says_the_host_does_not_resolve():
    retry, _ = Rules.load(unresolved(2), "crawlproj")
    assert (retry.known, retry.unresolved, retry.resolves) == (False, 2, True)
    gone, _ = Rules.load(NO_HOST, "crawlproj")
    assert (gone.known, gone.resolves) == (True, False)
    # the server's failures are counted apart, and a name that resolves has rules
    assert Rules.load(failed(2), "crawlproj")[0].unresolved == 0
    assert Rules.load(ALLOW_ALL, "crawlproj")[0].resolves


def test_a_url_of_a_host_that_does_not_resolve_is_a_dns_error():
    assert status_of(HostUnresolvable("gone.invalid does not resolve")) == (
        S_DOMAIN_PREREQUISITE_FAILURE, "dns")
    assert outcome(S_DOMAIN_PREREQUISITE_FAILURE) == "DNS error"
    lookup_failed = CannotResolveHostError("gone.invalid")
    assert is_dns_error(lookup_failed)
    assert status_of(lookup_failed)[0] == S_DOMAIN_UNRESOLVABLE
    assert outcome(S_DOMAIN_UNRESOLVABLE) == "DNS error"
    assert not is_dns_error(HostUnresolvable("x"))  # a verdict, not a lookup
    # in the crawl log: never sent, so no fetch time, as Heritrix writes -6
    line = format_line(FailedAttempt(None, "http://gone.invalid/", S_DOMAIN_PREREQUISITE_FAILURE,
                                     "dns", time.time(), 0.0), time.time())
    fields = line.split()
    assert (fields[1], fields[3], fields[8], fields[11]) == (
        "-6", "http://gone.invalid/", "-", "err=dns")
    assert parse_line(line).status == S_DOMAIN_PREREQUISITE_FAILURE


def settings(**values) -> Settings:
    s = Settings()
    apply_table(s)
    s.setdict(values, priority="cmdline")
    return s


def test_a_seed_reached_through_a_proxy_is_not_looked_up(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert not _proxied(settings(), "http://a.test/", "a.test")
    assert _proxied(settings(CRAWL_PROXY="http://127.0.0.1:3128"), "http://a.test/", "a.test")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:3128")
    monkeypatch.setenv("no_proxy", "b.test")
    assert _proxied(settings(), "http://a.test/", "a.test")
    assert not _proxied(settings(), "http://b.test/", "b.test")        # no_proxy
    assert not _proxied(settings(), "https://a.test/", "a.test")       # no https_proxy
    assert not _proxied(settings(HTTPPROXY_ENABLED=False), "http://a.test/", "a.test")


def test_lookup_asks_the_resolver_the_downloads_use():
    resolver = StaticResolver(None, {"a.test": ["127.0.0.1"]})
    got = []
    lookup(resolver, "a.test").addCallback(got.append)
    lookup(resolver, "gone.invalid").addCallback(got.append)
    assert [[a.host for a in answers] for answers in got] == [["127.0.0.1"], []]
    assert resolver.lookups == {"a.test": 1, "gone.invalid": 1}
