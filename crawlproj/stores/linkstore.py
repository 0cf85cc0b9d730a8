"""The link store: every parsed page's out-links, from all workers.

The crawl's link graph is what the ranker computes importance on [Cho §2:
backlink count IB', PageRank IR'; WebCrawler §3 keeps it in its own
database]. Node ids are URL fingerprints, the DUE's 64-bit mmh3 of the
canonical URL (crawlproj.due.fingerprint), so the ranker's scores map
straight onto queued URLs (Frontier.rescore).

Working set, in Redis (where every worker and the ranker reach it), in the
partition of the page's host (crawlproj.redis.keyspace): Keyspace.links, a LIST
of one element per parsed page; Keyspace.link_segments, a LIST of segment
descriptors (msgpack); Keyspace.links_lock, the compaction lock (SET NX PX).
A page element is msgpack ``[src_fp, fetch_ms, dst_fps, text]``, and a
fifth element, the original's fingerprint, for a page the content-seen test
found to be a copy of another (Mercator §3 step 4; its links are not
extracted, so it has none), and a sixth (the fifth then nil if need be), the
nofollow marks, for a page with links the crawler did not follow because
they, or the page, said nofollow (crawlproj/robots/meta.py): a bitmap, bit i
of byte i // 8 (least significant first) set for link i. dst_fps
the targets' fingerprints packed as little-endian int64 (8 bytes an edge,
read by the ranker without decompressing anything), text the
zlib-compressed msgpack ``[src_url, [dst_url, ...], [anchor, ...]]``
(URLs of one page share most of their bytes, so they compress well; ISA-L
at level 1 writes it, far cheaper than zlib's default level for a few more
bytes, and zlib reads it: docs/benchmarks.md, "What each setting is measured
to give"). A batch
of pages is one RPUSH per partition, in the pipeline of the other stores'
writes (crawlproj/stores/commit.py): one round trip per batch for them all.

Segments, on disk: when a partition's list passes LINKSTORE_SEGMENT_PAGES
pages, the worker whose RPUSH saw it takes the lock, reads the oldest pages,
writes them as a Parquet segment (``links/<crawl>/p<p>-<seq>.edges.parquet``
and ``.urls.parquet`` under CRAWL_DATA_DIR), and then trims them from the
list and registers the segment in one script call (lua/linkcommit.lua). A
crash before the commit leaves the pages in Redis and an orphan file that
the next compaction of that partition overwrites (same sequence number).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import mmh3
import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from isal import isal_zlib

from crawlproj.due.fingerprint import url_fingerprint
from crawlproj.redis.client import lua_script
from crawlproj.stores.common import data_dir, private_dir, safe_name
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)

COMMIT_LUA = lua_script("crawlproj.stores", "linkcommit.lua")

EDGE_SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("anchor", pa.string()),
                         ("fetch_ms", pa.int64()), ("nofollow", pa.bool_())])
URL_SCHEMA = pa.schema([("id", pa.int64()), ("url", pa.string())])

# ISA-L's compression level of a page's text (0-3): the lowest, since it is
# compressed on the reactor thread for every page.
TEXT_LEVEL = 1


# A page's links name the same popular targets again and again (Mercator
# §3.2's "cache of popular URLs", 2^16 entries there): a target's id is
# remembered, not its canonical form computed anew for every link to it.
@lru_cache(maxsize=1 << 16)
def node_id(url: str) -> int:
    """A URL's node id: the DUE's fingerprint of its canonical form, the key
    the frontier, the ranker and page metadata share. A URL the canonicaliser
    refuses (not http(s), malformed) gets the hash of its text instead, so a
    page's odd links still appear in the graph."""
    try:
        return url_fingerprint(url)
    except Exception:
        return mmh3.hash64(url.encode("utf-8", "surrogatepass"), signed=True)[0]


@dataclass
class Page:
    src: int
    fetch_ms: int
    dsts: array          # int64 fingerprints, one per link, in page order
    src_url: str
    urls: list[str]
    anchors: list[str]
    duplicate_of: int | None = None   # the node whose content this page repeats
    marks: bytes = b""                # nofollow bitmap (see the module's docstring)

    def nofollow(self) -> np.ndarray:
        """One bool per link: True where the crawler did not follow it for nofollow."""
        if not self.marks:
            return np.zeros(len(self.dsts), bool)
        bits = np.unpackbits(np.frombuffer(self.marks, np.uint8), bitorder="little")
        return bits[:len(self.dsts)].astype(bool)


