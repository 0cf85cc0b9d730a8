"""robots.txt rules shared by every worker of a crawl: Mercator's robots cache.

Mercator §3 keeps one cache of robots exclusion rules for the whole
crawler, so that a host's robots.txt is fetched once, not once per thread.
Here the cache has two levels: a bounded LRU of parsed rules (Protego) in
each worker, and one Redis key per origin in the crawl's keyspace
(``r:<origin>`` in the origin's host partition), which expires after
ROBOTS_EXPIRY (RFC 9309 §2.4: at most 24 hours). What is stored is small:
the robots.txt without comments, blank lines and sitemaps (none of which
changes an answer), zlib-compressed.

RFC 9309 §2.3.1 decides what a fetch means (:func:`verdict`): a 2xx is parsed
(its first ROBOTS_MAXSIZE bytes, §2.5), a 4xx allows everything, a 5xx,
a 429 or a network error disallows everything for a while (the host waits
ROBOTS_RETRY_WAIT, then robots.txt is fetched again); after
ROBOTS_RETRY_TIMES such failures in a row the origin is taken as
disallowing everything until its entry expires (§2.3.1.4: complete
disallow). The failures are counted in the same key, so whichever worker
holds the host next knows them. A fetch that failed because the host's name
did not resolve is no server's answer: it is counted apart, and after
DNS_RETRY_TIMES more the entry says the host does not resolve, until it
expires (crawlproj/dns.py).

No Scrapy here: crawlproj/robots/middleware.py fetches, this module keeps.
"""

from __future__ import annotations

import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass

from protego import Protego

from crawlproj.redis.keyspace import Keyspace
from crawlproj.urls import host_of, split

# RFC 9309 §2.4: crawlers SHOULD NOT use a cached robots.txt for more than 24 hours
MAX_EXPIRY = 24 * 3600
# RFC 9309 §2.3.1.2: follow at least five consecutive redirects
MAX_REDIRECTS = 5

# meta key of a robots.txt request: the page request on whose lease (and turn
# with the host) it is made (robots/middleware.py, crawlproj/frontier/scheduler.py)
ROBOTS_FOR = "crawlproj_robots_for"

# stored forms (first byte); U<n>: n failed lookups of the host's name, N:
# the name does not resolve
_ALLOW, _DISALLOW, _FAILED, _RULES = b"A", b"D", b"F", b"R"
_UNRESOLVED, _NO_HOST = b"U", b"N"


def origin_of(url: str) -> str:
    """The origin a robots.txt governs (RFC 9309 §2.3: scheme, host, port),
    named with the frontier's host key (crawlproj.urls.host_of), so that
    every spelling of one server is one entry; "" for a URL without a host."""
    host = host_of(url)
    if not host:
        return ""
    return f"{split(url)[0]}//{host}"


def robots_url(origin: str) -> str:
    return origin + "/robots.txt"


