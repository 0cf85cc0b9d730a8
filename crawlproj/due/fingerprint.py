"""URL fingerprints: MurmurHash3 of the canonical URL (Mercator §3.2).

Mercator kept 8-byte Rabin checksums of URLs instead of the URLs; we keep 8-byte
mmh3 hashes (the first half of MurmurHash3 x64-128). With n URLs the chance of
any collision among them is about n^2 / 2^65: one in 370 at 100 million URLs,
about 3% at a billion; a collision costs one URL that is never fetched. With
DUE_FINGERPRINT_BITS = 128 the whole 128-bit hash is the fingerprint (no
collision in practice, at about twice the memory: docs/due.md).

Fingerprints are signed integers, the form Redis intsets store and the form
the frontier keys its queues by (frontier/lua/sync.lua).
"""

from __future__ import annotations

import mmh3

from crawlproj.due.canonical import canonicalize

BITS = (64, 128)


def fingerprint(canonical_url: str, bits: int = 64) -> int:
    """Signed 64-bit (or 128-bit) fingerprint of an already canonical URL."""
    data = canonical_url.encode("utf-8", "surrogatepass")
    if bits == 64:
        return mmh3.hash64(data, signed=True)[0]
    if bits == 128:
        return mmh3.hash128(data, signed=True)
    raise ValueError(f"fingerprint bits must be 64 or 128, not {bits!r}")


def url_fingerprint(url: str, bits: int = 64) -> int:
    """Fingerprint of url's canonical form (default parameter lists); raises
    crawlproj.due.canonical.InvalidURL for a URL that is not a valid http(s) URL."""
    return fingerprint(canonicalize(url), bits)
