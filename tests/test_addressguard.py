"""The address guard's rules: which addresses and hosts are refused, and why.

Pure rules and in-memory lookups: nothing here opens a connection. Real
crawls: tests/test_addressguard_e2e.py.
"""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from twisted.internet.address import IPv4Address

from crawlproj.addressguard import (
    AddressGuardError,
    AllowList,
    GuardResolver,
    Policy,
    classify,
)
from crawlproj.addressguard.middleware import AddressGuardMiddleware
from crawlproj.urls import hostname
from tests.resolver import StaticResolver


@pytest.mark.parametrize("address,reason", [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
    ("192.168.1.1", "private"), ("fd00::1", "private"), ("fc12::1", "private"),
    ("fec0::1", "private"), ("64:ff9b:1::a00:1", "private"),
    ("169.254.169.254", "link_local"), ("fe80::1", "link_local"), ("fe80::1%2", "link_local"),
    ("100.64.0.1", "cgnat"), ("100.127.255.254", "cgnat"),
    ("224.0.0.1", "multicast"), ("239.1.1.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"), ("::", "unspecified"),
    ("255.255.255.255", "reserved"), ("240.0.0.1", "reserved"), ("192.0.2.1", "reserved"),
    ("198.18.0.1", "reserved"), ("2001:db8::1", "reserved"), ("100::1", "reserved"),
    ("2001::1", "reserved"), ("4000::1", "reserved"),
    # IPv6 forms that carry an IPv4 address are judged by it
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "link_local"), ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b::a9fe:a9fe", "link_local"), ("2002:7f00:1::1", "loopback"),
    ("2002:c0a8:101::1", "private"), ("::127.0.0.1", "loopback"),
])
def test_non_public_addresses(address, reason):
    assert classify(address) == reason


@pytest.mark.parametrize("address", [
    "8.8.8.8", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700::1111",
    "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
])
def test_public_addresses(address):
    assert classify(address) is None


@pytest.mark.parametrize("url,reason", [
    # IPv4 as the URL Standard (a browser, a proxy) reads it
    ("http://2130706433/", "loopback"), ("http://0x7f.1/", "loopback"),
    ("http://017700000001/", "loopback"), ("http://0x7f000001/", "loopback"),
    ("http://127.1/", "loopback"), ("http://0251.0376.0251.0376/", "link_local"),
    ("http://0xa9fea9fe/", "link_local"), ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"), ("http://[0:0:0:0:0:0:0:1]/", "loopback"),
    ("http://0/", "unspecified"), ("http://[::]/", "unspecified"),
    # names that are local by definition
    ("http://localhost/", "local_name"), ("http://LocalHost./", "local_name"),
    ("http://a.b.localhost/", "local_name"), ("http://printer.local/", "local_name"),
    ("http://metadata.google.internal/", "local_name"), ("http://nas.home.arpa/", "local_name"),
    ("http://localhost.localdomain/", "local_name"), ("http://router/", "local_name"),
    # names that mean nothing locally pass, to be checked when resolved
    ("http://h0001.example/", None), ("http://www.shop.onion/", None),
    ("http://site.test/", None), ("http://www.example.com/", None), ("http://8.8.8.8/", None),
])
def test_hosts_as_the_url_standard_reads_them(url, reason):
    assert Policy(AllowList([])).host(hostname(url)) == reason


def test_the_allow_list_lets_networks_and_names_through():
    allow = AllowList(["10.0.0.0/8", "127.0.0.2", "fd00::/8", "corp.example", ".lan.test"])
    policy = Policy(allow)
    assert policy.address("10.9.9.9") is None and policy.address("11.0.0.1") is None
    assert policy.address("::ffff:10.1.1.1") is None  # the IPv4 address it carries
    assert policy.address("127.0.0.2") is None and policy.address("127.0.0.1") == "loopback"
    assert policy.address("fd12::1") is None and policy.address("fe80::1") == "link_local"
    assert policy.host("corp.example") is None and policy.host("wiki.corp.example") is None
    assert policy.host("x.lan.test") is None and policy.host("[fd00::5]") is None
    assert policy.host("[::1]") == "loopback" and policy.host("notcorp.example") is None
    settings = get_crawler(settings_dict={"ADDRESS_GUARD_ALLOW": "10.0.0.0/8, intra.example  ::1"}
                           ).settings
    parsed = AllowList.from_settings(settings)
    assert [str(n) for n in parsed.networks] == ["10.0.0.0/8", "::1/128"]
    assert parsed.names == ["intra.example"]


def test_a_bad_allow_list_entry_is_one_clear_error():
    with pytest.raises(AddressGuardError, match="'http://x/' is neither a network"):
        AllowList(["10.0.0.0/8", "http://x/"])


class Receiver:
    def __init__(self):
        self.addresses, self.done = [], False

    def resolutionBegan(self, resolution):
        pass

    def addressResolved(self, address):
        self.addresses.append(address.host)

    def resolutionComplete(self):
        self.done = True


def resolve(resolver, name, port=80):
    receiver = Receiver()
    resolver.resolveHostName(receiver, name, port)
    assert receiver.done
    return receiver.addresses


