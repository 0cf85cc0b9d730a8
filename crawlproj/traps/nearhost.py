"""Near-duplicate pages per host: calendars, soft 404s, session ids in paths.

Such a trap serves page after page of the same template under ever new URLs:
a calendar's months, a soft 404 that answers 200 under any path and echoes
it, a page whose links carry a new session id. No URL rule sees it; the pages
do. Each page's text gets a 64-bit simhash (Charikar 2002) of its word
3-shingles; two pages whose simhashes differ in at most k bits are near
duplicates (Manku, Jain & Das Sarma 2007, "Detecting near-duplicates for web
crawling": k = 3 of 64 bits for 8 billion pages). A page is compared with the
last `window` pages of its own host only, so the test is one small Redis
call per page (lua/nearhost.lua) and its memory one short string per host.

The exact content-seen test (crawlproj/due/contentseen.py) already stops a
byte-identical page's links; this test catches the pages that differ in a
date, a path or an id. middlewares/trapguard.py acts on its verdict.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import mmh3
import numpy as np
from redis.exceptions import NoScriptError

from crawlproj.keyspace import Keyspace
from crawlproj.redisconn import lua_script

NEARHOST_LUA = lua_script("crawlproj.traps", "nearhost.lua")

_WORD = re.compile(r"\w+")
SHINGLE = 3  # words per shingle
# odd 64-bit multipliers (the golden ratio's and SplitMix64's) that combine
# the words of a shingle in order
_M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: every input bit moves about half the output bits."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def simhash(text: str) -> int | None:
    """The 64-bit simhash of text's distinct word 3-shingles (lower-cased);
    None for text of no word."""
    words = _WORD.findall(text.lower())
    if not words:
        return None
    hashes: dict[str, int] = {}
    h = np.fromiter((hashes.get(w) or hashes.setdefault(w, mmh3.hash64(w, signed=False)[0])
                     for w in words), dtype=np.uint64, count=len(words))
    with np.errstate(over="ignore"):
        if len(h) >= SHINGLE:
            h = h[:-2] * _M1 + h[1:-1] * _M2 + h[2:]
        features = np.unique(_mix(h))
    bits = np.unpackbits(features.view(np.uint8)).reshape(-1, 64)
    # a bit of the simhash is set when most features have it set
    votes = bits.sum(axis=0, dtype=np.int64) * 2 > len(features)
    return int.from_bytes(np.packbits(votes).tobytes(), "big")


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


class Verdict(NamedTuple):
    near: bool   # within k bits of one of the host's recent pages
    count: int   # near duplicates among the host's last `window` pages, this one included


class NearHosts:
    """The test against the host's recent pages, shared by the crawl's workers."""

    def __init__(self, redis, keyspace: Keyspace, window: int = 16, bits: int = 3):
        self.redis = redis
        self.keyspace = keyspace
        self.window = window
        self.bits = bits
        self._sha: str | None = None

    def test(self, host: str, fingerprint: int) -> Verdict:
        key = self.keyspace.trap_hashes(self.keyspace.partition_of(host), host)
        args = (fingerprint >> 32, fingerprint & 0xFFFFFFFF, self.window, self.bits)
        if self._sha is None:
            self._sha = self.redis.script_load(NEARHOST_LUA)
        try:
            near, count = self.redis.evalsha(self._sha, 1, key, *args)
        except NoScriptError:  # the server lost its scripts (a restart): load again
            self._sha = self.redis.script_load(NEARHOST_LUA)
            near, count = self.redis.evalsha(self._sha, 1, key, *args)
        return Verdict(bool(near), int(count))
