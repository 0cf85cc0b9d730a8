"""Which URLs may enter the frontier at all.

Mercator §3 (step 6) runs every extracted URL through a URL filter before the DUE. Here
the frontier refuses what no worker could ever fetch, with a reason that goes
to the log and to the stats (frontier/refused/<reason>), and the crawl goes on.
"""

from __future__ import annotations

import math

from crawlproj.frontier import codec
from crawlproj.urls import host_of, refusal


class RecentURLs:
    """A worker's cache of the URLs it sent to the frontier lately: Mercator's
    "cache of popular URLs" in front of the DUE (§3.2, 2^16 entries there).
    Most links of a page were sent before (about 9 in 10), mostly by this same
    worker; middlewares/recentlinks.py drops a link to one of them before
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
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def admit(frontier, prioritizer, request, spider, max_length: int):
    """(partition, enqueue entry) for request, or raise Refused."""
    bad = refusal(request.url, max_length)
    if bad is not None:
        raise Refused(*bad)
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
    first = prioritizer.first_score(request) if hasattr(prioritizer, "first_score") else None
    entry = frontier.entry(host, request.url, score, codec.encode(request, spider, host),
                           force=request.dont_filter, fp=fp, bump=bump,
                           first=first if first is None or math.isfinite(first) else None)
    return frontier.partition_of(host), entry
