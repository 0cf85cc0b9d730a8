"""Near-duplicate pages per host: calendars, soft 404s, session ids in paths.

Such a trap serves page after page of the same template under ever new URLs:
a calendar's months, a soft 404 that answers 200 under any path and echoes
it, a page whose links carry a new session id. No URL rule sees it; the pages
do. Each page's text gets a 64-bit simhash (Charikar 2002) of its distinct
words; two pages whose simhashes differ in at most k bits are near
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


def simhash(text: str) -> int | None:
    """The 64-bit simhash of text's distinct words (lower-cased), each word a
    feature of weight 1; None for text of no word.

    Words rather than shingles: the pages of a trap differ in a date, a path
    or an id, which change a few words but many shingles of a short page
    (docs/hardening.md has the measurement)."""
    words = set(_WORD.findall(text.lower()))
    if not words:
        return None
    features = np.fromiter((mmh3.hash64(w, signed=False)[0] for w in words),
                           dtype=np.uint64, count=len(words))
    bits = np.unpackbits(features.view(np.uint8)).reshape(-1, 64)
    # a bit of the simhash is set when most features have it set
    votes = bits.sum(axis=0, dtype=np.int64) * 2 > len(features)
    return int.from_bytes(np.packbits(votes).tobytes(), "big")


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


class Verdict(NamedTuple):
    near: bool   # within k bits of one of the host's recent pages
    count: int   # near duplicates among the host's last `window` pages, this one included


# A link found on a near duplicate to its own host is a suspect: it is queued
# with this added to its score, behind every other URL of its host, and once
# the host is trapped (more than the budget of near duplicates in its window)
# the frontier drops its suspects instead of leasing them
# (frontier/lua/sync.lua, SUSPECT). Request meta key (never stored: '_').
SUSPECT = 1e15
SUSPECT_META = "_trap_suspect"


class NearHosts:
    """The test against the host's recent pages, shared by the crawl's workers."""

    def __init__(self, redis, keyspace: Keyspace, window: int = 16, bits: int = 3,
                 budget: int = 5):
        self.redis = redis
        self.keyspace = keyspace
        self.window = window
        self.bits = bits
        self.budget = budget
        self._sha: str | None = None

    def test(self, host: str, fingerprint: int) -> Verdict:
        p = self.keyspace.partition_of(host)
        keys = (self.keyspace.trap_hashes(p, host), self.keyspace.trapped(p))
        args = (fingerprint >> 32, fingerprint & 0xFFFFFFFF, self.window, self.bits,
                self.budget, host)
        if self._sha is None:
            self._sha = self.redis.script_load(NEARHOST_LUA)
        try:
            near, count = self.redis.evalsha(self._sha, 2, *keys, *args)
        except NoScriptError:  # the server lost its scripts (a restart): load again
            self._sha = self.redis.script_load(NEARHOST_LUA)
            near, count = self.redis.evalsha(self._sha, 2, *keys, *args)
        return Verdict(bool(near), int(count))
