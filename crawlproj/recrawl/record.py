"""A page's recrawl record and what a fetch shows of it: the part of
continuous crawling that the downloader middleware (crawlproj/recrawl/middleware.py)
and the frontier (crawlproj/recrawl/schedule.py) share.

The record travels in a scheduled page's payload (request meta "rc"):
    [state (crawlproj.recrawl.state, 36 bytes), ETag, Last-Modified (Unix
     seconds, 0 = none), content digest (8 bytes of the body's SHA-1) or,
     with RECRAWL_CHANGE a resemblance threshold, the text's sketch (16 bytes)]

What counts as a change (RECRAWL_CHANGE): any byte ("digest"), or a fall of
the resemblance to the last capture to the threshold or below, WebFountain's
"non-trivial change" [Edwards et al. §4, after Broder et al. 1997]. The
resemblance of the pages' word 4-shingles is estimated from 16 bins of
one-permutation MinHash (crawlproj/due/contentseen.py's sketch), each bin
kept as its least hash's low byte (b-bit MinHash, Li & König 2010): two
pages agree in a bin with probability R + (1 - R)/256, from which R is
recovered. 16 bytes a page instead of the shingles; resolution 1/16.

No Scrapy: a response is read through its headers, status and body.
"""

from __future__ import annotations

import hashlib
import struct
import time
from dataclasses import dataclass
from email.utils import formatdate

from crawlproj.due.contentseen import EMPTY, is_text, sketch, words

# request meta: the recrawl record of a scheduled page, as stored ("rc") and
# as trusted on a recrawl lease ("_rc", never stored); the fetch's outcome
STORED, HELD, OBSERVED = "rc", "_rc", "_recrawl_obs"
# An ETag longer than this is not kept (nor sent): its bytes would cost more
# in Redis than the page saves.
MAX_ETAG = 128
DIGEST = "digest"
SKETCH_BINS = 16           # bytes of a page's sketch
SHINGLE = 4                # words per shingle


class ChangeSettingError(ValueError):
    pass


def change_threshold(value) -> float | None:
    """RECRAWL_CHANGE as a threshold: None for "digest", else a float in (0, 1)."""
    if value == DIGEST:
        return None
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = None
    if t is None or not 0.0 < t < 1.0:
        raise ChangeSettingError(f'RECRAWL_CHANGE must be "digest" or a resemblance threshold '
                                 f"in (0, 1), not {value!r}")
    return t


def text_sketch(body: bytes) -> bytes:
    """The 16-byte sketch of a text: per bin, the low byte of the least
    shingle hash (0xFF also for an empty bin, as in both texts alike)."""
    return bytes((v & 0xFF) if v != EMPTY else 0xFF
                 for v in sketch(words(body), SKETCH_BINS, SHINGLE))


def resemblance(a: bytes, b: bytes) -> float:
    """Estimated resemblance of two texts from their sketches, the chance
    agreement of a byte taken out."""
    agree = sum(x == y for x, y in zip(a, b)) / SKETCH_BINS
    return max(0.0, (agree - 1 / 256) / (1 - 1 / 256))


def changed(previous: bytes, fetch: Fetch, threshold: float | None) -> bool:
    """Whether the page changed since the capture whose digest or sketch is
    ``previous``: by the digest, or with a threshold by the sketches when
    both captures have one (a page that is not text, or a record written
    under the other setting, falls back on what both have)."""
    if threshold is not None and fetch.sketch is not None and len(previous) == SKETCH_BINS:
        return resemblance(previous, fetch.sketch) <= threshold
    if len(previous) == len(fetch.digest):
        return previous != fetch.digest
    return True                    # a sketch and a digest: nothing to compare, count a change


@dataclass(frozen=True)
class Fetch:
    """What crawlproj/recrawl/middleware.py saw of a page's response."""
    status: int
    etag: str
    last_modified: str | None
    date: str | None
    digest: bytes
    at: float          # wall-clock seconds
    sketch: bytes | None = None     # a text's, with RECRAWL_CHANGE a threshold

    @property
    def kept(self) -> bytes:
        """What the record keeps to tell the next fetch's change: the sketch if any."""
        return self.sketch if self.sketch is not None else self.digest


