"""The content store: WARC 1.1 files, one gzip member per record.

Mercator §2 keeps every downloaded document in a content store; the web
archiving world's form of it is WARC (ISO 28500, version 1.1), which pywb,
warcio, the Wayback Machine, Common Crawl's tools, Spark and DuckDB
extensions read. warcio (webrecorder's) makes and writes every record, with
a WARC-Payload-Digest (SHA-1, base32: the exchange's own, computed once per
body) and the WARC-Block-Digest warcio computes; each record is one gzip
member, made by ISA-L (GZIP_LEVEL). The HTTP heads go in byte for byte as
they were sent and received (:class:`HeadAsIs`), and the CDXJ line is made
from the exchange's fields while the record is written instead of reading
the record back.

Files. ``<crawl>-<yyyymmddhhmmssfff>-<serial>-<pid>~<host>~<rand>.warc.gz``,
after the IIPC / Heritrix convention prefix-timestamp-serial-crawlhost, so
that any number of workers on any number of hosts never collide (the random
part covers a recycled pid). A file being written is named ``*.warc.gz.open``
and holds an exclusive flock; it is closed when it passes WARC_MAX_SIZE or
the crawl stops, and only then renamed (published) to ``*.warc.gz``, next to
its CDXJ index ``*.cdxj``.

Crashes. Records are made and compressed in memory (warcio writes into a
buffer) and a batch of them written with unbuffered write() calls, so a
worker killed with kill -9 leaves at most one partial record at the end of
its ``.open`` file. At start, :func:`recover` looks at every ``.open`` file
no live writer holds a lock on: the complete records are kept and the
partial tail is cut off (Heritrix leaves such files ``.open`` for an
operator; here the repair is automatic), then the file is published as
usual; a file with no complete record is moved to ``damaged/``.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import os
import re
import shutil
import socket
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from isal import isal_zlib
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from crawlproj.stores.cdxj import fields, finish_line, index_file, line_key, scan
from crawlproj.stores.common import private_dir, safe_name, utc_second
from crawlproj.stores.exchange import Exchange
from crawlproj.stores.storage import LocalStorage, Storage

logger = logging.getLogger(__name__)

OPEN_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"
CDXJ_SUFFIX = ".cdxj"
# Records are compressed by ISA-L (Intel's deflate, through the isal package):
# standard gzip members, which zlib, warcio and pywb read, for a fraction of
# the CPU of the zlib level 9 warcio's own gzip uses (docs/benchmarks.md).
# The price is size on repetitive markup (docs/stores.md). A record goes to the compressor in one piece:
# fed in parts, ISA-L compresses each part on its own.
GZIP_LEVEL = 2
REVISIT_PROFILE = WARCWriter.REVISIT_PROFILE_1_1
# An extension field (WARC 1.1 §5: other named fields are allowed) on a
# record whose HTTP response head was not received as such but rebuilt from
# Scrapy's parsed response (docs/stores.md).
HEAD_REBUILT = "Crawlproj-HTTP-Head"
# An extension field on the record of a page that said noarchive (robots meta
# tag or X-Robots-Tag; crawlproj/robots/meta.py). The crawl keeps the capture,
# as a search engine keeps what it indexes (Google's noarchive asks only that
# no cached copy be shown), but gives it no CDXJ line: replay (pywb, the
# Wayback Machine) serves what the index lists, and the access policies of
# web archives (the Oakland Archive Policy, 2002) act at replay, not capture.
ROBOTS_MARK = "Crawlproj-Robots"
NOARCHIVE = "noarchive"
# a 304 to a conditional GET (WARC 1.1 §6.7.2): the server said the page is unchanged
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


def warc_date(epoch: float) -> str:
    """WARC 1.1 date: UTC, ISO 8601, microseconds."""
    second, us = utc_second(epoch)
    return f"{second}.{us:06d}Z"


def _value(v: str) -> str:
    """A header value on one line: a CR or LF (never in a URL Scrapy sends,
    but a record must not be split by one) is percent-encoded."""
    if "\r" in v or "\n" in v:
        return v.replace("\r", "%0D").replace("\n", "%0A")
    return v


class HeadAsIs(StatusAndHeaders):
    """An HTTP head that warcio's writer writes as it was sent or received,
    as a WARC request or response record holds the message that went over
    the network. warcio writes a head out again from the fields it parsed
    (``compute_headers_buffer``): ``x-b:1`` becomes ``x-b: 1``, a Latin-1
    byte a %-escape (warcio's issues 128 and 129)."""

    def __init__(self, raw: bytes):
        first = raw[: raw.find(b"\r\n")].decode("latin-1")
        protocol, _, statusline = first.partition(" ")
        super().__init__(statusline, [], protocol=protocol)
        self.headers_buff = raw

    def __bool__(self) -> bool:
        return bool(self.headers_buff)

    def compute_headers_buffer(self, header_filter=None) -> None:
        """The buffer warcio writes stays the head's own bytes."""


def _index_fields(rec_type: str, url: str, payload_digest: str | None, head: bytes) -> dict:
    headers = {"warc-type": rec_type, "warc-target-uri": url}
    if payload_digest:
        headers["warc-payload-digest"] = payload_digest
    return fields(headers, head)


def _builder() -> WARCWriter:
    """A warcio writer into memory, of uncompressed records (see _serialised)."""
    return WARCWriter(io.BytesIO(), gzip=False, warc_version="1.1")


def _serialised(writer: WARCWriter, records) -> list[bytes]:
    """The records as warcio writes them, each compressed on its own (WARC
    1.1 Annex D: record-at-a-time compression, so a reader can seek to any
    record) by ISA-L (GZIP_LEVEL) in one piece."""
    out, ends = writer.out, []
    for record in records:
        writer.write_record(record)
        ends.append(out.tell())
    data = out.getbuffer()
    return [isal_zlib.compress(data[a:b], GZIP_LEVEL, isal_zlib.MAX_WBITS | 16)
            for a, b in zip([0, *ends], ends)]


class WarcFile:
    """One WARC file being written (in the spool), with its CDXJ index.

    The index lines go to the index's spool file (NAME.cdxj.open) as their
    records are written, and are sorted when the file closes: held in memory
    until a 1 GiB file rotates, they grew a worker by some 0.3 KB a page
    (docs/scale.md, "A long crawl")."""

    def __init__(self, path: Path, info: dict[str, str]):
        self.path = path
        self.name = path.name[: -len(OPEN_SUFFIX)]
        # Unbuffered: a failed write leaves nothing in a buffer that a later
        # flush or close could still put into the file. "x": never append to
        # someone else's file.
        self.f = open(path, "xb", buffering=0)
        try:
            fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.f.close()
            raise
        self.size = 0
        self.records = 0
        self.broken = False
        self.index_path = path.with_name(self.name[: -len(WARC_SUFFIX)] + CDXJ_SUFFIX
                                         + OPEN_SUFFIX)
        self.index = None
        try:
            self.index = open(self.index_path, "w", encoding="utf-8")
        except OSError as exc:
            self._index_failed(exc)
        try:
            writer = _builder()
            (member,) = _serialised(writer, [writer.create_warcinfo_record(self.name, info)])
            self.append([(member, None)])
        except BaseException:
            self.f.close()
            path.unlink(missing_ok=True)
            self._drop_index()
            raise

    def _index_failed(self, exc: OSError) -> None:
        """The WARC file matters more than its index: one that cannot be
        written (a full disk) is left out with a warning."""
        logger.warning("CDXJ index of %s not written (%s); `scrapy cdx` builds it",
                       self.name, exc.strerror or exc)
        self._drop_index()

    def _drop_index(self) -> None:
        if self.index is not None:
            with contextlib.suppress(OSError):
                self.index.close()
            self.index = None
        self.index_path.unlink(missing_ok=True)

    def append(self, members: list[tuple[bytes, tuple | None]]) -> None:
        """Write gzip members (one record each, with its index entry or None)
        with one write(); on failure cut the file back to where it was, so it
        never holds part of a record."""
        data = b"".join(m for m, _ in members)
        try:
            view = memoryview(data)
            while view:
                view = view[self.f.write(view):]
        except BaseException:
            self.broken = True
            try:
                self.f.truncate(self.size)
                self.f.seek(self.size)
            except OSError:
                pass  # the next start's recover() cuts the partial record
            raise
        offset, lines = self.size, []
        for member, index in members:
            if index is not None:
                key, values = index
                lines.append(finish_line(key, values, len(member), offset, self.name) + "\n")
            offset += len(member)
        self.size += len(data)
        self.records += len(members)
        if self.index is not None and lines:
            try:
                self.index.write("".join(lines))
                self.index.flush()  # one write a batch, as the file's
            except OSError as exc:
                self._index_failed(exc)

    def close(self, storage: Storage) -> str | None:
        """fsync, unlock, publish the file and its sorted index; None if the
        file had failed a write (it stays .open for recover())."""
        try:
            if not self.broken:
                os.fsync(self.f.fileno())
        finally:
            self.f.close()  # releases the flock
        if self.broken:
            self._drop_index()  # recover() indexes the records the file holds whole
            return None
        lines = None
        if self.index is not None:
            try:
                self.index.close()
                text = self.index_path.read_text(encoding="utf-8")
                lines = sorted(line for line in text.split("\n") if line)
            except OSError as exc:
                self._index_failed(exc)
            self.index = None
        where = storage.publish(self.path, self.name)
        if lines is not None:
            write_index(storage, self.name, lines)
        return where


def write_index(storage: Storage, warc_name: str, lines: list[str]) -> bool:
    """Publish the sorted CDXJ index of a published WARC file. The WARC file
    matters more than its index: if the index cannot be written (a full disk)
    it is left out with a warning; `scrapy cdx` rebuilds it from the WARC."""
    index = storage.spool / (warc_name[: -len(WARC_SUFFIX)] + CDXJ_SUFFIX + OPEN_SUFFIX)
    try:
        index.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        storage.publish(index, index.name[: -len(OPEN_SUFFIX)])
        return True
    except OSError as exc:
        index.unlink(missing_ok=True)
        logger.warning("CDXJ index of %s not written (%s); `scrapy cdx` builds it",
                       warc_name, exc.strerror or exc)
        return False


class WarcWriter:
    """Writes exchanges as request/response (or request/revisit) record pairs,
    rotating files at max_size. Not thread-safe: one thread uses it."""

    def __init__(self, storage: Storage, crawl_id: str, worker: str, max_size: int,
                 info: dict[str, str] | None = None):
        self.storage = storage
        self.crawl_id = crawl_id
        self.worker = worker
        self.max_size = max_size
        self.info = dict(info or {})
        self.serial = 0
        self.current: WarcFile | None = None
        self.published: list[str] = []
        self.failed: OSError | None = None
        # pid~host~random after Heritrix's pid~host~port; taken from the worker
        # id (host:pid:random, the frontier's) so files and crawl log agree
        parts = worker.split(":")
        if len(parts) == 3:
            host, pid, rand = (safe_name(x) for x in parts)
        else:
            host, pid, rand = safe_name(socket.gethostname()), str(os.getpid()), uuid.uuid4().hex[:6]
        self._suffix = f"{pid}~{host}~{rand}"

    def _new_name(self) -> str:
        self.serial += 1
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S%f")[:17]
        return f"{safe_name(self.crawl_id)}-{stamp}-{self.serial:05d}-{self._suffix}{WARC_SUFFIX}"

    def open(self) -> WarcFile:
        """The current file, opening a new one if needed (raises OSError)."""
        if self.failed is not None:
            # After a failed write (disk full, EIO, ...) nothing more is tried:
            # every later page is refused whole, never written in part.
            raise self.failed
        if self.current is None:
            private_dir(self.storage.spool)
            path = self.storage.spool / (self._new_name() + OPEN_SUFFIX)
            info = {"software": "crawlproj (Scrapy, warcio)", "format": "WARC File Format 1.1",
                    "conformsTo": "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
                    "isPartOf": self.crawl_id, "hostname": socket.gethostname(),
                    "crawlproj-worker": self.worker, **self.info}
            self.current = WarcFile(path, info)
        return self.current

    def record_id(self, url: str, date: str) -> str:
        """The WARC-Record-ID of the response record of url fetched at date
        (its WARC-Date): a name-based UUID (RFC 4122 §4.3) of the crawl, the
        date and the URL, so that a revisit written by any worker names the
        record holding its payload (WARC-Refers-To) from the capture's URL
        and time alone, without asking the worker that wrote it."""
        return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'{self.crawl_id} {date} {url}')}>"

    def records(self, writer: WARCWriter, ex: Exchange,
                revisit_of: dict | None = None) -> tuple[tuple, tuple]:
        """The (response or revisit, request) records of one exchange, made by
        writer (warcio's), each with its index entry: (the start of its CDXJ
        line, cdxj.line_key; its CDXJ fields) for a response or revisit record
        (the lines pywb's indexer writes, cdxj.fields), None for the request
        and for a page that said noarchive. revisit_of = {"url", "date"?,
        "profile"?} makes the first a revisit record (headers only): for a
        duplicate found by the content-seen test, date is the WARC-Date of
        the response record of url that holds the payload (the content-seen
        test's capture), which the revisit names with WARC-Refers-To-Date and
        WARC-Refers-To; with profile NOT_MODIFIED_PROFILE, for a 304 to a
        conditional GET.

        The payload's digest is the exchange's own (computed once per body,
        shared with the crawl log and page metadata); warcio computes the
        block digests."""
        date = warc_date(ex.started)
        url = _value(ex.url)
        head = ex.response_head
        payload = ex.payload_digest
        if revisit_of:
            profile = revisit_of.get("profile", REVISIT_PROFILE)
            rec_type, rec_id = "revisit", StatusAndHeadersParser.make_warc_id()
            headers = {"WARC-Type": rec_type, "WARC-Record-ID": rec_id, "WARC-Date": date,
                       "WARC-Target-URI": url}
            if profile == NOT_MODIFIED_PROFILE:
                payload = None  # a 304 has no payload
            else:
                headers["WARC-Payload-Digest"] = payload
            headers["WARC-Profile"] = profile
            headers["WARC-Refers-To-Target-URI"] = _value(revisit_of["url"])
            if revisit_of.get("date"):
                headers["WARC-Refers-To-Date"] = revisit_of["date"]
                headers["WARC-Refers-To"] = self.record_id(revisit_of["url"], revisit_of["date"])
            body = None
        else:
            rec_type, rec_id = "response", self.record_id(ex.url, date)
            headers = {"WARC-Type": rec_type, "WARC-Record-ID": rec_id, "WARC-Date": date,
                       "WARC-Target-URI": url, "WARC-Payload-Digest": payload}
            body = io.BytesIO(ex.body)
        if ex.ip:
            headers["WARC-IP-Address"] = ex.ip
        if ex.head_rebuilt:
            headers[HEAD_REBUILT] = "rebuilt"
        index = None
        if ex.noarchive:
            headers[ROBOTS_MARK] = NOARCHIVE
        else:
            index = (line_key(ex.url, date), _index_fields(rec_type, ex.url, payload, head))
        resp = writer.create_warc_record(url, rec_type, payload=body,
                                         length=len(ex.body) if body else 0,
                                         warc_headers_dict=headers, http_headers=HeadAsIs(head))
        req = writer.create_warc_record(url, "request", warc_headers_dict={
            "WARC-Type": "request", "WARC-Record-ID": StatusAndHeadersParser.make_warc_id(),
            "WARC-Date": date, "WARC-Target-URI": url, "WARC-Concurrent-To": rec_id},
            http_headers=HeadAsIs(ex.request_head))
        return (resp, index), (req, None)

    def members(self, ex: Exchange, revisit_of: dict | None = None) -> list[tuple[bytes, tuple | None]]:
        """The exchange's records (see records()) as gzip members, each with
        its index entry: the CPU part of writing it, which needs no file."""
        writer = _builder()
        made = self.records(writer, ex, revisit_of)
        return list(zip(_serialised(writer, [r for r, _ in made]), [i for _, i in made]))

    def write(self, ex: Exchange, revisit_of: dict | None = None) -> None:
        """Write one exchange (see records()); raises OSError."""
        error = self.write_many([(ex, revisit_of)])[0]
        if error is not None:
            raise error

    def write_many(self, items: list[tuple[Exchange, dict | None]]) -> list[OSError | None]:
        """Write exchanges in order, each (exchange, revisit_of) as its
        record pair; see append_many()."""
        return self.append_many([self.members(ex, revisit_of) for ex, revisit_of in items])

    def append_many(self, items: list[list[tuple[bytes, tuple | None]]]) -> list[OSError | None]:
        """Append exchanges' members (members()) in order, with one write()
        per file; returns, for each exchange, None (written) or the OSError
        that kept it out of the file. A file is rotated once it passes
        max_size, so it holds at most one exchange's records past it."""
        out: list[OSError | None] = []
        members: list[tuple[bytes, tuple | None]] = []
        pending = 0   # exchanges in members, not yet written
        size = 0
        try:
            wf = self.open()
            for exchange_members in items:
                members.extend(exchange_members)
                size += sum(len(m) for m, _ in exchange_members)
                pending += 1
                if wf.size + size >= self.max_size:
                    self._append(wf, members)
                    out.extend([None] * pending)
                    members, pending, size = [], 0, 0
                    self.rotate()
                    if len(out) < len(items):
                        wf = self.open()
            if members:
                self._append(wf, members)
            out.extend([None] * pending)
        except OSError as exc:
            out.extend([exc] * (len(items) - len(out)))
        return out

    def _append(self, wf: WarcFile, members) -> None:
        try:
            wf.append(members)
        except OSError as exc:
            self.failed = exc
            raise

    def rotate(self) -> None:
        wf, self.current = self.current, None
        if wf is not None:
            where = wf.close(self.storage)
            if where:
                self.published.append(where)
                logger.info("WARC file finished: %s (%d records, %d bytes)",
                            where, wf.records, wf.size)

    def close(self) -> None:
        self.rotate()


