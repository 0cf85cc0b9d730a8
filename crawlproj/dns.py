"""Host names that do not resolve: the policy, and the seeds' names checked at start.

Mercator §3.3 makes host name resolution a component of its own, and §4
counts the URLs that "referred to a nonexistent web server" apart: a DNS
error is an outcome of its own (Figure 6: 1.02 % of the download attempts),
beside robots.txt exclusions and TCP errors. A name that does not resolve is
no server saying anything, so RFC 9309's "unreachable" robots.txt (wait
ROBOTS_RETRY_WAIT, fetch again, after ROBOTS_RETRY_TIMES disallow all) is not
its rule. Its rule (docs/hardening.md, "Names that do not resolve"):

* A host's first contact is its robots.txt (crawlproj/robots/middleware.py). When the
  lookup of its name fails, the host is tried again DNS_RETRY_TIMES times,
  DNS_RETRY_WAIT seconds apart: DNS failures can be transient (a resolver
  timing out, a SERVFAIL). Then the host is taken as not resolving, for every
  worker (its robots cache entry says so, until ROBOTS_EXPIRY), and each of
  its URLs fails at once as a DNS error (:class:`HostUnresolvable`; in the
  crawl log Heritrix's -6, "prerequisite domain-lookup failed"), counted as
  one in the stats' figures, ``scrapy report`` and the dashboard.
* Seeds (:class:`SeedCheck`): at start each worker looks up the names of the
  seeds it was given, through the resolver its downloads use, with the same
  retries, while the crawl begins; each seed whose host does not resolve is
  named in one warning. A worker none of whose seeds resolves stops (finish
  reason ``seed_dns_error``; ``scrapy crawl`` exits 7, crawlproj.errors.
  EXIT_STATUS): it was given nothing it can crawl. A seed reached through a proxy is not looked up (the proxy
  resolves its name), nor one whose host is an IP address.
* Without robots.txt (ROBOTSTXT_OBEY off), a page's failed lookup is Scrapy's
  download error: retried RETRY_TIMES times, then a DNS error like the rest.
"""

from __future__ import annotations

import ipaddress
import logging
import urllib.request
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import CannotResolveHostError, DontCloseSpider, IgnoreRequest
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolutionReceiver
from twisted.internet.task import deferLater
from zope.interface import implementer

__all__ = ["SEED_DNS_ERROR", "HostUnresolvable", "SeedCheck", "is_dns_error", "lookup"]

logger = logging.getLogger(__name__)

# The finish reason of a worker none of whose seeds resolves.
SEED_DNS_ERROR = "seed_dns_error"


class HostUnresolvable(IgnoreRequest):
    """The request's host does not resolve (after DNS_RETRY_TIMES more
    lookups): the request fails as a DNS error, never sent."""


def is_dns_error(exc: BaseException) -> bool:
    """Whether a download failed because its host's name did not resolve
    (Scrapy's error for it, or Twisted's)."""
    return isinstance(exc, (CannotResolveHostError, DNSLookupError))


@implementer(IResolutionReceiver)
class _Answers:
    def __init__(self):
        self.addresses: list = []
        self.done: defer.Deferred = defer.Deferred()

    def resolutionBegan(self, resolution) -> None:
        pass

    def addressResolved(self, address) -> None:
        self.addresses.append(address)

    def resolutionComplete(self) -> None:
        self.done.callback(self.addresses)


def lookup(resolver, name: str) -> defer.Deferred:
    """The addresses resolver (an IHostnameResolver) gives for name, as a
    Deferred list; empty when the name does not resolve."""
    answers = _Answers()
    resolver.resolveHostName(answers, name, 0)
    return answers.done


def _proxied(settings, url: str, host: str) -> bool:
    """Whether a download of url goes through a proxy, which resolves its
    name: CRAWL_PROXY (middlewares/proxy.py), or the environment's proxies as
    Scrapy's HttpProxyMiddleware reads them (getproxies, proxy_bypass)."""
    if settings.get("CRAWL_PROXY"):
        return True
    if not settings.getbool("HTTPPROXY_ENABLED"):
        return False
    return urlsplit(url).scheme in urllib.request.getproxies() and \
        not urllib.request.proxy_bypass(host)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class SeedCheck:
    """An extension: the seeds' host names looked up at start (see the module)."""

    def __init__(self, crawler, tries: int, wait: float):
        self.crawler = crawler
        self.tries = tries
        self.wait = wait
        self.checking: defer.Deferred | None = None

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        check = cls(crawler, 1 + s.getint("DNS_RETRY_TIMES"), s.getfloat("DNS_RETRY_WAIT"))
        crawler.signals.connect(check._opened, signals.spider_opened)
        crawler.signals.connect(check._idle, signals.spider_idle)
        return check

    def _opened(self, spider) -> None:
        seeds = list(getattr(spider, "seed_urls", None) or ())
        if seeds:  # the crawl begins meanwhile: the check is not waited for
            self.checking = deferred_from_coro(self._check(seeds))
            self.checking.addErrback(lambda f: logger.warning(
                "the seeds' host names were not checked: %s", f.getErrorMessage()))

    def _idle(self, spider) -> None:
        # a crawl done before the check is: the seeds are named first
        if self.checking is not None and not self.checking.called:
            raise DontCloseSpider

    def _resolver(self):
        """The resolver the downloads use: the reactor's, under the address
        guard's wrapper (crawlproj/addressguard/), which drops the answers
        the guard refuses; a refused name is the guard's to name."""
        from twisted.internet import reactor

        from crawlproj.addressguard import GuardResolver

        resolver = reactor.nameResolver
        return resolver.inner if isinstance(resolver, GuardResolver) else resolver

    async def _resolves(self, name: str) -> bool:
        from twisted.internet import reactor

        for attempt in range(self.tries):
            if attempt:
                await maybe_deferred_to_future(deferLater(reactor, self.wait))
            try:
                if await maybe_deferred_to_future(lookup(self._resolver(), name)):
                    return True
            except Exception as exc:  # a resolver's failure is a failed lookup
                logger.debug("lookup of %s failed: %s", name, exc)
        return False

    async def _check(self, seeds: list[str]) -> None:
        settings, stats = self.crawler.settings, self.crawler.stats
        by_host: dict[str, list[str]] = {}
        unchecked = 0
        for url in seeds:
            host = urlsplit(url).hostname or ""
            if not host or _is_address(host) or _proxied(settings, url, host):
                unchecked += 1
            else:
                by_host.setdefault(host, []).append(url)
        hosts = list(by_host)
        results = await maybe_deferred_to_future(defer.gatherResults(
            [deferred_from_coro(self._resolves(h)) for h in hosts]))
        failed = [h for h, ok in zip(hosts, results) if not ok]
        for host in failed:
            for url in by_host[host]:
                stats.inc_value("seeds/unresolvable")
                logger.warning("seed %s: host %s does not resolve (%d lookups, %g s apart); "
                               "its URLs are counted as DNS errors", url, host, self.tries,
                               self.wait)
        if hosts and len(failed) == len(hosts) and not unchecked:
            logger.error("no seed could be crawled: no seed's host resolves")
            deferred_from_coro(self.crawler.engine.close_spider_async(reason=SEED_DNS_ERROR))
