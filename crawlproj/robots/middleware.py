"""robots.txt fetched once per origin per crawl, under the host's lease.

Mercator §3 keeps one robots cache for the whole crawler, and fetches a
host's robots.txt as a request like any other, through the frontier's
politeness. Here (docs/frontier.md, "robots.txt"):

- every request the frontier hands out is checked against its origin's
  rules: this worker's LRU, then the crawl's key in Redis
  (crawlproj/robots/cache.py, RobotsCache);
- when neither has them, this worker fetches robots.txt now, under the host's
  lease it already holds (the frontier leases a host to one worker at a time),
  through engine.download, so that it passes the other downloader
  middlewares (proxy, records). That download is the host's request: the
  page is not sent after it, it goes back to its host's queue
  (RobotsFetched), and the host is released with the politeness wait of the
  robots.txt download and the Crawl-delay just read (the scheduler's
  robots_fetched), so both hold between robots.txt and the host's next
  request, whichever worker makes it;
- RFC 9309 §2.3.1 decides what the fetch means (crawlproj.robots.verdict):
  at most ROBOTS_MAXSIZE bytes are read (the download stops there), at
  most five redirects are followed, a 4xx allows all, a 5xx, 429 or network
  error makes the host wait ROBOTS_RETRY_WAIT with its URLs queued, and
  robots.txt is fetched again then;
- a host whose name does not resolve is no server's answer (crawlproj/dns.py):
  it waits DNS_RETRY_WAIT and is tried again, DNS_RETRY_TIMES times; then
  each of its URLs fails as a DNS error (HostUnresolvable);
- a disallowed URL is dropped (robotstxt/forbidden); an allowed one carries
  its host's Crawl-delay to the frontier as ``request.meta["crawl_delay"]``
  (FRONTIER_OBEY_CRAWL_DELAY).

A request no lease holds (another path than the frontier) is checked too,
fetching robots.txt first if need be, and then sent.
"""

from __future__ import annotations

import logging

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

from crawlproj.components import registered
from crawlproj.dns import HostUnresolvable, is_dns_error
from crawlproj.frontier.downloads import Downloads
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.robots.cache import (
    ALLOW_ALL,
    DISALLOW_ALL,
    MAX_REDIRECTS,
    NO_HOST,
    ROBOTS_FOR,
    RobotsCache,
    Rules,
    failed,
    origin_of,
    robots_url,
    unresolved,
    verdict,
)
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)

# meta key of a robots.txt request (Scrapy's name, which the stores know too)
ROBOTS = "dont_obey_robotstxt"


class RobotsFetched(IgnoreRequest):
    """The request's turn with its host went to the host's robots.txt: it goes
    back to the frontier unfetched (not a download attempt, not an error)."""


