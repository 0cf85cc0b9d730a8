"""robots.txt and what else sites say to crawlers: Mercator's robots cache.

Mercator §3 fetches a host's robots.txt before any of its pages and keeps the
rules in one LRU cache keyed by host, so that robots.txt is not fetched again
for each request. Here:

    cache.py       the rules shared by every worker of a crawl: a worker's LRU
                   over one Redis key per origin, and what a fetch means (RFC
                   9309); no Scrapy (RobotsCache, Rules, verdict)
    middleware.py  RobotsMiddleware, the downloader middleware that checks each
                   request and fetches robots.txt under the host's lease
                   (middlewares/robots.py is its entry point in the settings)
    meta.py        what a fetched page says itself: robots meta tags,
                   X-Robots-Tag, rel=nofollow, canonical URLs

The cache's names are this package's API.
"""

from crawlproj.robots.cache import (
    ALLOW_ALL,
    DISALLOW_ALL,
    MAX_EXPIRY,
    MAX_REDIRECTS,
    NO_HOST,
    ROBOTS_FOR,
    RobotsCache,
    Rules,
    describe,
    failed,
    origin_of,
    robots_url,
    unresolved,
    verdict,
)

__all__ = ["ALLOW_ALL", "DISALLOW_ALL", "MAX_EXPIRY", "MAX_REDIRECTS", "NO_HOST", "ROBOTS_FOR",
           "RobotsCache", "Rules", "describe", "failed", "origin_of", "robots_url",
           "unresolved", "verdict"]
