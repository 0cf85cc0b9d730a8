"""Crawl scope: which discovered links the `web` spider follows.

Mercator §3 (step 6) tests every extracted URL against a user-supplied URL
filter before the duplicate URL eliminator. Here that filter is the
``CRAWL_SCOPE`` setting:

* ``any``: every http(s) link is followed;
* ``host``: only links to one of the seeds' host names (compared
  case-insensitively, without the port and a trailing dot);
* ``domain``: only links to one of the seeds' registered domains, so
  ``a.example.co.uk`` and ``b.example.co.uk`` share a scope. IP addresses,
  and hosts under no known public suffix (``localhost``, intranet names), are
  compared as whole hosts.

Registered domains come from tldextract's bundled Public Suffix List snapshot,
never the network (see :func:`registered_domain`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

import tldextract

__all__ = ["MODES", "Scope", "host_of", "registered_domain"]

MODES = ("host", "domain", "any")

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


def _normalise_host(host: str) -> str:
    host = host.lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            pass
    return host


def host_of(url: str) -> str | None:
    """The lower-cased host name (IDNA, no port, no trailing dot) of ``url``,
    or None when it has none or does not parse."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    return _normalise_host(host) or None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


@lru_cache(maxsize=65_536)
def registered_domain(host: str) -> str:
    """The registered domain of a host: ``b.example.co.uk`` → ``example.co.uk``.

    The host itself for IP addresses and for hosts under no known public
    suffix (``localhost``, ``intranet.corp``), and for a host that is itself a
    public suffix (``co.uk``). Cached: a broad crawl asks about the same hosts
    again and again.
    """
    host = _normalise_host(host)
    if not host or _is_ip(host):
        return host
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
        mode = (mode or "any").strip().lower()
        if mode not in MODES:
            raise ValueError(f"crawl scope must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.allowed: set[str] = set()
        self.add_seeds(seeds)

    def key(self, url: str) -> str | None:
        """The host (mode host) or registered domain (mode domain) of ``url``;
        None when ``url`` has no host. In mode any, the host."""
        host = host_of(url)
        if host is None or self.mode != "domain":
            return host
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