def _reduced(text: str) -> str:
    """The lines of a robots.txt that can change an answer: comments, blank
    lines and sitemaps (site-wide, outside every group) go."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.lower().startswith(("sitemap", "site-map")):
            out.append(line)
    return "\n".join(out)


@dataclass
class Rules:
    """One origin's robots exclusion rules for this crawler."""

    parser: Protego | None = None  # None: the verdict below, for every path
    allow_all: bool = True
    crawl_delay: float | None = None
    failures: int = 0             # failed fetches so far (not rules: fetch again)
    unresolved: int = 0           # failed lookups of the host's name so far (likewise)
    resolves: bool = True         # False: the host's name does not resolve

    @property
    def known(self) -> bool:
        return not self.failures and not self.unresolved

    def allowed(self, url: str, useragent: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(url, useragent)

    # -- stored form ---------------------------------------------------------

    @classmethod
    def parsed(cls, body: bytes, useragent: str) -> tuple[Rules, bytes]:
        """Rules from a 2xx body (already cut to the size limit), and the
        bytes to store for them."""
        text = _reduced(body.decode("utf-8", errors="ignore").lstrip("\ufeff"))
        if not text:
            return cls(), _ALLOW
        return cls.load(_RULES + zlib.compress(text.encode(), 9), useragent)

    @classmethod
    def load(cls, stored: bytes, useragent: str) -> tuple[Rules, bytes]:
        kind = stored[:1]
        if kind == _RULES:
            parser = Protego.parse(zlib.decompress(stored[1:]).decode())
            delay = parser.crawl_delay(useragent)
            return cls(parser, crawl_delay=float(delay) if delay else None), stored
        if kind == _FAILED:
            return cls(failures=int(stored[1:])), stored
        if kind == _UNRESOLVED:
            return cls(unresolved=int(stored[1:])), stored
        if kind == _NO_HOST:
            return cls(allow_all=False, resolves=False), stored
        return cls(allow_all=kind != _DISALLOW), stored


ALLOW_ALL = _ALLOW
DISALLOW_ALL = _DISALLOW
NO_HOST = _NO_HOST


def failed(failures: int) -> bytes:
    return _FAILED + str(failures).encode()


def unresolved(lookups: int) -> bytes:
    return _UNRESOLVED + str(lookups).encode()


def describe(stored: bytes) -> tuple[str, str]:
    """What a stored entry says, for the operator: ("rules", the robots.txt's
    lines that can change an answer), ("allow", ""), ("disallow", ""),
    ("failed", the failed fetches so far), ("unresolved", the failed lookups
    of the host's name so far) or ("no host", ""): its name does not resolve."""
    kind = stored[:1]
    if kind == _RULES:
        return "rules", zlib.decompress(stored[1:]).decode("utf-8", "replace")
    if kind == _FAILED:
        return "failed", stored[1:].decode("ascii", "replace")
    if kind == _UNRESOLVED:
        return "unresolved", stored[1:].decode("ascii", "replace")
    if kind == _NO_HOST:
        return "no host", ""
    return ("disallow" if kind == _DISALLOW else "allow"), ""


def verdict(status: int | None) -> str:
    """What a robots.txt fetch that ended so means (RFC 9309 §2.3.1):
    "parse", "allow" (4xx, or too many redirects), or "retry" (5xx, 429, no
    response). 3xx is followed by the fetcher before this is asked."""
    if status is None or status == 429 or status >= 500:
        return "retry"
    if 200 <= status < 300:
        return "parse"
    return "allow"


class RobotsCache:
    """Parsed rules per origin: a bounded LRU here, the crawl's keys in Redis.

    read() and write() only talk to Redis, so that the middleware runs them
    off the reactor thread; everything that touches the LRU (get_local,
    loaded, keep) runs on the reactor thread. Only known rules are kept
    locally: a failed fetch is remembered in Redis alone, so that the next
    lease of the host, on any worker, fetches robots.txt again."""

    def __init__(self, redis, keyspace: Keyspace, useragent: str, size: int = 10_000,
                 expiry: float = MAX_EXPIRY, clock=time.monotonic):
        self.redis = redis
        self.keyspace = keyspace
        self.useragent = useragent
        self.size = size
        self.expiry_ms = int(min(expiry, MAX_EXPIRY) * 1000)
        self.clock = clock
        self._local: OrderedDict[str, tuple[Rules, float]] = OrderedDict()

    def key(self, origin: str) -> str:
        host = origin.split("://", 1)[1]
        return self.keyspace.robots(self.keyspace.partition_of(host), origin)

    # -- this worker's LRU -----------------------------------------------------

    def get_local(self, origin: str) -> Rules | None:
        hit = self._local.get(origin)
        if hit is None:
            return None
        rules, until = hit
        if until <= self.clock():
            del self._local[origin]
            return None
        self._local.move_to_end(origin)
        return rules

    def keep(self, origin: str, rules: Rules, ttl_ms: int | None = None) -> None:
        """Keep known rules here for ttl_ms (the entry's expiry by default)."""
        if not rules.known or self.size <= 0:
            return
        ttl = self.expiry_ms if ttl_ms is None or ttl_ms <= 0 else min(ttl_ms, self.expiry_ms)
        self._local[origin] = (rules, self.clock() + ttl / 1000.0)
        self._local.move_to_end(origin)
        while len(self._local) > self.size:
            self._local.popitem(last=False)

    def loaded(self, origin: str, stored: bytes | None, ttl_ms: int = -1) -> Rules | None:
        """The rules of an entry read(), kept here when known."""
        if stored is None:
            return None
        rules, _ = Rules.load(stored, self.useragent)
        self.keep(origin, rules, ttl_ms)
        return rules

    # -- the crawl's keys --------------------------------------------------------

    def read(self, origin: str) -> tuple[bytes | None, int]:
        """The origin's stored entry and its time to live (ms), from Redis."""
        pipe = self.redis.pipeline(transaction=False)
        key = self.key(origin)
        pipe.get(key)
        pipe.pttl(key)
        stored, ttl = pipe.execute()
        return stored, ttl

    def write(self, origin: str, stored: bytes) -> None:
        """Store an origin's entry (Rules.parsed()[1], ALLOW_ALL, DISALLOW_ALL
        or failed(n)) for every worker, expiring."""
        self.redis.set(self.key(origin), stored, px=self.expiry_ms)

    # -- both, on one thread ---------------------------------------------------

    def get_shared(self, origin: str) -> Rules | None:
        return self.loaded(origin, *self.read(origin))

    def put(self, origin: str, stored: bytes, rules: Rules | None = None) -> None:
        self.write(origin, stored)
        self.keep(origin, rules or Rules.load(stored, self.useragent)[0])

    def __len__(self) -> int:
        return len(self._local)