def test_the_resolver_checks_every_answer_so_a_rebinding_name_is_refused_the_second_time():
    inner = StaticResolver(None, {"rebind.test": ["127.0.0.2", "127.0.0.1"],
                                  "both.test": ["127.0.0.1"], "two.test": ["127.0.0.2"]})
    guard = GuardResolver(inner, Policy(AllowList(["127.0.0.2"])))
    assert resolve(guard, "rebind.test") == ["127.0.0.2"]  # "public" the first time
    assert resolve(guard, "rebind.test") == []  # then loopback: no address to connect to
    assert guard.refusals.pop("rebind.test") == "loopback"
    assert resolve(guard, "two.test") == ["127.0.0.2"] and guard.refusals.pop("two.test") is None
    # IP literals go through the resolver too (Twisted's HostnameEndpoint asks for them)
    inner.mapping["10.1.2.3"] = ["127.0.0.1"]
    assert resolve(guard, "10.1.2.3") == []
    # a proxy is trusted by name and port, not as a web server on other ports
    guard.trust_proxy("both.test", 3128)
    assert resolve(guard, "both.test", 3128) == ["127.0.0.1"]
    assert resolve(guard, "both.test", 80) == []


def test_the_resolver_drops_only_the_refused_answers():
    class Two(StaticResolver):
        def resolveHostName(self, receiver, name, port=0, *args):
            receiver.resolutionBegan(None)
            for a in ("127.0.0.1", "127.0.0.2"):
                receiver.addressResolved(IPv4Address("TCP", a, port))
            receiver.resolutionComplete()

    guard = GuardResolver(Two(None, {}), Policy(AllowList(["127.0.0.2"])))
    assert resolve(guard, "mixed.test") == ["127.0.0.2"]
    assert guard.refusals.pop("mixed.test") is None  # it connects to the public one


def project_settings() -> Settings:
    """settings.base as Scrapy lays it (not get_project_settings, which sets
    SCRAPY_SETTINGS_MODULE in this process's environment for the tests after)."""
    settings = Settings()
    settings.setmodule("settings.base", priority="project")
    return settings


@pytest.fixture
def middleware():
    project = project_settings()
    crawler = get_crawler(settings_dict={
        "DOWNLOAD_HANDLERS": dict(project.getwithbase("DOWNLOAD_HANDLERS")),
        "ADDRESS_GUARD_ALLOW": "127.0.0.2"})
    crawler.stats.open_spider()
    return AddressGuardMiddleware.from_crawler(crawler), crawler.stats


@pytest.mark.parametrize("url,reason", [
    ("file:///etc/passwd", "scheme"), ("data:text/html,<p>x</p>", "scheme"),
    ("ftp://ftp.example.com/pub/", "scheme"), ("s3://bucket/key", "scheme"),
    ("http://127.0.0.1:6379/", "loopback"), ("http://2130706433/", "loopback"),
    ("http://[fd00::1]/", "private"), ("http://169.254.169.254/latest/", "link_local"),
    ("https://localhost/", "local_name"),
])
def test_the_middleware_refuses_before_any_download(middleware, url, reason):
    mw, stats = middleware
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request(url))
    assert stats.get_value(f"addressguard/refused/{reason}") == 1


def test_through_a_proxy_the_same_rules_hold(middleware):
    """(What passes is checked in real crawls: passing installs the guard on
    the reactor, which this process must not start.)"""
    mw, stats = middleware
    for url in ("http://127.0.0.1/", "http://printer.local/", "http://0x7f.1/"):
        with pytest.raises(IgnoreRequest):
            mw.process_request(Request(url, meta={"proxy": "http://127.0.0.1:8899"}))
    assert stats.get_value("addressguard/refused/loopback") == 2


def test_the_project_downloads_http_and_https_only():
    handlers = project_settings().getwithbase("DOWNLOAD_HANDLERS")
    assert {s for s, h in handlers.items() if h} == {"http", "https"}


def test_a_handler_the_guard_cannot_check_stops_the_crawl_at_start():
    crawler = get_crawler(settings_dict={"DOWNLOAD_HANDLERS": {
        "http": "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"}})
    with pytest.raises(AddressGuardError, match="cannot check the addresses"):
        AddressGuardMiddleware.from_crawler(crawler)


def test_a_bad_allow_list_stops_the_crawl_command_in_one_line(redis_url, tmp_path):
    from tests.test_bad_inputs import crawl, one_line

    run = crawl(redis_url, tmp_path, "-a", "seeds=http://a.example/",
                "-s", "ADDRESS_GUARD_ALLOW=10.0.0.0/8,http://intranet/")
    assert run.returncode == 2
    assert one_line(run) == ("crawlproj: ADDRESS_GUARD_ALLOW: 'http://intranet/' is neither "
                             "a network (CIDR or address) nor a host name")


def test_a_handler_the_guard_cannot_check_stops_the_crawl_command_in_one_line(redis_url, tmp_path):
    from tests.test_bad_inputs import crawl, one_line

    aiohttp = "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"
    run = crawl(redis_url, tmp_path, "-a", "seeds=http://a.example/",
                "-s", f'DOWNLOAD_HANDLERS={{"https": "{aiohttp}"}}')
    assert run.returncode == 2
    assert one_line(run) == (
        "crawlproj: the address guard cannot check the addresses AiohttpDownloadHandler "
        "connects to (DOWNLOAD_HANDLERS['https']): use Scrapy's HTTP11DownloadHandler, or "
        "switch the guard off (docs/hardening.md)")


def test_one_scheme_switched_off_leaves_the_guard_on_for_the_other():
    crawler = get_crawler(settings_dict={"DOWNLOAD_HANDLERS": {
        "https": None, "http": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"}})
    crawler.stats.open_spider()
    mw = AddressGuardMiddleware.from_crawler(crawler)
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request("http://10.0.0.1/"))
