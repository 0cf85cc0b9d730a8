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
date, a path or an id. crawlproj/traps/middleware.py acts on its verdict.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from redis.exceptions import NoScriptError

from crawlproj.redis.client import lua_script
from crawlproj.redis.keyspace import Keyspace

NEARHOST_LUA = lua_script("crawlproj.traps", "nearhost.lua")

# A simhash's features are the page's distinct words, `\w+` of its lower-cased
# text, found and hashed for the whole text at once in numpy rather than word
# by word in Python, which would take several times as long: the text as
# code points, a table saying which are word characters (str.isalnum() or
# "_", which is what `\w` matches), and each word's polynomial hash from
# prefix sums, modulo 2**64 (numpy's uint64 arithmetic wraps).
_P = 0x100000001B3                     # odd, so invertible modulo 2**64
_P_INV = pow(_P, -1, 1 << 64)
_BMP = 1 << 16


@lru_cache(maxsize=1)
def _word_chars() -> np.ndarray:
    """Which code points of the Basic Multilingual Plane are word characters."""
    return np.fromiter((chr(c).isalnum() or c == 0x5F for c in range(_BMP)),
                       dtype=bool, count=_BMP)


class _Powers:
    """P**i and P**-i modulo 2**64 for i < n, grown as texts grow."""

    def __init__(self):
        self.up = self.down = np.ones(0, dtype=np.uint64)

    def __call__(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.up) < n:
            m = max(n, 2 * len(self.up), 4096)
            with np.errstate(over="ignore"):
                self.up = np.cumprod(np.full(m, _P, dtype=np.uint64)) * np.uint64(_P_INV)
                self.down = np.cumprod(np.full(m, _P_INV, dtype=np.uint64)) * np.uint64(_P)
        return self.up[:n], self.down[:n]


_powers = _Powers()


def _mix(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: every bit of a word's hash depends on
    every character (a polynomial hash's low bits do not)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


def simhash(text: str) -> int | None:
    """The 64-bit simhash of text's distinct words (lower-cased), each word a
    feature of weight 1; None for text of no word.

    Words rather than shingles: the pages of a trap differ in a date, a path
    or an id, which change a few words but many shingles of a short page
    (docs/hardening.md has the measurement)."""
    cps = np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), dtype="<u4")
    n = len(cps)
    word = np.take(_word_chars(), cps, mode="clip")  # astral code points: below
    astral = np.flatnonzero(cps >= _BMP)
    if len(astral):  # emoji, rare scripts: few, looked up one by one
        word[astral] = [chr(c).isalnum() for c in cps[astral].tolist()]
    edges = np.diff(word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if not len(starts):
        return None
    up, down = _powers(n)
    with np.errstate(over="ignore"):
        # prefix[i] = sum of c_j P**-j for j < i; a word's hash is
        # sum of c_j P**(end-1-j) = (prefix[end] - prefix[start]) P**(end-1)
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(cps * down, out=prefix[1:])
        features = np.sort(_mix((prefix[ends] - prefix[starts]) * up[ends - 1]))
    # distinct words (np.unique took longer than the rest together)
    features = features[np.concatenate(([True], features[1:] != features[:-1]))]
    # a bit of the simhash is set when most features have it set
    votes = bit_counts(features) * 2 > len(features)
    return int.from_bytes(np.packbits(votes).tobytes(), "big")


# Features per block of bit_counts: 8 one-byte counters in a uint64 add up to
# 255 without a carry from one into the next.
_BLOCK = 255


def bit_counts(features: np.ndarray) -> np.ndarray:
    """For each of the 64 bits of the features (np.unpackbits' order), how
    many features have it set. The bits as 0/1 bytes, eight to a uint64, are
    summed as uint64s, a block of features at a time: eight bytes' sums in
    one addition (summing the byte matrix's columns took a quarter of the
    simhash)."""
    n = len(features)
    words = np.unpackbits(features.view(np.uint8)).view(np.uint64).reshape(n, 8)
    whole = n - n % _BLOCK
    counts = np.zeros(64, dtype=np.int64)
    if whole:
        sums = words[:whole].reshape(-1, _BLOCK, 8).sum(axis=1, dtype=np.uint64)
        counts += sums.view(np.uint8).reshape(-1, 64).sum(axis=0, dtype=np.int64)
    if n > whole:
        counts += words[whole:].sum(axis=0, dtype=np.uint64).view(np.uint8)
    return counts


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


class Verdict(NamedTuple):
    near: bool   # within k bits of one of the host's recent pages
    count: int   # near duplicates among the host's last `window` pages, this one included


# A link found on a near duplicate to its own host is a suspect: it is queued
# with this added to its score, behind every other URL of its host, and once
# the host is trapped (more than the budget of near duplicates in its window)
# the frontier drops its suspects instead of leasing them
# (traps/lua/sync_budgets.lua, SUSPECT). Request meta key (never stored: '_').
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
        self._digest = hashlib.sha1(NEARHOST_LUA.encode()).hexdigest()
        self._server_has_script = False

    def test(self, host: str, fingerprint: int) -> Verdict:
        return self.test_many([(host, fingerprint)])[0]

    def test_many(self, pages: list[tuple[str, int]]) -> list[Verdict]:
        """test() of each (host, fingerprint), in order, in one pipelined
        round trip of its own: the pages of one host go into its window one
        by one (a server that lost the script is sent its text again)."""
        for _ in range(2):
            pipe = self.redis.pipeline(transaction=False)
            for host, fingerprint in pages:
                self._ask(pipe, host, fingerprint)
            try:
                return self.answer([True] * len(pages), pipe.execute(raise_on_error=False))
            except NoScriptError:
                pass
        raise NoScriptError("the server does not keep the near-duplicate script")

    def queue(self, pipe, pages: list[tuple[str, str]]) -> list[bool]:
        """The tests of (host, text) pages queued on pipe, a part of the
        stores' round trip (crawlproj/stores/commit.py, in its writer thread,
        where the texts are hashed too): for each page whether it was asked
        (a text with no words is not)."""
        asked = []
        for host, text in pages:
            fingerprint = simhash(text)
            asked.append(fingerprint is not None)
            if fingerprint is not None:
                self._ask(pipe, host, fingerprint)
        return asked

    def _ask(self, pipe, host: str, fingerprint: int) -> None:
        p = self.keyspace.partition_of(host)
        keys = (self.keyspace.trap_hashes(p, host), self.keyspace.trapped(p), self.keyspace.due(p))
        args = (fingerprint >> 32, fingerprint & 0xFFFFFFFF, self.window, self.bits,
                self.budget, host)
        # raw commands: a cluster pipeline routes them by their first key;
        # EVAL until the server is known to hold the script, then EVALSHA
        if self._server_has_script:
            pipe.execute_command("EVALSHA", self._digest, 3, *keys, *args)
        else:
            pipe.execute_command("EVAL", NEARHOST_LUA, 3, *keys, *args)

    def answer(self, asked: list[bool], replies: list) -> list[Verdict | None]:
        """The verdicts of queue()'s pages (None: not asked), from their
        replies; raises the first error (a server that lost the script is
        sent its text from then on)."""
        out, replies = [], iter(replies)
        for was_asked in asked:
            if not was_asked:
                out.append(None)
                continue
            reply = next(replies)
            if isinstance(reply, NoScriptError):
                self._server_has_script = False
            if isinstance(reply, Exception):
                raise reply
            self._server_has_script = True
            out.append(Verdict(bool(reply[0]), int(reply[1])))
        return out
