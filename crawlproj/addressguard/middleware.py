"""The address guard as a downloader middleware (crawlproj/addressguard/).

Every request a worker downloads passes here, after the proxy middlewares
(so it knows whether a proxy will resolve the host) and before retries and
redirects see its outcome: pages, robots.txt, redirects and retries alike.
It refuses, with IgnoreRequest, a scheme other than http and https, and a
host that is a non-public IP literal (as the WHATWG URL Standard reads the
URL, and as Python's URL parser reads it, the one Scrapy connects by) or a
name that is local by definition. It installs the guard resolver on the
reactor, which refuses non-public answers at connection time, and turns a
connection that failed for that reason into a refusal too, so that it is
neither retried nor taken for a host that is down.

Each refusal counts in the stats as addressguard/refused/<reason>; the first
refusal of a host is logged (a warning), the next ones are not.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.error import DNSLookupError

try:  # Scrapy 2.14+ hands download errors on as its own exceptions
    from scrapy.exceptions import CannotResolveHostError
except ImportError:  # pragma: no cover
    CannotResolveHostError = DNSLookupError

from crawlproj.addressguard import (
    AllowList,
    GuardResolver,
    Policy,
    guarded_handlers,
    resolver_key,
)
from crawlproj.urls import hostname

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}


class AddressGuardMiddleware:
    def __init__(self, crawler, policy: Policy):
        self.stats = crawler.stats
        self.policy = policy
        self._resolver: GuardResolver | None = None
        self._logged: OrderedDict[str, None] = OrderedDict()  # hosts whose refusal was logged

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        allow = AllowList.from_settings(s)
        if not guarded_handlers(s):
            raise NotConfigured  # nothing downloads http(s): nothing to guard
        return cls(crawler, Policy(allow))

    @property
    def resolver(self) -> GuardResolver:
        """The guard on the running reactor's resolver, installed with the
        first request (building the middleware must not install a reactor)."""
        from twisted.internet import reactor

        if self._resolver is None or reactor.nameResolver is not self._resolver:
            self._resolver = GuardResolver.install(reactor, self.policy)
        return self._resolver

    def process_request(self, request, spider=None):
        parsed = urlparse_cached(request)
        scheme = parsed.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            self._refuse(request, "scheme", parsed.hostname or "",
                         f"the scheme {scheme!r} is not http or https")
        host = parsed.hostname or ""
        # The host as a browser or a proxy reads the URL, and as Scrapy
        # connects by: both must pass.
        for name in dict.fromkeys((hostname(request.url), host)):
            reason = self.policy.host(name)
            if reason is not None:
                self._refuse(request, reason, name, f"{name or 'the host'} is {_said(reason)}")
        proxy = request.meta.get("proxy")
        if proxy:
            p = urlparse_cached_proxy(proxy)
            if p is not None:
                self.resolver.trust_proxy(*p)
        elif (resolver_key(host), parsed.port or _DEFAULT_PORTS[scheme]) in self.resolver.proxies \
                and not self.policy.allow.name(host):
            # a proxy's own address is trusted as the proxy, not as a web server
            self._refuse(request, "proxy", host, f"{host} is a proxy of this worker")
        return None

    def process_exception(self, request, exception, spider=None):
        # the guard resolver dropped every answer: the connection failed as
        # if the name did not resolve
        if isinstance(exception, (DNSLookupError, CannotResolveHostError)):
            host = urlparse_cached(request).hostname or ""
            reason = self.resolver.refusals.pop(resolver_key(host))
            if reason is not None:
                self._refuse(request, reason, host,
                             f"{host} resolves to {_said(reason)} addresses only")
        return None

    def _refuse(self, request, reason: str, host: str, why: str):
        self.stats.inc_value(f"addressguard/refused/{reason}")
        if host not in self._logged:
            self._logged[host] = None
            if len(self._logged) > 10_000:
                self._logged.popitem(last=False)
            logger.warning("Address guard refused %s: %s (ADDRESS_GUARD_ALLOW lets networks "
                           "and names through; further refusals for this host are counted "
                           "in addressguard/refused/*, not logged)", request.url[:200], why)
        raise IgnoreRequest(f"address guard: {why}")


def _said(reason: str) -> str:
    return {"local_name": "a local name", "invalid_host": "not a valid host",
            "cgnat": "carrier-grade NAT (shared)", "unresolvable": "unresolvable"
            }.get(reason, reason.replace("_", "-"))


def urlparse_cached_proxy(proxy: str) -> tuple[str, int] | None:
    """(host, port) of a proxy URL, as Scrapy's handler connects to it."""
    from urllib.parse import urlsplit

    if "://" not in proxy:
        proxy = "http://" + proxy
    try:
        parts = urlsplit(proxy)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower(), 80)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None
