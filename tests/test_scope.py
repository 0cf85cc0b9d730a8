"""crawlproj.scope: host / domain / any crawl scope, offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawlproj.scope import MODES, Scope, registered_domain


@pytest.mark.parametrize(
    "host, domain",
    [
        ("a.example.co.uk", "example.co.uk"),
        ("b.example.co.uk", "example.co.uk"),
        ("example.co.uk", "example.co.uk"),
        ("forums.bbc.co.uk", "bbc.co.uk"),
        ("www.example.com", "example.com"),
        ("WWW.Example.COM.", "example.com"),
        ("deep.sub.example.com.au", "example.com.au"),
        ("a.b.c.example.jp", "example.jp"),
        ("city.kawasaki.jp", "city.kawasaki.jp"),  # PSL exception rule
        # Private suffixes count: different blogs are different domains.
        ("myblog.blogspot.com", "myblog.blogspot.com"),
        ("x.user.github.io", "user.github.io"),
        # No known suffix, IPs, suffixes themselves: the host itself.
        ("localhost", "localhost"),
        ("intranet.corp", "intranet.corp"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("co.uk", "co.uk"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("www.xn--bcher-kva.de", "xn--bcher-kva.de"),
    ],
)
def test_registered_domain(host, domain):
    assert registered_domain(host) == domain


def test_host_key():
    key = Scope("host").key
    assert key("http://User@WWW.Example.com:8080/x") == "www.example.com"
    assert key("https://example.com./") == "example.com"
    assert key("http://[::1]:80/") == "::1"
    assert key("http://bücher.de/") == "xn--bcher-kva.de"
    assert key("http://0x7f.1/") == "127.0.0.1"  # the URL rule's host, as the frontier's
    assert key("http://[broken") is None
    assert key("mailto:x@y") is None
    assert key("/relative") is None


def test_modes():
    assert MODES == ("host", "domain", "any")
    assert Scope().mode == "any"
    assert Scope(" Domain ").mode == "domain"
    with pytest.raises(ValueError, match="crawl scope must be one of"):
        Scope("site")


def test_any_allows_everything():
    scope = Scope("any", ["http://a.example/"])
    assert scope.allows("http://a.example/", "https://elsewhere.example/")
    assert scope.allows(None, "http://x.y/")
    assert scope.allowed == set()


def test_host_pairwise_without_seeds():
    scope = Scope("host")
    assert scope.allows("http://Example.com/a", "https://example.COM:8443/b")  # port, case ignored
    assert scope.allows("http://example.com/", "http://example.com./x")
    assert not scope.allows("http://example.com/", "http://www.example.com/")
    assert not scope.allows("http://a.example.co.uk/", "http://b.example.co.uk/")
    assert not scope.allows(None, "http://example.com/")
    assert not scope.allows("http://example.com/", "not a url")


def test_domain_pairwise_without_seeds():
    scope = Scope("domain")
    assert scope.allows("http://a.example.co.uk/", "https://b.example.co.uk/x")
    assert scope.allows("http://example.com/", "http://deep.www.example.com:81/")
    assert not scope.allows("http://example.co.uk/", "http://other.co.uk/")
    assert not scope.allows("http://alice.blogspot.com/", "http://bob.blogspot.com/")
    # IPs compare as hosts.
    assert scope.allows("http://127.0.0.1/", "http://127.0.0.1:8080/")
    assert not scope.allows("http://127.0.0.1/", "http://127.0.0.2/")


def test_host_scope_uses_the_seeds_hosts():
    scope = Scope("host", ["http://a.example/", "https://B.example:8443/start", "bad url"])
    assert scope.allowed == {"a.example", "b.example"}
    # From any page, a link to any seed host is in scope...
    assert scope.allows("http://a.example/page", "http://b.example/other")
    assert scope.allows("http://unrelated.example/", "http://a.example/x")
    # ...and nothing else, not even the page's own host when it is not a seed's
    # (a page reached through a redirect to another site).
    assert not scope.allows("http://redirected.example/", "http://redirected.example/x")
    assert not scope.allows("http://a.example/", "http://www.a.example/")


def test_domain_scope_uses_the_seeds_domains():
    scope = Scope("domain", ["http://www.example.co.uk/", "http://127.1.2.3/"])
    assert scope.allowed == {"example.co.uk", "127.1.2.3"}
    assert scope.allows("http://www.example.co.uk/", "http://shop.example.co.uk/")
    assert scope.allows("http://shop.example.co.uk/", "https://example.co.uk/")
    assert scope.allows("http://www.example.co.uk/", "http://127.1.2.3:8000/")
    assert not scope.allows("http://www.example.co.uk/", "http://example.com/")
    assert not scope.allows("http://www.example.co.uk/", "http://other.co.uk/")


def test_scope_is_fast_on_many_links():

    scope = Scope("domain", [f"http://site{i}.example.com/" for i in range(100)])
    urls = [f"http://h{i % 500}.site{i % 200}.example.com/p/{i}" for i in range(50_000)]
    allowed = sum(scope.allows("http://site1.example.com/", u) for u in urls)
    assert allowed == 50_000  # all under example.com


def test_no_network_and_no_cache_files(tmp_path):
    """The Public Suffix List comes from tldextract's bundled snapshot: a fresh
    interpreter with every socket call made to fail still answers, and writes
    no cache file."""
    code = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise AssertionError(f"network access attempted: {args!r}")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from crawlproj.scope import Scope, registered_domain
        assert registered_domain("a.example.co.uk") == "example.co.uk"
        assert registered_domain("x.user.github.io") == "user.github.io"
        assert Scope("domain", ["http://a.example.co.uk/"]).allows(None, "http://b.example.co.uk/")
        print("ok")
        """
    )
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TLDEXTRACT_CACHE": str(tmp_path / "tldcache"),
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, env=env,
        cwd=str(Path(__file__).resolve().parent.parent),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert not any(tmp_path.rglob("*")), list(tmp_path.rglob("*"))
