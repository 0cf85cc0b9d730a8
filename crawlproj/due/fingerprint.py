"""URL fingerprints: 64-bit MurmurHash3 of the canonical URL (Mercator §3.2).

Mercator kept 8-byte Rabin checksums of URLs instead of the URLs; we keep 8-byte
mmh3 hashes. With n URLs the chance of any collision is about n^2 / 2^65: one
in 370 at 100 million URLs, which a crawl tolerates (a collision skips one URL).
The seen set is bucketed by the high bits of the fingerprint, so each bucket is
a small Redis set of integers that Redis stores as a compact intset.
"""

from __future__ import annotations

import mmh3

from crawlproj.due.canonical import canonicalize


def fingerprint(canonical_url: str) -> int:
    """Signed 64-bit fingerprint (the form Redis intsets store)."""
    return mmh3.hash64(canonical_url.encode("utf-8"), signed=True)[0]


def bucket_of(fp: int, buckets: int) -> int:
    """The seen-set bucket: the fingerprint's high bits (buckets is a power of two)."""
    return ((fp & 0xFFFFFFFFFFFFFFFF) >> 40) % buckets


def url_fingerprint(url: str) -> int:
    return fingerprint(canonicalize(url))
