"""A worker's sitemaps: requested when robots.txt names them, read when they come.

:class:`Sitemaps` is what crawlproj/sitemaps/middleware.py hands its work to:

- ``robots_response``: a robots.txt came (crawlproj/robots/middleware.py fetches it
  once per origin per crawl, under the lease of the page that needed it;
  Scrapy's response_received signal shows it here): each sitemap it names
  (or /sitemap.xml with SITEMAP_GUESS, when it names none or answers 4xx)
  goes to the frontier as a request. The frontier makes it what robots.txt
  is: fetched under its host's lease, one request per host at a time across
  every worker, after the host's politeness wait and Crawl-delay, checked
  against robots.txt, and once per crawl (the DUE's URL-seen test), however
  many workers read the robots.txt again after it expires;
- ``read``: a sitemap's response, parsed (crawlproj/sitemaps/parse.py) in a
  thread, gives requests: its URLs, through the same path as a page's links
  (the spider middlewares after this one, the crawl scope, the frontier's
  admission and the DUE), and for an index the sitemaps it names, within
  SITEMAP_MAX_DEPTH and the host's SITEMAP_MAX_FILES; with RECRAWL_ENABLED
  the lastmods go to the pages scheduled for recrawl (lastmod.py).

Bad input is one line in the log per sitemap (what was wrong, what was
read), counted under ``sitemaps/``; what was read before it is kept, and the
crawl goes on. The counters:

    sitemaps/requested           sitemap requests made (robots.txt, guesses, indexes)
    sitemaps/fetched             sitemap responses read
    sitemaps/failed/<why>        sitemap fetch attempts that failed (http_<status>,
                                 or the download error)
    sitemaps/invalid/<why>       sitemaps with a problem (parse.SitemapReader's reasons)
    sitemaps/indexes             of them, sitemap indexes
    sitemaps/dropped/<why>       sitemaps not requested: depth, files_per_host, scope, and
                                 an index's entries: malformed, cross_host, outside_path
    sitemaps/urls/found          URLs read in sitemaps
    sitemaps/urls/dropped/<why>  of them, dropped: malformed, cross_host, outside_path, scope
    sitemaps/urls/admitted       taken by the frontier's admission (new or not: the DUE
                                 drops the URLs the crawl has seen)
    sitemaps/lastmod/revised     scheduled pages whose lastmod moved past their last fetch
    sitemaps/lastmod/invalid, sitemaps/lastmod/future   lastmods that were no date
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from scrapy import Request, signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

from crawlproj.components import registered
from crawlproj.frontier.frontier import Frontier
from crawlproj.recrawl.estimate import parse_http_date
from crawlproj.recrawl.schedule import Recrawl
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.robots import ROBOTS_FOR, origin_of, verdict
from crawlproj.sitemaps.budget import FileBudget
from crawlproj.sitemaps.discovery import (
    HOP,
    MANIFEST,
    SITEMAP,
    SitemapScope,
    guess_url,
    read_meta,
    sitemap_lines,
    sitemap_meta,
)
from crawlproj.sitemaps.lastmod import LastmodFeed, w3c_datetime
from crawlproj.sitemaps.parse import INDEX, SitemapReader
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)

PREFIX = "sitemaps/"


@dataclass
class _Read:
    """What one sitemap gave."""

    entries: int = 0
    wanted: list[str] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    lastmods: list[tuple[str, float]] = field(default_factory=list)
    bad_lastmods: int = 0


class Sitemaps:
    """One worker's sitemaps (see the module's doc). lastmod: feed lastmods
    to the recrawl schedule (SITEMAP_LASTMOD in a continuous crawl)."""

    def __init__(self, crawler, budget: FileBudget, max_urls: int, max_bytes: int,
                 max_depth: int, guess: bool, lastmod: bool):
        self.crawler = crawler
        self.stats = crawler.stats
        self.budget = budget
        self.max_urls, self.max_bytes, self.max_depth = max_urls, max_bytes, max_depth
        self.guess = guess
        self.lastmod = lastmod
        self._feed: LastmodFeed | None = None
        crawler.signals.connect(self._scheduled, signals.request_scheduled)
        crawler.signals.connect(self._dropped, signals.request_dropped)

    @classmethod
    def from_crawler(cls, crawler) -> Sitemaps:
        s = crawler.settings
        redis = get_redis(s)
        budget = FileBudget(redis, Keyspace.from_settings(s, redis), s.getint("SITEMAP_MAX_FILES"))
        return cls(crawler, budget, s.getint("SITEMAP_MAX_URLS"), s.getint("SITEMAP_MAX_BYTES"),
                   s.getint("SITEMAP_MAX_DEPTH"), s.getbool("SITEMAP_GUESS"),
                   s.getbool("SITEMAP_LASTMOD") and s.getbool("RECRAWL_ENABLED"))

    def count(self, name: str, n: int = 1) -> None:
        if n:
            self.stats.inc_value(PREFIX + name, n)

    # -- discovery -------------------------------------------------------------

    def robots_response(self, request, response) -> None:
        """A robots.txt response, as the robots middleware reads it (RFC 9309
        §2.3.1, crawlproj.robots.verdict): a 2xx is parsed, a 4xx means none;
        a redirect's target comes as a response of its own, and a 5xx means
        robots.txt is fetched again later."""
        status = response.status
        if 300 <= status < 400:
            return
        meaning = verdict(status)
        if meaning == "retry":
            return
        body = None
        if meaning == "parse":
            body = response.body
            if "download_stopped" in (response.flags or []):
                body = body[:body.rfind(b"\n") + 1]  # a line cut in two names no sitemap
        self.robots_fetched(origin_of(request.meta[ROBOTS_FOR].url), body)

    def robots_fetched(self, origin: str, body: bytes | None) -> None:
        """The sitemaps of an origin whose robots.txt was fetched (body None:
        it has none, a 4xx) go to the frontier."""
        urls = sitemap_lines(body, origin)
        named_by = origin
        if not urls and self.guess:
            urls, named_by = [guess_url(origin)], ""
        requests = [self.request(url, 0, named_by) for url in urls
                    if self._in_scope(origin + "/", url)]
        self.count("dropped/scope", len(urls) - len(requests))
        if requests:
            d = threads.deferToThread(self._granted, requests)
            d.addCallback(lambda granted: self._crawl(granted, len(requests)))
            d.addErrback(lambda f: logger.warning("Sitemaps of %s not requested: %s", origin,
                                                  f.getErrorMessage()))

    def request(self, url: str, level: int, named_by: str) -> Request:
        return Request(url, meta={SITEMAP: sitemap_meta(level, named_by), HOP: MANIFEST})

    def _in_scope(self, source: str, url: str) -> bool:
        """The crawl scope's word (the web spider's -a scope / CRAWL_SCOPE)."""
        scope = getattr(self.crawler.spider, "scope", None)
        return scope is None or scope.allows(source, url)

    def _granted(self, requests: list[Request]) -> list[Request]:
        """The requests within their hosts' SITEMAP_MAX_FILES (in a thread)."""
        by_host: dict[str, list[Request]] = {}
        for r in requests:
            by_host.setdefault(host_of(r.url), []).append(r)
        out = []
        for host, rs in by_host.items():
            n = self.budget.take(host, len(rs))
            out += rs[:n]
            if n < len(rs):
                logger.warning("Sitemaps of %s past SITEMAP_MAX_FILES (%d): %d not requested",
                               host, self.budget.limit, len(rs) - n)
        return out

    def _crawl(self, requests: list[Request], asked: int) -> None:
        self.count("dropped/files_per_host", asked - len(requests))
        engine = self.crawler.engine
        for r in requests:
            try:
                engine.crawl(r)
            except RuntimeError:  # the spider closed meanwhile
                return
            self.count("requested")

    @staticmethod
    def _listed(request) -> bool:
        """A URL a sitemap listed, scheduled for the first time (not a
        sitemap, nor a redirect's or a retry's copy)."""
        meta = request.meta
        return meta.get(HOP) == MANIFEST and SITEMAP not in meta \
            and not meta.get("redirect_times") and not meta.get("retry_times")

    def _scheduled(self, request, spider=None):
        if self._listed(request):
            self.count("urls/admitted")

    def _dropped(self, request, spider=None):
        if self._listed(request):
            self.count("urls/admitted", -1)  # the scheduler refused it

    # -- reading -----------------------------------------------------------------

    async def read(self, response, spider=None) -> AsyncIterator[Request]:
        """The requests a sitemap's response gives: its URLs, or the sitemaps it names."""
        meta = read_meta(response.meta.get(SITEMAP))
        if meta is None:
            self.count("invalid/meta")
            logger.warning("Sitemap %s: its request's sitemap meta is not [level, origin]: "
                           "not read", response.url[:200])
            return
        level, named_by = meta
        self.count("fetched")
        reader = SitemapReader(response.body, self.max_urls, self.max_bytes,
                               body_cut="download_stopped" in (response.flags or []))
        # parsed and sorted in a thread: 50,000 entries are a second of work
        read = await maybe_deferred_to_future(threads.deferToThread(
            self._sort, reader, SitemapScope(response.url, named_by), response.url))
        for reason, _ in reader.problems:
            self.count(f"invalid/{reason}")
        self.count("lastmod/invalid", read.bad_lastmods)
        if reader.kind == INDEX:
            self.count("indexes")
            children = await self._children(read.wanted, level, read.dropped)
            for reason, n in read.dropped.items():
                self.count(f"dropped/{reason}", n)
            for r in children:
                self.count("requested")
                yield r
        else:
            self.count("urls/found", read.entries)
            for reason, n in read.dropped.items():
                self.count(f"urls/dropped/{reason}", n)
            for url in read.wanted:
                yield Request(url, meta={HOP: MANIFEST})
            if read.lastmods:
                self._feed_lastmods(response, read.lastmods)
        self._say(response.url, reader, read.entries, read.dropped)

    def _sort(self, reader: SitemapReader, scope: SitemapScope, source: str) -> _Read:
        """A sitemap's entries read and sorted: wanted, dropped (by reason),
        and the lastmods of the wanted URLs (in a thread: no stats here)."""
        out = _Read()
        for entry in reader:
            out.entries += 1
            urlset = reader.kind != INDEX
            url, why = scope.check(entry.loc)
            if why is None and urlset and not self._in_scope(source, url):
                why = "scope"
            if why is not None:
                out.dropped[why] += 1
                continue
            out.wanted.append(url)
            if urlset and self.lastmod and entry.lastmod is not None:
                at = w3c_datetime(entry.lastmod)
                if at is None:
                    out.bad_lastmods += 1
                else:
                    out.lastmods.append((url, at))
        return out

    async def _children(self, urls: list[str], level: int, dropped: Counter) -> list[Request]:
        """The requests of an index's sitemaps, within depth and budget."""
        if not urls:
            return []
        if level + 1 > self.max_depth:
            dropped["depth"] += len(urls)
            return []
        requests = [self.request(url, level + 1, "") for url in urls]
        granted = await maybe_deferred_to_future(threads.deferToThread(self._granted, requests))
        if len(granted) < len(requests):
            dropped["files_per_host"] += len(requests) - len(granted)
        return granted

    def _feed_lastmods(self, response, lastmods: list[tuple[str, float]]) -> None:
        feed = self._lastmod_feed()
        if feed is None:
            return
        now = time.time()
        date = parse_http_date(response.headers.get(b"Date")) or now

        def done(result):
            revised, future = result
            self.count("lastmod/revised", revised)
            self.count("lastmod/future", future)

        d = threads.deferToThread(feed.feed, lastmods, date, now)
        d.addCallback(done)
        d.addErrback(lambda f: logger.warning("Sitemap %s: lastmods not applied: %s",
                                              response.url[:200], f.getErrorMessage()))

    def _lastmod_feed(self) -> LastmodFeed | None:
        if self._feed is None:
            frontier = registered(self.crawler, Frontier)
            recrawl = registered(self.crawler, Recrawl)
            if frontier is None or recrawl is None:
                self.lastmod = False
                return None
            self._feed = LastmodFeed(frontier, recrawl)
        return self._feed

    def _say(self, url: str, reader: SitemapReader, read: int, dropped: Counter) -> None:
        """One line for a sitemap with anything wrong, naming all of it."""
        kind = {INDEX: "index", None: "no sitemap"}.get(reader.kind, reader.kind)
        if not reader.problems and not dropped:
            logger.debug("Sitemap %s (%s): %d entries", url[:200], kind, read)
            return
        parts = [message for _, message in reader.problems]
        if dropped:
            parts.append("dropped: " + ", ".join(f"{n} {why}" for why, n in sorted(dropped.items())))
        logger.warning("Sitemap %s (%s, %d entries read): %s", url[:200], kind, read,
                       "; ".join(parts))

    # -- failures ----------------------------------------------------------------------

    def failed(self, request, reason: str) -> None:
        """A sitemap's fetch failed (an HTTP error status, a download error)."""
        self.count(f"failed/{reason}")
        logger.warning("Sitemap %s not fetched: %s", request.url[:200], reason)
