"""WebFountain's one-byte change-rate bucket [Edwards et al. §4].

"each time a page is crawled, we record whether that page has changed since
it was last crawled, and use this information to put the page into one of (at
most 256) change-frequency buckets, recorded as one byte of the page's
metadata." Rates seen on the web range from every few minutes to once a year
or less (§4), so the buckets are geometric: bucket k (1..255) holds the rates
within a factor STEP of RATE_MIN * STEP**(k-1), from once a year (bucket 1) to
once a minute (bucket 255), 5.3% apart. Bucket 0 is "no estimate yet" (a page
fetched fewer than twice). That leaves 255 rate buckets, the paper's B = 255.

Rates are in changes per second everywhere in crawlproj.recrawl.
"""

from __future__ import annotations

import math

import numpy as np

UNKNOWN = 0
FIRST = 1
LAST = 255
COUNT = LAST - FIRST + 1            # 255 rate buckets [Edwards et al. §5: B = 255]
DAY = 86400.0
YEAR = 365.0 * DAY
RATE_MIN = 1.0 / YEAR               # once a year (and slower) -> bucket 1
RATE_MAX = 1.0 / 60.0               # once a minute (and faster) -> bucket 255
STEP = (RATE_MAX / RATE_MIN) ** (1.0 / (COUNT - 1))
_LOG_MIN = math.log(RATE_MIN)
_LOG_STEP = math.log(STEP)


def bucket_of(rate: float) -> int:
    """The bucket of a rate (changes per second): the nearest on the log scale,
    clamped to 1..255. A rate of 0 (never seen to change) is bucket 1."""
    if not rate > 0.0:          # 0, negative or NaN
        return FIRST
    k = FIRST + round((math.log(rate) - _LOG_MIN) / _LOG_STEP)
    return min(LAST, max(FIRST, k))


def buckets_of(rates) -> np.ndarray:
    """bucket_of over an array."""
    r = np.asarray(rates, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = FIRST + np.rint((np.log(np.where(r > 0, r, RATE_MIN)) - _LOG_MIN) / _LOG_STEP)
    return np.clip(k, FIRST, LAST).astype(np.uint8)


def rate_of(bucket: int) -> float:
    """The representative rate of a bucket (its geometric centre); ValueError
    for bucket 0, which has no rate."""
    if not FIRST <= bucket <= LAST:
        raise ValueError(f"change-rate bucket {bucket} is not in {FIRST}..{LAST}")
    return RATE_MIN * STEP ** (bucket - FIRST)


def rates() -> np.ndarray:
    """The representative rates of buckets 1..255, index 0 = bucket 1."""
    return RATE_MIN * STEP ** np.arange(COUNT)