class RobotsMiddleware:
    def __init__(self, crawler, cache: RobotsCache):
        s = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.cache = cache
        self.useragent = cache.useragent
        self.maxsize = s.getint("ROBOTS_MAXSIZE")
        self.retry_wait = s.getfloat("ROBOTS_RETRY_WAIT")
        self.retry_times = s.getint("ROBOTS_RETRY_TIMES")
        self.dns_retry_wait = s.getfloat("DNS_RETRY_WAIT")
        self.dns_retry_times = s.getint("DNS_RETRY_TIMES")
        crawler.signals.connect(self._bytes_received, signals.bytes_received)

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        redis = get_redis(s)
        useragent = s.get("ROBOTSTXT_USER_AGENT") or s.get("USER_AGENT")
        cache = RobotsCache(redis, Keyspace.from_settings(s, redis), useragent,
                            size=s.getint("ROBOTS_CACHE_SIZE"),
                            expiry=s.getfloat("ROBOTS_EXPIRY"))
        return cls(crawler, cache)

    # -- the check -----------------------------------------------------------

    async def process_request(self, request):
        if request.meta.get(ROBOTS):
            return None
        origin = origin_of(request.url)
        if not origin.startswith(("http://", "https://")):
            return None
        rules = self.cache.get_local(origin)
        if rules is not None:
            self.stats.inc_value("robotstxt/cache/local")
        else:
            rules = await self._shared(origin)
            if rules is not None and rules.known:
                self.stats.inc_value("robotstxt/cache/redis")
        if rules is None or not rules.known:
            rules, wait = await self._fetch(origin, rules or Rules(), request)
            downloads = registered(self.crawler, Downloads)  # None: another scheduler
            robots_fetched = downloads.robots_fetched if downloads is not None else None
            if (rules is None or rules.resolves) and robots_fetched is not None and \
                    robots_fetched(request, rules.crawl_delay if rules else None, wait):
                raise RobotsFetched("robots.txt fetched on this request's turn")
            if rules is None:  # no lease to wait with: robots.txt is unreachable, disallow
                self.stats.inc_value("robotstxt/forbidden")
                raise IgnoreRequest("Forbidden by robots.txt (unreachable)")
        if not rules.resolves:
            self.stats.inc_value("dns/urls_failed")
            raise HostUnresolvable(f"{origin.split('://', 1)[1]} does not resolve")
        if not rules.allowed(request.url, self.useragent):
            logger.debug("Forbidden by robots.txt: %s", request)
            self.stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest("Forbidden by robots.txt")
        if rules.crawl_delay:
            request.meta["crawl_delay"] = rules.crawl_delay
        return None

    async def _shared(self, origin: str) -> Rules | None:
        # Redis off the reactor thread; the worker's LRU on it
        try:
            stored, ttl = await maybe_deferred_to_future(
                threads.deferToThread(self.cache.read, origin))
        except Exception as exc:  # the cache is a cache: fetch robots.txt instead
            logger.warning("robots.txt cache of %s unreadable: %s", origin, exc)
            return None
        return self.cache.loaded(origin, stored, ttl)

    async def _store(self, origin: str, stored: bytes, rules: Rules | None = None) -> None:
        self.stats.inc_value("robotstxt/stored")
        self.stats.inc_value("robotstxt/stored_bytes", len(stored))
        rules = rules or Rules.load(stored, self.useragent)[0]
        if rules.crawl_delay:  # stored once per origin per crawl: summed, the origins with one
            self.stats.inc_value("robotstxt/crawl_delay")
        self.cache.keep(origin, rules)
        try:
            await maybe_deferred_to_future(threads.deferToThread(self.cache.write, origin, stored))
        except Exception as exc:
            logger.warning("robots.txt rules of %s not shared: %s", origin, exc)

    # -- the fetch -----------------------------------------------------------

    async def _fetch(self, origin: str, before: Rules, request) -> tuple[Rules | None, float | None]:
        """Fetch the origin's robots.txt on request's behalf and store what it
        means: (rules, None), or (None, wait) when it must be fetched again
        after wait seconds (the rules are unknown until then). ``before``:
        the origin's entry so far (its failures)."""
        url = robots_url(origin)
        status = None
        response = None
        for hop in range(MAX_REDIRECTS + 1):
            fetch = Request(url, callback=NO_CALLBACK, dont_filter=True, priority=1000, meta={
                ROBOTS: True, ROBOTS_FOR: request, "dont_redirect": True, "dont_retry": True})
            self.stats.inc_value("robotstxt/request_count")
            try:
                response = await self.crawler.engine.download_async(fetch)
            except IgnoreRequest as exc:
                # refused before any connection (the address guard, a lost
                # lease): the page would be refused alike, and the origin's
                # robots.txt is not unreachable, so nothing is stored or retried
                self.stats.inc_value("robotstxt/refused")
                raise IgnoreRequest(f"robots.txt not fetched: {exc}") from None
            except Exception as exc:
                name = type(exc).__name__
                self.stats.inc_value(f"robotstxt/exception_count/{name}")
                if is_dns_error(exc) and (hop == 0 or host_of(url) == host_of(origin)):
                    return await self._unresolved(origin, before.unresolved + 1)
                logger.info("robots.txt of %s not fetched: %s: %s", origin, name, exc)
                status = response = None
                break
            status = response.status
            self.stats.inc_value(f"robotstxt/response_status_count/{status}")
            location = response.headers.get(b"Location")
            if not (300 <= status < 400 and location):
                break
            url = response.urljoin(location.decode("latin-1"))
        else:  # RFC 9309 §2.3.1.2: past five redirects robots.txt is unavailable
            self.stats.inc_value("robotstxt/too_many_redirects")
            return await self._known(origin, ALLOW_ALL), None
        meaning = verdict(status)
        if meaning == "parse":
            rules, stored = Rules.parsed(self._body(response), self.useragent)
            await self._store(origin, stored, rules)
            return rules, None
        if meaning == "allow":
            return await self._known(origin, ALLOW_ALL), None
        failures = before.failures + 1
        self.stats.inc_value("robotstxt/unreachable")
        if failures >= self.retry_times:
            logger.warning("robots.txt of %s unreachable %d times: disallowing it all",
                           origin, failures)
            return await self._known(origin, DISALLOW_ALL), None
        await self._store(origin, failed(failures))
        return None, self.retry_wait

    async def _unresolved(self, origin: str, lookups: int) -> tuple[Rules | None, float | None]:
        """The origin's name did not resolve for the lookups-th time in a row:
        (None, DNS_RETRY_WAIT) to try again, or, past DNS_RETRY_TIMES more, its
        entry says the host does not resolve (crawlproj/dns.py)."""
        self.stats.inc_value("dns/lookups_failed")
        if lookups <= self.dns_retry_times:
            await self._store(origin, unresolved(lookups))
            return None, self.dns_retry_wait
        self.stats.inc_value("dns/hosts_unresolvable")
        logger.warning("host %s does not resolve (%d lookups, %g s apart): its URLs are "
                       "counted as DNS errors", origin.split("://", 1)[1], lookups,
                       self.dns_retry_wait)
        return await self._known(origin, NO_HOST), None

    async def _known(self, origin: str, stored: bytes) -> Rules:
        await self._store(origin, stored)
        return Rules.load(stored, self.useragent)[0]

    def _body(self, response) -> bytes:
        body = response.body[:self.maxsize]
        if len(response.body) > self.maxsize or "download_stopped" in response.flags:
            self.stats.inc_value("robotstxt/truncated")
            body = body[:body.rfind(b"\n") + 1]  # a line cut in two is no rule
        return body

    def _bytes_received(self, data, request, spider=None):
        """Stop a robots.txt download at ROBOTS_MAXSIZE bytes (RFC 9309
        §2.5), keeping what came: a 10 MB robots.txt costs 500 KiB."""
        if request.meta.get(ROBOTS_FOR) is None:
            return
        got = request.meta["_crawlproj_robots_bytes"] = \
            request.meta.get("_crawlproj_robots_bytes", 0) + len(data)
        if got >= self.maxsize:
            raise StopDownload(fail=False)
