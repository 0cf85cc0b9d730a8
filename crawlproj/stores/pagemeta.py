"""Page metadata: the fetch history of every URL, kept in Redis.

Per URL fingerprint (the DUE's 64-bit mmh3 of the canonical URL, Mercator
§3.2): first and last fetch time, last status, content type and length, the
content digest (8 bytes of the body's SHA-1, the WARC payload digest), how
many fetches, and at how many of them the content had changed. This is the
input of the recrawl model [WebFountain §4-5], which also keeps the page's
change-rate class in one byte of it (``rate_bucket``, kept by this store),
and, for a page whose latest 2xx body names another URL as its canonical one
(``<link rel="canonical">`` or a Link header, RFC 6596; crawlproj/robots/meta.py),
that URL (``canonical``), written once the page is parsed.

Layout: hashes Keyspace.pagemeta(p, b) (crawlproj.redis.keyspace), p the partition
of the URL's host (so the metadata of a host lives with its back queue on one
Redis Cluster node), b the fingerprint's high bits; field = the 8-byte
fingerprint, value = a msgpack array of 9 numbers and short strings (about
40 bytes). Small hashes stay listpack-encoded (hash-max-listpack-entries),
which is what keeps this near 60 bytes per URL.

Writes: a batch of fetches is one EVALSHA of lua/pagemeta.lua per partition
touched, all in one pipeline (one round trip per batch, see crawlproj/redis/groupcommit.py).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import msgpack
from redis.exceptions import NoScriptError

from crawlproj.redis.client import lua_script
from crawlproj.stores.exchange import Exchange
from crawlproj.stores.linkstore import node_id as url_fingerprint
from crawlproj.urls import host_of

PAGEMETA_LUA = lua_script("crawlproj.stores", "pagemeta.lua")
FIELDS = ("first_fetch", "last_fetch", "status", "content_type", "length", "digest",
          "fetches", "changes", "rate_bucket", "canonical")


def bucket_of(fp: int, buckets: int) -> int:
    """The metadata hash a fingerprint lives in: its high bits (as the DUE
    buckets its seen set), so buckets fill evenly."""
    return ((fp & 0xFFFFFFFFFFFFFFFF) >> 40) % buckets


def fp_bytes(fp: int) -> bytes:
    return struct.pack(">q", fp)


@dataclass
class PageMeta:
    fingerprint: int
    first_fetch: float      # epoch seconds
    last_fetch: float
    status: int
    content_type: str
    length: int
    digest: str             # 16 hex digits ('' when no 2xx body yet)
    fetches: int
    changes: int
    rate_bucket: int
    canonical: str = ""     # the other URL the page names as canonical ('' for none)

    @classmethod
    def decode(cls, fp: int, value: bytes) -> PageMeta:
        f = msgpack.unpackb(value, raw=True)
        return cls(fp, f[0] / 1000.0, f[1] / 1000.0, int(f[2]), f[3].decode("latin-1"),
                   int(f[4]), f[5].hex(), int(f[6]), int(f[7]), int(f[8]),
                   f[9].decode("utf-8", "replace") if len(f) > 9 else "")


class PageMetaStore:
    def __init__(self, redis, keyspace, buckets: int = 4096):
        """keyspace: the crawl's crawlproj.redis.keyspace.Keyspace."""
        self.redis = redis
        self.keyspace = keyspace
        self.buckets = buckets
        # EVAL (the script's text) until the server has the script, then
        # EVALSHA: a NOSCRIPT reply would fail the whole group commit's write
        self._sha = hashlib.sha1(PAGEMETA_LUA.encode()).hexdigest()
        self._server_has_script = False

    def key(self, url: str) -> tuple[str, int]:
        """(hash key, fingerprint) of a URL's metadata."""
        fp = url_fingerprint(url)
        p = self.keyspace.partition_of(host_of(url))
        return self.keyspace.pagemeta(p, bucket_of(fp, self.buckets)), fp

    def entry(self, ex: Exchange) -> tuple[int, list]:
        """(partition, script args) of one fetch."""
        fp = url_fingerprint(ex.url)
        p = self.keyspace.partition_of(host_of(ex.url))
        content = 200 <= ex.status < 300
        return p, [fp_bytes(fp), bucket_of(fp, self.buckets), int(ex.started * 1000), ex.status,
                   ex.content_type, len(ex.body), ex.digest64 if content else b"",
                   "1" if content else "0"]

    def canonical_entry(self, url: str, fetch_time: float, canonical: str) -> tuple[int, list] | None:
        """(partition, script args) recording the canonical URL a page fetched
        from url names; None when it names itself (the same canonical form)."""
        fp = url_fingerprint(url)
        if url_fingerprint(canonical) == fp:
            return None
        p = self.keyspace.partition_of(host_of(url))
        return p, [fp_bytes(fp), bucket_of(fp, self.buckets), int(fetch_time * 1000), "", "", "",
                   canonical, "c"]

    def write(self, entries: list[tuple[int, list]]) -> int:
        """Apply fetches, one script call per partition in one pipeline; returns
        how many URLs were new. Raises redis errors (the caller retries) but
        for a server without the script, given it once."""
        for _ in range(2):
            pipe = self.redis.pipeline(transaction=False)
            calls = self.queue(pipe, entries)
            try:
                return self.created(calls, pipe.execute(raise_on_error=False))
            except NoScriptError:
                pass
        raise NoScriptError("the server does not keep page metadata's script")

    def queue(self, pipe, entries: list[tuple[int, list]]) -> list[tuple[int, list]]:
        """write's script calls added to pipe (a StoreCommit's round trip,
        shared with the other stores); (partition, arguments) of each."""
        per: dict[int, list] = {}
        for p, args in entries:
            per.setdefault(p, []).append(args)
        calls = []
        for p, fetches in per.items():
            flat = [len(fetches)]
            for args in fetches:
                flat.extend(args)
            # a raw EVALSHA: a cluster pipeline routes it by its key
            if self._server_has_script:
                pipe.execute_command("EVALSHA", self._sha, 1, self.keyspace.prefix(p), *flat)
            else:
                pipe.execute_command("EVAL", PAGEMETA_LUA, 1, self.keyspace.prefix(p), *flat)
            calls.append((p, flat))
        return calls

    def created(self, calls: list[tuple[int, list]], replies: list) -> int:
        """From the replies to queue's calls: how many URLs were new. A call
        the server had no script for (restarted, flushed) raises, and is made
        again with the script's text by the write's retry; raises any other
        error."""
        created = 0
        for reply in replies:
            if isinstance(reply, NoScriptError):
                self._server_has_script = False
                raise reply
            if isinstance(reply, Exception):
                raise reply
            created += int(reply)
        if replies:
            self._server_has_script = True
        return created

    def get(self, url: str) -> PageMeta | None:
        key, fp = self.key(url)
        value = self.redis.hget(key, fp_bytes(fp))
        return PageMeta.decode(fp, value) if value is not None else None

    def scan(self):
        """Every PageMeta of the crawl (for exports and the recrawl planner)."""
        for p in range(self.keyspace.partitions):
            for key in self.redis.scan_iter(match=self.keyspace.pagemeta_pattern(p), count=1000):
                for field, value in self.redis.hscan_iter(key, count=1000):
                    yield PageMeta.decode(struct.unpack(">q", field)[0], value)
