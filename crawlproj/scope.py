"""Crawl scope: which discovered links the `web` spider follows.

Mercator §3 (step 6) tests every extracted URL against a user-supplied URL
filter before the duplicate URL eliminator. Here that filter is the
``CRAWL_SCOPE`` setting:

* ``any``: every http(s) link is followed;
* ``host``: only links to one of the seeds' host names (as the crawl's URL
  rule, crawlproj.urls, gives them: lower-case, IDNA; compared without the
  port and a trailing dot);
* ``domain``: only links to one of the seeds' registered domains, so
  ``a.example.co.uk`` and ``b.example.co.uk`` share a scope. IP addresses,
  and hosts under no known public suffix (``localhost``, intranet names), are
  compared as whole hosts.

Registered domains come from tldextract's bundled Public Suffix List snapshot,
never the network (see :func:`registered_domain`).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import tldextract

from crawlproj.errors import CrawlprojError
from crawlproj.urls import hostname, parse_host

__all__ = ["MODES", "Scope", "ScopeError", "registered_domain", "scope_mode"]

MODES = ("host", "domain", "any")


class ScopeError(CrawlprojError, ValueError):
    """A scope that is not one of MODES; the message is one line."""


def scope_mode(value, what: str = "crawl scope") -> str:
    """``value`` as one of MODES (any case, spaces ignored; empty: ``any``);
    ScopeError naming ``what`` (the argument or setting it came from) otherwise."""
    mode = str(value or "any").strip().lower()
    if mode not in MODES:
        raise ScopeError(f"{what} must be one of {', '.join(MODES)}, not {value!r}")
    return mode

# suffix_list_urls=() and cache_dir=None: no download of the Public Suffix
# List and no cache file; tldextract falls back to the snapshot shipped in the
# package (fallback_to_snapshot=True). Every worker thus has the same list,
# whatever its network, and scope decisions agree across the cluster.
# Private suffixes (github.io, blogspot.com, ...) count as public ones: sites
# under them belong to different owners, so "myblog.blogspot.com" is its own
# registered domain rather than all of blogspot.com.
_EXTRACT = tldextract.TLDExtract(
    suffix_list_urls=(),
    cache_dir=None,
    fallback_to_snapshot=True,
    include_psl_private_domains=True,
)


def _site(host: str) -> str:
    """A host of the URL rule as the scope compares it: ``example.com.`` is
    the same site as ``example.com``; IPv6 without its brackets."""
    return host.rstrip(".") if host[0] != "[" else host[1:-1]


@lru_cache(maxsize=65_536)
def registered_domain(host: str) -> str:
    """The registered domain of a host: ``b.example.co.uk`` → ``example.co.uk``.

    The host itself for IP addresses and for hosts under no known public
    suffix (``localhost``, ``intranet.corp``), and for a host that is itself a
    public suffix (``co.uk``); "" for a string that is not a host (by the
    URL rule, :func:`crawlproj.urls.parse_host`). Cached: a broad crawl asks
    about the same hosts again and again.
    """
    parsed = parse_host(host)
    if parsed is None:
        return ""
    host = _site(parsed)
    if parsed[0] == "[" or host.rsplit(".", 1)[-1].isdigit():
        return host  # an IP address: the URL rule writes IPv4 as dotted decimal
    # The Public Suffix List's own algorithm, offline (see _EXTRACT).
    return _EXTRACT.extract_str(host).top_domain_under_public_suffix or host


class Scope:
    """Decides whether a link found on a page may be followed.

    ``Scope(mode, seeds)``: ``mode`` is one of :data:`MODES`; ``seeds`` are
    the crawl's seed URLs, whose hosts (mode ``host``) or registered domains
    (mode ``domain``) make the allowed set.

    :meth:`allows` ``(source_url, target_url)``: in mode ``any``, always
    True. Otherwise the target's host/registered domain must be in the seeds'
    set; with no seeds known (a worker joining a running crawl without the
    seeds argument) it must equal the source page's own, which keeps the
    crawl on the sites it is already on.
    """

    __slots__ = ("mode", "allowed")

    def __init__(self, mode: str = "any", seeds: Iterable[str] = ()):
        self.mode = scope_mode(mode)
        self.allowed: set[str] = set()
        self.add_seeds(seeds)

    def key(self, url: str) -> str | None:
        """The host (mode host) or registered domain (mode domain) of ``url``;
        None when ``url`` has no host. In mode any, the host."""
        host = hostname(url)
        if not host:
            return None
        if self.mode != "domain":
            return _site(host)
        return registered_domain(host)

    def add_seeds(self, seeds: Iterable[str]) -> None:
        if self.mode == "any":
            return
        for url in seeds:
            key = self.key(url)
            if key:
                self.allowed.add(key)

    def allows(self, source_url: str | None, target_url: str) -> bool:
        if self.mode == "any":
            return True
        target = self.key(target_url)
        if target is None:
            return False
        if self.allowed:
            return target in self.allowed
        return source_url is not None and target == self.key(source_url)

    def __repr__(self) -> str:
        return f"Scope({self.mode!r}, {len(self.allowed)} allowed)"