def observe(response, sketched: bool = False) -> Fetch:
    """sketched: also the text's sketch (RECRAWL_CHANGE a threshold)."""
    h = response.headers
    etag = (h.get(b"ETag") or b"").decode("latin-1")
    lm = h.get(b"Last-Modified")
    date = h.get(b"Date")
    sk = None
    if sketched and 200 <= response.status < 300 and is_text(h.get(b"Content-Type")):
        sk = text_sketch(response.body)
    return Fetch(response.status, etag if len(etag) <= MAX_ETAG else "",
                 lm.decode("latin-1") if lm else None, date.decode("latin-1") if date else None,
                 hashlib.sha1(response.body).digest()[:8], time.time(), sk)


def conditional_headers(record) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from a page's recrawl record."""
    out = {}
    if record[1]:
        out["If-None-Match"] = record[1]
    if record[2]:
        out["If-Modified-Since"] = formatdate(record[2], usegmt=True)
    return out


# -- a scheduled page's payload, packed ---------------------------------------------
#
# A page in a recrawl queue is kept in p:<host> as one binary field, not as a
# msgpack request (whose map keys, "m", "rc", "depth", and type headers cost
# 14-20 bytes a page):
#     0      1   PACKED (a byte no msgpack map starts with)
#     1      1   bits: 1 https, 2 an ETag follows, 4 the digest is a sketch (16 bytes)
#     2      1-5 depth (unsigned LEB128)
#     .      36  state (crawlproj.recrawl.state)
#     .      4   Last-Modified, Unix seconds (u32, 0 = none)
#     .      8   digest, or 16: the sketch
#     .      1+n ETag: its length, its bytes (if bit 2)
#     .      ..  the URL less scheme and host (UTF-8)
PACKED = 0xC1               # never used by msgpack ("never used" in its spec)
_HTTPS, _ETAG, _SKETCHED = 1, 2, 4
_LM = struct.Struct("<I")


def pack_payload(url_tail: str, https: bool, depth: int, record) -> bytes:
    """record: [state, ETag, Last-Modified, digest or sketch]; url_tail: the
    URL less scheme and host."""
    state, etag, lm, kept = record
    etag_b = etag.encode("latin-1") if etag else b""
    bits = (_HTTPS if https else 0) | (_ETAG if etag_b else 0) | \
        (_SKETCHED if len(kept) == SKETCH_BINS else 0)
    out = bytearray((PACKED, bits))
    depth = max(0, int(depth or 0))
    while True:
        byte, depth = depth & 0x7F, depth >> 7
        out.append(byte | (0x80 if depth else 0))
        if not depth:
            break
    out += state
    out += _LM.pack(max(0, min(int(lm), 0xFFFFFFFF)))
    out += kept
    if etag_b:
        out.append(len(etag_b))
        out += etag_b
    out += url_tail.encode("utf-8")
    return bytes(out)


def unpack_payload(payload: bytes) -> tuple[str, bool, int, list]:
    """(URL tail, https, depth, record) of a packed payload; ValueError if it is not one."""
    from crawlproj.recrawl.state import SIZE
    if len(payload) < 2 or payload[0] != PACKED:
        raise ValueError("not a packed recrawl payload")
    bits, i, depth, shift = payload[1], 2, 0, 0
    while True:
        byte = payload[i]
        depth |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            break
    state = payload[i:i + SIZE]
    i += SIZE
    (lm,) = _LM.unpack_from(payload, i)
    i += _LM.size
    n = SKETCH_BINS if bits & _SKETCHED else 8
    kept = payload[i:i + n]
    i += n
    etag = ""
    if bits & _ETAG:
        etag = payload[i + 1:i + 1 + payload[i]].decode("latin-1")
        i += 1 + payload[i]
    if len(state) != SIZE or len(kept) != n or i > len(payload):
        raise ValueError("truncated packed recrawl payload")
    return payload[i:].decode("utf-8"), bool(bits & _HTTPS), depth, [state, etag, lm, kept]
