"""Breadth-first and random order (Cho et al. 1998 §3; Najork & Wiener 2001)."""

from __future__ import annotations

import random
import time


class Prioritizer:
    """Base class: score(request) -> float, lower = served sooner."""

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
    """Uniformly random order: Cho's baseline."""

    def __init__(self, seed=None):
        self._random = random.Random(seed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.get("FRONTIER_RANDOM_SEED"))

    def score(self, request) -> float:
        return self._random.random()