def nofollow_marks(links: list[dict]) -> bytes:
    """The nofollow bitmap of a page's links (b"" when none is marked)."""
    marked = [i for i, link in enumerate(links) if link.get("nofollow")]
    if not marked:
        return b""
    bits = bytearray((len(links) + 7) // 8)
    for i in marked:
        bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits)


def encode_page(src_url: str, fetch_time: float, links: list[dict],
                duplicate_of: str | None = None) -> tuple[bytes, int]:
    """(list element, number of edges) for one parsed page; duplicate_of: the
    URL the content-seen test found this page's content under first; a link
    with "nofollow": True is marked."""
    urls = [link["url"] for link in links]
    anchors = [link.get("anchor") or "" for link in links]
    marks = nofollow_marks(links)
    dsts = array("q", (node_id(u) for u in urls))
    if dsts.itemsize != 8:  # pragma: no cover - every CPython platform has 8-byte q
        raise RuntimeError("int64 array expected")
    if os.sys.byteorder != "little":  # pragma: no cover
        dsts.byteswap()
    text = isal_zlib.compress(msgpack.packb([src_url, urls, anchors]), TEXT_LEVEL)
    fields = [node_id(src_url), int(fetch_time * 1000), dsts.tobytes(), text]
    if duplicate_of or marks:
        fields.append(node_id(duplicate_of) if duplicate_of else None)
    if marks:
        fields.append(marks)
    return msgpack.packb(fields, use_bin_type=True), len(urls)


def decode_page(value: bytes, with_text: bool = True) -> Page:
    src, fetch_ms, raw, text, *rest = msgpack.unpackb(value, raw=False)
    dsts = array("q")
    dsts.frombytes(raw)
    if os.sys.byteorder != "little":  # pragma: no cover
        dsts.byteswap()
    if with_text:
        src_url, urls, anchors = msgpack.unpackb(zlib.decompress(text), raw=False)
    else:
        src_url, urls, anchors = "", [], []
    return Page(src, fetch_ms, dsts, src_url, urls, anchors, rest[0] if rest else None,
                rest[1] if len(rest) > 1 else b"")


def pages_to_tables(pages: list[Page]) -> tuple[pa.Table, pa.Table]:
    """(edges, urls) Arrow tables of decoded pages."""
    src, dst, anchor, fetch = [], [], [], []
    nofollow = [np.zeros(0, bool)]
    url_ids: dict[int, str] = {}
    for page in pages:
        url_ids.setdefault(page.src, page.src_url)
        n = len(page.dsts)
        src.extend([page.src] * n)
        dst.extend(page.dsts)
        anchor.extend(page.anchors)
        fetch.extend([page.fetch_ms] * n)
        nofollow.append(page.nofollow())
        for fp, url in zip(page.dsts, page.urls):
            url_ids.setdefault(fp, url)
    edges = pa.table([pa.array(src, pa.int64()), pa.array(dst, pa.int64()),
                      pa.array(anchor, pa.string()), pa.array(fetch, pa.int64()),
                      pa.array(np.concatenate(nofollow), pa.bool_())],
                     schema=EDGE_SCHEMA)
    urls = pa.table([pa.array(list(url_ids), pa.int64()), pa.array(list(url_ids.values()), pa.string())],
                    schema=URL_SCHEMA)
    return edges, urls


# Pages read, decoded and written at a time by a compaction.
COMPACT_CHUNK = 2000

PAGE_SCHEMA = pa.schema([("src", pa.int64()), ("fetch_ms", pa.int64()),
                         ("duplicate_of", pa.int64())])


def pages_table(pages: list[Page]) -> pa.Table:
    """(src, fetch_ms, duplicate_of) of every page, links or not: the crawled
    nodes, and for a copy the node it repeats (null otherwise)."""
    return pa.table([pa.array([p.src for p in pages], pa.int64()),
                     pa.array([p.fetch_ms for p in pages], pa.int64()),
                     pa.array([p.duplicate_of for p in pages], pa.int64())], schema=PAGE_SCHEMA)


