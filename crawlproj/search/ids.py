"""64-bit ids of index keys and hosts: the index's fast fields and the
PageRank table key them, so that ranking reads no stored document."""

from __future__ import annotations

import mmh3


def id64(text: str) -> int:
    """Unsigned 64-bit id of a key or a host (MurmurHash3, as the DUE's fingerprints)."""
    return mmh3.hash64(text.encode(), signed=False)[0]


def signed64(u: int) -> int:
    """The same id as SQLite's signed INTEGER holds it."""
    return u - (1 << 64) if u >= 1 << 63 else u
