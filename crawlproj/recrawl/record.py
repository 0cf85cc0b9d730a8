"""A page's recrawl record and what a fetch shows of it: the part of
continuous crawling that the downloader middleware (middlewares/recrawl.py)
and the frontier (crawlproj/frontier/recrawl.py) share.

The record travels in a scheduled page's payload (request meta "rc"):
    [state (crawlproj.recrawl.state, 36 bytes), ETag, Last-Modified (Unix
     seconds, 0 = none), content digest (8 bytes of the body's SHA-1)]

No Scrapy: a response is read through its headers, status and body.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from email.utils import formatdate

# request meta: the recrawl record of a scheduled page, as stored ("rc") and
# as trusted on a recrawl lease ("_rc", never stored); the fetch's outcome
STORED, HELD, OBSERVED = "rc", "_rc", "_recrawl_obs"
# An ETag longer than this is not kept (nor sent): its bytes would cost more
# in Redis than the page saves.
MAX_ETAG = 128


@dataclass(frozen=True)
class Fetch:
    """What middlewares/recrawl.py saw of a page's response."""
    status: int
    etag: str
    last_modified: str | None
    date: str | None
    digest: bytes
    at: float          # wall-clock seconds


def observe(response) -> Fetch:
    h = response.headers
    etag = (h.get(b"ETag") or b"").decode("latin-1")
    lm = h.get(b"Last-Modified")
    date = h.get(b"Date")
    return Fetch(response.status, etag if len(etag) <= MAX_ETAG else "",
                 lm.decode("latin-1") if lm else None, date.decode("latin-1") if date else None,
                 hashlib.sha1(response.body).digest()[:8], time.time())


def conditional_headers(record) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from a page's recrawl record."""
    out = {}
    if record[1]:
        out["If-None-Match"] = record[1]
    if record[2]:
        out["If-Modified-Since"] = formatdate(record[2], usegmt=True)
    return out