class LinkStore:
    def __init__(self, redis, keyspace, directory: Path, segment_pages: int = 20000,
                 lock_ttl: float = 300.0):
        """keyspace: the crawl's crawlproj.redis.keyspace.Keyspace;
        directory: where segments go (CRAWL_DATA_DIR/links/<crawl>)."""
        self.redis = redis
        self.keyspace = keyspace
        self.directory = Path(directory)
        self.segment_pages = segment_pages
        self.lock_ttl_ms = int(lock_ttl * 1000)
        self._sha = None

    @classmethod
    def directory_of(cls, settings, crawl_id: str) -> Path:
        """LINKSTORE_DIR; unset, CRAWL_DATA_DIR/links/<crawl id>."""
        return Path(settings.get("LINKSTORE_DIR") or data_dir(settings) / "links"
                    / safe_name(crawl_id))

    def partition_of(self, url: str) -> int:
        return self.keyspace.partition_of(host_of(url))

    # -- writing ---------------------------------------------------------------

    def append(self, entries: list[tuple[int, bytes]]) -> list[int]:
        """RPUSH encoded pages, one command per partition in one pipeline;
        returns the partitions whose working set is due for compaction."""
        pipe = self.redis.pipeline(transaction=False)
        parts = self.queue(pipe, entries)
        return self.due(parts, pipe.execute(raise_on_error=False))

    def queue(self, pipe, entries: list[tuple[int, bytes]]) -> list[int]:
        """append's commands added to pipe (a StoreCommit's round trip, shared
        with the other stores); the partitions, one per command."""
        per: dict[int, list[bytes]] = {}
        for p, value in entries:
            per.setdefault(p, []).append(value)
        for p, values in per.items():
            pipe.rpush(self.keyspace.links(p), *values)
        return list(per)

    def due(self, parts: list[int], replies: list) -> list[int]:
        """From the replies to queue's commands: the partitions due for
        compaction. Raises the first error a command got."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return [p for p, n in zip(parts, replies) if int(n) >= self.segment_pages]

    def compact(self, p: int, force: bool = False) -> int:
        """Move the oldest segment_pages pages of partition p to a Parquet
        segment; returns how many pages moved (0 if another worker holds the
        lock, or fewer than segment_pages are there and not force). Raises
        OSError if the segment cannot be written (nothing is trimmed then)
        and redis errors."""
        ks = self.keyspace
        token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        if not self.redis.set(ks.links_lock(p), token, nx=True, px=self.lock_ttl_ms):
            return 0
        try:
            n = min(int(self.redis.llen(ks.links(p))), self.segment_pages)
            if not n or (n < self.segment_pages and not force):
                return 0
            seq = int(self.redis.llen(ks.link_segments(p)))
            base = self.directory / f"p{p}-{seq:06d}"
            private_dir(self.directory)
            moved, edge_rows = self._write_segment(p, n, base)
            files = {kind: str(base.with_name(f"{base.name}.{kind}.parquet"))
                     for kind in ("edges", "urls", "pages")}
            desc = msgpack.packb({"seq": seq, "pages": moved, "edges": edge_rows,
                                  "files": files, "host": socket.gethostname(),
                                  "created": time.time()})
            if self._sha is None:
                self._sha = self.redis.script_load(COMMIT_LUA)
            if not self.redis.evalsha(self._sha, 1, ks.prefix(p), token, moved, desc):
                logger.warning("Link store: compaction lock of partition %d expired; "
                               "segment %s discarded", p, base.name)
                return 0
            logger.info("Link store: %d pages (%d edges) of partition %d moved to %s",
                        moved, edge_rows, p, base.name)
            return moved
        finally:
            # release only our own lock (a no-op after a commit)
            self.redis.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then "
                            "return redis.call('DEL', KEYS[1]) end return 0",
                            1, ks.links_lock(p), token)

    def _write_segment(self, p: int, n: int, base: Path) -> tuple[int, int]:
        """The first n pages of partition p into the segment's three Parquet
        files, COMPACT_CHUNK pages at a time (one row group each); returns
        (pages, edges) written. In chunks, the process that compacts peaks
        at about a third less than with the segment decoded at once
        (docs/benchmarks.md). The lock keeps the list's head still. A write
        that fails leaves no temporary file behind."""
        ks = self.keyspace
        paths = {kind: base.with_name(f"{base.name}.{kind}.parquet")
                 for kind in ("edges", "urls", "pages")}
        tmps = {kind: path.with_name(path.name + ".tmp") for kind, path in paths.items()}
        schemas = {"edges": EDGE_SCHEMA, "urls": URL_SCHEMA, "pages": PAGE_SCHEMA}
        writers = {}
        seen: set[int] = set()   # the segment's URLs, each written once
        moved = edge_rows = 0
        try:
            for kind in paths:
                writers[kind] = pq.ParquetWriter(tmps[kind], schemas[kind], compression="zstd")
            for start in range(0, n, COMPACT_CHUNK):
                values = self.redis.lrange(ks.links(p), start, min(n, start + COMPACT_CHUNK) - 1)
                pages = [decode_page(v) for v in values]
                edges, urls = pages_to_tables(pages)
                fresh = pc.invert(pc.is_in(urls["id"], pa.array(list(seen), pa.int64())))
                urls = urls.filter(fresh)
                seen.update(urls["id"].to_pylist())
                writers["edges"].write_table(edges)
                writers["urls"].write_table(urls)
                writers["pages"].write_table(pages_table(pages))
                moved += len(pages)
                edge_rows += edges.num_rows
            for w in writers.values():
                w.close()
            for tmp in tmps.values():
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
        except BaseException:
            for w in writers.values():
                try:
                    w.close()  # a no-op when closed
                except Exception:  # the disk that failed a write fails the footer
                    pass
            for tmp in tmps.values():
                tmp.unlink(missing_ok=True)
            raise
        for kind, tmp in tmps.items():
            os.replace(tmp, paths[kind])
        return moved, edge_rows

    # -- reading ---------------------------------------------------------------

    def segments(self, p: int) -> list[dict]:
        return [msgpack.unpackb(v, raw=False)
                for v in self.redis.lrange(self.keyspace.link_segments(p), 0, -1)]

    def working_set(self, p: int, with_text: bool = True, chunk: int = 5000) -> Iterator[Page]:
        """Pages of partition p still in Redis, oldest first."""
        start = 0
        while True:
            values = self.redis.lrange(self.keyspace.links(p), start, start + chunk - 1)
            for v in values:
                yield decode_page(v, with_text)
            if len(values) < chunk:
                return
            start += chunk

    def remove_segment_files(self) -> tuple[int, int]:
        """Delete the files of the crawl's segments written on this machine
        (before its keys go: `scrapy crawls delete`); returns (files removed,
        segments written on other machines, whose files stay there)."""
        removed = elsewhere = 0
        here = socket.gethostname()
        for p in range(self.keyspace.partitions):
            for seg in self.segments(p):
                if seg.get("host") != here:
                    elsewhere += 1
                    continue
                for f in seg["files"].values():
                    try:
                        os.unlink(f)
                        removed += 1
                    except FileNotFoundError:
                        pass
        return removed, elsewhere

    def stats(self) -> dict:
        """Pages, edges and bytes in Redis and on disk (for benchmarks)."""
        out = {"redis_pages": 0, "redis_edges": 0, "redis_bytes": 0,
               "segment_pages": 0, "segment_edges": 0, "segment_bytes": 0}
        for p in range(self.keyspace.partitions):
            for page in self.working_set(p, with_text=False):
                out["redis_pages"] += 1
                out["redis_edges"] += len(page.dsts)
            out["redis_bytes"] += int(self.redis.memory_usage(self.keyspace.links(p),
                                                              samples=0) or 0)
            for seg in self.segments(p):
                out["segment_pages"] += seg["pages"]
                out["segment_edges"] += seg["edges"]
                out["segment_bytes"] += sum(os.path.getsize(f) for f in seg["files"].values()
                                            if os.path.exists(f))
        return out
