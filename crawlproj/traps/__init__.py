"""The trap guard's URL rules: which URLs look like a crawler trap.

A crawler trap is a server's unbounded space of URLs: links that add a path
segment on every page (``/a/a/a/...``, relative links under a soft 404),
calendars, session ids, facets that multiply query parameters. Mercator §3
(step 6) runs every URL through a URL filter before the DUE; Heritrix's
decide rules (PathologicalPathDecideRule, TooManyPathSegmentsDecideRule,
TooManyHopsDecideRule) and Nutch's and StormCrawler's default URL filters
(a segment repeated three times) are such filters. The rules here look at
the URL alone, so they are decided where every URL enters the frontier
(crawlproj/frontier/admission.py: links, seeds, redirect targets), and
refused URLs are counted per rule as ``trapguard/refused/<rule>``:

* ``segment_run``: one path segment more than TRAPGUARD_MAX_SEGMENT_RUN times
  in a row (``/a/a/a/``; Heritrix's PathologicalPathDecideRule);
* ``segment_repeats``: one path segment more than TRAPGUARD_MAX_SEGMENT_REPEATS
  times anywhere in the path (``/a/b/a/c/a/d/a/``; Nutch's and StormCrawler's
  ``-.*(/[^/]+)/[^/]+\\1/[^/]+\\1/``, which catches alternation);
* ``path_segments``: more than TRAPGUARD_MAX_PATH_SEGMENTS segments
  (Heritrix's TooManyPathSegmentsDecideRule);
* ``query_params``: more than TRAPGUARD_MAX_QUERY_PARAMS query parameters
  (facets and parameters that pile up from link to link).

The other trap rules live where their facts are: the hop limit is
DEPTH_LIMIT (Scrapy's DepthMiddleware, stat ``depth/request_ignored_count``);
URL length is FRONTIER_MAX_URL_LENGTH (``frontier/refused/url_too_long``);
the per-host budgets of queued and fetched URLs are counted by the frontier
itself, crawl-wide (traps/lua/sync_budgets.lua, a part of its sync script);
near-duplicate pages per host are this package's too. docs/hardening.md has
each rule's default and the measurement behind it.

Here:
    __init__.py    the URL rules (TrapGuard); ResponseHeadLimit, the extension
                   that bounds every response's head
    nearhost.py    near-duplicate pages per host: simhash, and each host's window
                   in Redis (lua/nearhost.lua)
    lua/sync_budgets.lua  the frontier sync script's part of the trap guard: the
                   per-host budgets and trapped hosts' suspects
    middleware.py  NearDuplicateHostsMiddleware, the spider middleware that acts
                   on it (middlewares/trapguard.py is its entry point)
"""

from __future__ import annotations

import logging
from collections import Counter

from scrapy.exceptions import NotConfigured

from crawlproj import internals
from crawlproj.urls import InvalidURL, split

__all__ = ["RULES", "ResponseHeadLimit", "TrapGuard"]

logger = logging.getLogger(__name__)

RULES = ("segment_run", "segment_repeats", "path_segments", "query_params")

# (host, rule) pairs whose first refusal was logged at INFO; later ones go to
# DEBUG. Bounded: a broad crawl meets traps on many hosts.
_LOGGED_MAX = 10_000


class TrapGuard:
    """``refusal(url)``: (rule, message) when url looks like a trap, else None.

    Each limit is a count; 0 switches its rule off."""

    __slots__ = ("max_run", "max_repeats", "max_segments", "max_params", "_logged")

    def __init__(self, max_run: int = 0, max_repeats: int = 0, max_segments: int = 0,
                 max_params: int = 0):
        self.max_run = max_run
        self.max_repeats = max_repeats
        self.max_segments = max_segments
        self.max_params = max_params
        self._logged: set[tuple[str, str]] = set()

    @classmethod
    def from_settings(cls, settings) -> TrapGuard:
        return cls(max_run=settings.getint("TRAPGUARD_MAX_SEGMENT_RUN"),
                   max_repeats=settings.getint("TRAPGUARD_MAX_SEGMENT_REPEATS"),
                   max_segments=settings.getint("TRAPGUARD_MAX_PATH_SEGMENTS"),
                   max_params=settings.getint("TRAPGUARD_MAX_QUERY_PARAMS"))

    def refusal(self, url: str) -> tuple[str, str] | None:
        try:
            _, _, path, search = split(url)
        except InvalidURL:
            return None  # not a trap: the frontier's own checks say what it is
        if self.max_params and search:
            params = sum(1 for p in search[1:].split("&") if p)
            if params > self.max_params:
                return "query_params", f"{params} query parameters (limit {self.max_params})"
        # "/a/b/" and "/a/b" have the same segments; empty ones ("//") count
        segments = path[1:].split("/")
        if segments and segments[-1] == "":
            segments.pop()
        if self.max_segments and len(segments) > self.max_segments:
            return "path_segments", \
                f"{len(segments)} path segments (limit {self.max_segments})"
        if self.max_run:
            run, last = 0, None
            for seg in segments:
                run = run + 1 if seg == last else 1
                last = seg
                if run > self.max_run and seg:
                    return "segment_run", f"path segment {seg[:40]!r} {run} times in a row " \
                                          f"(limit {self.max_run})"
        if self.max_repeats and len(segments) > self.max_repeats:
            seg, n = Counter(s for s in segments if s).most_common(1)[0] \
                if any(segments) else ("", 0)
            if n > self.max_repeats:
                return "segment_repeats", f"path segment {seg[:40]!r} {n} times " \
                                          f"(limit {self.max_repeats})"
        return None

    def log(self, host: str, rule: str, url: str, message: str) -> None:
        """Log a refusal: the first per host and rule at INFO, the rest at
        DEBUG (a trap makes thousands of them)."""
        key = (host, rule)
        if key not in self._logged and len(self._logged) < _LOGGED_MAX:
            self._logged.add(key)
            logger.info("Trap guard refused %s (%s): %s; further refusals of %s by this "
                        "rule are counted as trapguard/refused/%s", url[:200], rule, message,
                        host, rule)
        else:
            logger.debug("Trap guard refused %s (%s): %s", url[:200], rule, message)

    def __repr__(self) -> str:
        return (f"TrapGuard(run={self.max_run}, repeats={self.max_repeats}, "
                f"segments={self.max_segments}, params={self.max_params})")


class ResponseHeadLimit:
    """An extension: every response's status line and headers are cut at
    TRAPGUARD_MAX_HEAD_BYTES (internals.bound_response_heads): a server sending
    header lines without end must not fill the worker's memory for the
    DOWNLOAD_TIMEOUT, which DOWNLOAD_MAXSIZE (body bytes) does not prevent."""

    def __init__(self, limit: int):
        self.limit = limit
        internals.bound_response_heads(limit)

    @classmethod
    def from_crawler(cls, crawler):
        limit = crawler.settings.getint("TRAPGUARD_MAX_HEAD_BYTES")
        if limit <= 0:
            raise NotConfigured
        return cls(limit)
