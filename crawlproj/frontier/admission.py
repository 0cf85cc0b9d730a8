"""Which URLs may enter the frontier at all.

Mercator §3 (step 6) runs every extracted URL through a URL filter before the DUE. Here
the frontier refuses what no worker could ever fetch, with a reason that goes
to the log and to the stats (frontier/refused/<reason>), and the crawl goes on;
then the user's URL filters (urlfilter.py) refuse what the crawl is not to
have (urlfilter/refused/<rule>), and the trap guard's URL rules
(crawlproj/traps) what looks like a crawler trap (trapguard/refused/<rule>).
Links, seeds, redirect targets, sitemap URLs and retries all enter here, so
each rule is decided in this one place.
"""

from __future__ import annotations

import logging
import math

from crawlproj.frontier import codec
from crawlproj.frontier.urlfilter import URLFilter
from crawlproj.prioritizers.basic import Prioritizer
from crawlproj.traps import TrapGuard
from crawlproj.traps.nearhost import SUSPECT, SUSPECT_META
from crawlproj.urls import host_of, refusal

logger = logging.getLogger(__name__)


class RecentURLs:
    """A worker's cache of the URLs it sent to the frontier lately: Mercator's
    "cache of popular URLs" in front of the DUE (§3.2, 2^16 entries there).
    Most links of a page were sent before (about 9 in 10), mostly by this same
    worker; crawlproj/frontier/recentlinks.py drops a link to one of them before
    Scrapy handles it. Least recently seen first out. The shared DUE stays the
    authority: a miss here is checked there."""

    def __init__(self, size: int):
        self.size = size
        self._urls: dict[str, None] = {}

    def __contains__(self, url) -> bool:
        return url in self._urls

    def seen(self, url: str) -> bool:
        """Was url sent lately? Remembers it either way."""
        urls = self._urls
        hit = urls.pop(url, 0) is None
        urls[url] = None
        if len(urls) > self.size:
            del urls[next(iter(urls))]
        return hit


class Refused(ValueError):
    """A URL the frontier will not take; counted as ``<stat>/<reason>``."""

    stat = "frontier/refused"

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


class Trap(Refused):
    """A URL the trap guard's rules refuse (crawlproj/traps)."""

    stat = "trapguard/refused"


class Filtered(Refused):
    """A URL the user's URL filters refuse (urlfilter.py)."""

    stat = "urlfilter/refused"


def admit(frontier, prioritizer, request, spider, max_length: int, guard=None, urlfilter=None):
    """(partition, enqueue entry) for request, or raise Refused. ``guard``:
    the trap guard's URL rules (crawlproj.traps.TrapGuard), or None;
    ``urlfilter``: the user's URL filters (urlfilter.URLFilter), or None."""
    bad = refusal(request.url, max_length)
    if bad is not None:
        raise Refused(*bad)
    if urlfilter is not None and (out := urlfilter.refusal(request.url)) is not None:
        raise Filtered(*out)
    if guard is not None and (trap := guard.refusal(request.url)) is not None:
        raise Trap(*trap)
    try:
        fp = frontier.due.fingerprint(request.url)
    except ValueError as exc:  # canonicalisation refused it
        raise Refused("malformed", str(exc)) from None
    bump = prioritizer.bump(request) if hasattr(prioritizer, "bump") else 0.0
    if not math.isfinite(bump):
        bump = 0.0
    host = host_of(request.url)
    score = prioritizer.score(request)
    if not math.isfinite(score):
        score = 1e300
    if request.meta.get(SUSPECT_META):
        score += SUSPECT  # behind the host's other URLs; dropped if it is trapped
    first = prioritizer.first_score(request) if hasattr(prioritizer, "first_score") else None
    entry = frontier.entry(host, request.url, score, codec.encode(request, spider, host),
                           force=request.dont_filter, fp=fp, bump=bump,
                           first=first if first is None or math.isfinite(first) else None,
                           best=getattr(prioritizer, "BEST_LINK", False))
    return frontier.partition_of(host), entry


class Admission:
    """The worker's gate to the frontier: each request the engine enqueues
    is admitted (admit) or refused with its reason logged and counted, and
    the URLs sent lately are remembered (sent_lately, asked by
    crawlproj/frontier/recentlinks.py through crawlproj.components)."""

    def __init__(self, frontier, prioritizer, stats, max_url_length: int, trap_guard=None,
                 url_filter=None, recent: int = 0):
        self.frontier = frontier
        self.prioritizer = prioritizer
        self.stats = stats
        self.max_url_length = max_url_length
        self.trap_guard = trap_guard  # crawlproj.traps.TrapGuard, or None
        self.url_filter = url_filter  # urlfilter.URLFilter, or None: no filter set
        # The URLs this worker sent lately; none when duplicates must arrive
        # (a prioritizer that bumps, or whose estimate is its best link's).
        bumps = getattr(type(prioritizer), "bump", Prioritizer.bump) is not Prioritizer.bump \
            or getattr(prioritizer, "BEST_LINK", False)
        self.sent = RecentURLs(recent) if recent > 0 and not bumps else None

    @classmethod
    def from_settings(cls, settings, frontier, prioritizer, stats) -> Admission:
        return cls(frontier, prioritizer, stats, settings.getint("FRONTIER_MAX_URL_LENGTH"),
                   TrapGuard.from_settings(settings), URLFilter.from_settings(settings),
                   settings.getint("DUE_CACHE_SIZE"))

    def admit(self, request, spider):
        """(partition, enqueue entry) for request, or None: refused, and
        said so (the log, the stats)."""
        try:
            p, entry = admit(self.frontier, self.prioritizer, request, spider,
                             self.max_url_length, self.trap_guard, self.url_filter)
        except Filtered as exc:
            self.url_filter.log(exc.reason, request.url, exc.message)
            self.stats.inc_value(f"{exc.stat}/{exc.reason}")
            return None
        except Trap as exc:
            self.trap_guard.log(host_of(request.url), exc.reason, request.url, exc.message)
            self.stats.inc_value(f"{exc.stat}/{exc.reason}")
            return None
        except Refused as exc:
            logger.warning("Frontier refused %s: %s", request.url[:200], exc.message)
            self.stats.inc_value(f"{exc.stat}/{exc.reason}")
            return None
        if self.sent is not None and not request.dont_filter:
            self.sent.seen(request.url)
        return p, entry

    def sent_lately(self, url: str) -> bool:
        """Did this worker send this exact URL to the frontier lately? Then
        another link to it changes nothing (crawlproj/frontier/recentlinks.py)."""
        return self.sent is not None and url in self.sent
