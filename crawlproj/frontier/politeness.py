"""The politeness rule: how long a host waits after a download, and why.

Mercator §3.1 and Najork & Wiener §3: after a download from a host ends, the
host is not contacted again for FRONTIER_DELAY_FACTOR times that download's
time (they used 10), here also at least FRONTIER_MIN_DELAY and the host's
robots.txt Crawl-delay, at most FRONTIER_MAX_DELAY. How the download ended
decides the rest in Redis (lua/sync.lua): a connection failure or a 429/503
counts towards blocking the host with backoff, shared by every worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from crawlproj.frontier.frontier import Host


@dataclass
class Download:
    """What the worker saw of one download (Scrapy's downloader signals)."""

    reached: float | None = None      # monotonic time it reached the downloader
    left: float | None = None         # and left it (response, error or timeout)
    status: int | None = None         # HTTP status of the raw response
    retry_after: float | None = None  # seconds, from a 429/503's Retry-After
    crawl_delay: float | None = None  # the host's robots.txt Crawl-delay

    @property
    def took(self) -> float:
        if self.reached is None or self.left is None:
            return 0.0
        return self.left - self.reached


class Politeness:
    def __init__(self, factor: float, min_delay: float, max_delay: float,
                 obey_crawl_delay: bool):
        self.factor = factor
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.obey_crawl_delay = obey_crawl_delay

    @classmethod
    def from_settings(cls, settings) -> Politeness:
        return cls(settings.getfloat("FRONTIER_DELAY_FACTOR"), settings.getfloat("FRONTIER_MIN_DELAY"),
                   settings.getfloat("FRONTIER_MAX_DELAY"), settings.getbool("FRONTIER_OBEY_CRAWL_DELAY"))

    def delay(self, download: Download) -> float:
        """Seconds before the host's next contact."""
        delay = max(self.min_delay, self.factor * download.took)
        if self.obey_crawl_delay and download.crawl_delay:
            delay = max(delay, download.crawl_delay)
        return min(delay, self.max_delay)

    @staticmethod
    def host_fate(download: Download) -> tuple[str, int]:
        """How the download leaves its host (frontier.Host), and the server's
        Retry-After in ms (-1: none)."""
        if download.status in (429, 503):
            wait = -1 if download.retry_after is None else int(download.retry_after * 1000)
            return Host.BUSY, wait
        if download.reached is None:
            return Host.FREE, -1        # dropped before the downloader: nothing fetched
        if download.status is None:
            return Host.FAIL, -1        # connection error, timeout, DNS failure
        return Host.OK, -1


def retry_after(value: bytes | None) -> float | None:
    """A Retry-After header's seconds (a number or an HTTP date), or None."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