def _locked_by_other(path: Path) -> bool:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return True  # someone finished it meanwhile
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        f.close()


def recover(storage: Storage) -> list[tuple[str, str]]:
    """Repair or set aside every ``.open`` WARC that no live writer holds.

    Returns (file name, what was done) pairs; each is also logged."""
    spool = storage.spool
    done = []
    if not spool.is_dir():
        return done
    for path in sorted(spool.glob("*" + WARC_SUFFIX + OPEN_SUFFIX)):
        if _locked_by_other(path):
            continue
        name = path.name[: -len(OPEN_SUFFIX)]
        size = path.stat().st_size
        with open(path, "r+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            members = list(scan(f))
            good = members[-1].offset + members[-1].length if members else 0
            if members:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())
        if not members:
            damaged = spool / "damaged"
            damaged.mkdir(exist_ok=True)
            shutil.move(str(path), damaged / name)
            what = f"no complete record in {size} bytes: moved to {damaged / name}"
        else:
            with open(path, "rb") as f:
                lines = index_file(f, name)
            storage.publish(path, name)
            write_index(storage, name, lines)
            what = (f"kept {len(members)} complete records, cut {size - good} bytes"
                    if size > good else f"complete ({len(members)} records), closed")
        logger.warning("WARC file %s was left open by a stopped worker: %s", name, what)
        done.append((name, what))
    # an index being written when its worker died: the WARC it belongs to was
    # either published (then it was rebuilt above or is complete) or is still open
    for index in spool.glob("*" + CDXJ_SUFFIX + OPEN_SUFFIX):
        warc = index.name[: -len(CDXJ_SUFFIX + OPEN_SUFFIX)] + WARC_SUFFIX
        if not (spool / (warc + OPEN_SUFFIX)).exists():
            index.unlink(missing_ok=True)
    return done


