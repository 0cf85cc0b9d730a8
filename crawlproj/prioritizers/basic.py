"""Breadth-first and random order (Cho et al. 1998 §3; Najork & Wiener 2001)."""

from __future__ import annotations

import random
import time


class Prioritizer:
    """Base class: score(request) -> float, lower = served sooner."""

    #: True: a further link to a URL still queued gives it that link's
    #: score when lower than its own (the URL's estimate is the best any of
    #: its links gives), instead of bump()
    BEST_LINK = False

    @classmethod
    def from_crawler(cls, crawler):
        return cls()

    def score(self, request) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def bump(self, request) -> float:
        """Change of the score of this URL when it is already queued and
        another link to it is found (0: none). A backlink count gains a link,
        OPIC cash flows in (Cho et al. §3 IB'; Abiteboul et al. 2003)."""
        return 0.0

    def first_score(self, request) -> float | None:
        """The score instead of score(request) when this URL is the first the
        crawl sees of its host (decided by the frontier, across all workers);
        None: no such rule."""
        return None


class BreadthFirst(Prioritizer):
    """Level by level, and within a level first discovered, first served.

    Cho's breadth-first crawler is a FIFO queue; with many workers and
    politeness, discovery order alone drifts across levels, so the link depth
    is the major key and the discovery time (server-independent, seconds) the
    minor one. depth x 1e10 + t keeps millisecond resolution in a double.
    """

    def score(self, request) -> float:
        return request.meta.get("depth", 0) * 1e10 + time.time()


class RandomOrder(Prioritizer):
    """Cho's random baseline: each time, a URL drawn uniformly from the queue.

    A random key drawn once per URL would not do that: URLs still queued are
    those whose keys lost every draw so far, so a new URL would be more likely
    to win. Keys here are the key of the page the link was found on (the last
    one served, for one worker) plus an exponential draw: exponentials forget
    how long they have waited, so every queued URL's lead over the last served
    key is again an independent Exp(1), and the next served is uniform.
    """

    def __init__(self, seed=None):
        self._random = random.Random(seed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.get("FRONTIER_RANDOM_SEED"))

    def score(self, request) -> float:
        ctx = request.meta.get("link_context")
        base = ctx[0] if ctx and ctx[0] is not None else request.meta.get("frontier_score")
        if base is not None and not ctx:
            return base  # a retry or redirect keeps its key
        return (base or 0.0) + self._random.expovariate(1.0)


class HostFirst(BreadthFirst):
    """The WebCrawler's indexing mode (Pinkerton 1994): the first URL of a host
    never seen before is fetched before every other URL, so that each server
    is represented early; everything else breadth-first."""

    AHEAD = 1e15  # more than any depth x 1e10 + time

    def first_score(self, request) -> float:
        return self.score(request) - self.AHEAD