# A file's name as WarcWriter._new_name makes it: the crawl's safe name, the
# 17-digit UTC time, the serial, pid~host~random. The crawl is what comes
# before the first "-<17 digits>-<serial>-": crawl ids may hold "-" too.
_FILE_NAME = re.compile(r"(?P<crawl>.+?)-\d{17}-\d+-.")


def crawl_of(name: str) -> str | None:
    """The crawl (its file-name-safe form) a WARC or CDXJ file of this store
    belongs to, or None for a file named otherwise."""
    m = _FILE_NAME.match(name)
    return m.group("crawl") if m else None


def crawl_names(storage: LocalStorage, crawl_id: str | None, suffix: str) -> list[str]:
    """The names of storage's files with suffix of crawl crawl_id (every
    file when crawl_id is None)."""
    names = storage.names(suffix)
    if crawl_id is None:
        return names
    crawl = safe_name(crawl_id)
    return [n for n in names if crawl_of(n) == crawl]


def build_index(storage: LocalStorage, rebuild: bool = False,
                crawl_id: str | None = None) -> tuple[int, int]:
    """Write the missing per-file ``.cdxj`` indexes (all with rebuild) of the
    WARC files of crawl_id (None: of every crawl); returns (files indexed, lines)."""
    files = lines = 0
    for name in crawl_names(storage, crawl_id, WARC_SUFFIX):
        target = storage.root / (name[: -len(WARC_SUFFIX)] + CDXJ_SUFFIX)
        if target.exists() and not rebuild:
            continue
        with storage.open(name) as f:
            out = index_file(f, name)
        tmp = target.with_name(target.name + OPEN_SUFFIX)
        tmp.write_text("".join(line + "\n" for line in out))
        os.replace(tmp, target)
        files += 1
        lines += len(out)
    return files, lines


def merge_indexes(storage: LocalStorage, out: Path, crawl_id: str | None = None) -> int:
    """One sorted CDXJ of the indexes of crawl_id's WARC files (None: of every
    WARC file's); a k-way merge: each is sorted. An index is a file's when it
    lies beside it (NAME.cdxj, NAME.warc.gz): merged indexes are not merged again."""
    import heapq
    warcs = set(storage.names(WARC_SUFFIX))
    names = [n for n in crawl_names(storage, crawl_id, CDXJ_SUFFIX)
             if n[: -len(CDXJ_SUFFIX)] + WARC_SUFFIX in warcs and (storage.root / n) != out]
    handles = [open(storage.root / n, encoding="utf-8") for n in names]
    n = 0
    tmp = out.with_name(out.name + OPEN_SUFFIX)
    try:
        with open(tmp, "w", encoding="utf-8") as w:
            for line in heapq.merge(*handles):
                w.write(line)
                n += 1
        os.replace(tmp, out)
    finally:
        for h in handles:
            h.close()
    return n


def now() -> float:
    return time.time()
