"""The content-seen test (Mercator §3, step 4), shared by all workers in Redis.

Mercator fingerprints each downloaded document and looks the fingerprint up in
a set of the documents seen so far; a document already seen under another URL
(mirrors, aliases, session URLs the canonicaliser could not recognise) is not
processed again, so its links are not extracted a second time.

Exact test: a 64-bit mmh3 fingerprint of the body, with its ASCII whitespace
dropped for text (re-indented or re-wrapped HTML is the same document).
Redis: ``SET <content key of fp> <capture> NX GET``, one command per page: it
records the capture if the fingerprint is new and returns the first one if
not. A capture is the URL, and with it when its fetch started (epoch seconds,
as the WARC record of that fetch is dated), so that a revisit record names
the very record holding the payload (WARC 1.1 §5.11-5.12).
The key's partition is the fingerprint modulo the crawl's partition count
(crawlproj.redis.keyspace), so on a cluster the content-seen sets spread over the
nodes like the frontier.

Near-duplicates (CONTENTSEEN_NEAR), after Broder, Glassman, Manasse & Zweig
1997 ("Syntactic clustering of the Web"): a document is the set of its
w-shingles (runs of w consecutive words of its text). Resemblance (Jaccard) of
two such sets is estimated from small sketches: one-permutation MinHash
(Li, Owen & Zhang 2012) keeps, in each of K bins, the least shingle hash
falling there; two documents agree in a bin with probability about their
resemblance. Candidates are found as Broder's super-shingles are, by banding
the sketch (K/r bands of r bins, each band a key); a candidate is a near
duplicate when the sketches agree in at least CONTENTSEEN_NEAR_THRESHOLD of
their bins. Redis, in one pipelined round trip: the exact SET above,
``SET <band key> <doc> NX GET`` per band, and ``SET <sketch key> <sketch url> NX``;
a second round trip (GET of the candidates' sketches) only when a band matched.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

import mmh3

# Text types: whitespace is not significant for the content-seen test.
_TEXT = re.compile(rb"^(text/|application/(xhtml\+xml|xml|json|javascript|rss\+xml|atom\+xml))")
_NOISE = re.compile(rb"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.S | re.I)
_TAG = re.compile(rb"<[^>]*>")
_WORD = re.compile(rb"\w+")
_ENTITY = re.compile(rb"&#?\w+;")

EMPTY = 0xFFFFFFFF   # a sketch bin no shingle fell into
# Request meta key: when the fetch of the first copy of a duplicate's content
# started (a '_' key: never sent to the frontier)
DUPLICATE_CAPTURED = "_crawlproj_duplicate_captured"


def is_text(content_type: bytes | str | None) -> bool:
    if isinstance(content_type, str):
        content_type = content_type.encode("latin-1", "replace")
    return bool(content_type) and bool(_TEXT.match(content_type.strip().lower()))


_WHITESPACE = b" \t\n\r\x0b\x0c"


def normalise(body: bytes) -> bytes:
    """The body without its ASCII whitespace: re-indented or re-wrapped markup
    is the same document. Two pages that differ only in where whitespace
    splits their words would be taken for one; keeping one space per run
    instead (split and join) would cost many times as much, on every page."""
    return body.translate(None, _WHITESPACE)


def content_fingerprint(body: bytes, text: bool = True) -> int:
    """Signed 64-bit fingerprint of a document, its whitespace dropped if text."""
    return mmh3.hash64(normalise(body) if text else body, signed=True)[0]


def words(body: bytes) -> list[bytes]:
    """The words of an HTML or text document, lower-cased, markup dropped."""
    text = _TAG.sub(b" ", _NOISE.sub(b" ", body))
    return _WORD.findall(_ENTITY.sub(b" ", text).lower())


def sketch(ws: list[bytes], bins: int = 60, w: int = 4) -> list[int]:
    """One-permutation MinHash of the document's w-shingles: per bin, the least
    32-bit hash of the shingles that fall in it (EMPTY if none)."""
    mins = [EMPTY] * bins
    if len(ws) < w:
        ws = ws + [b""] * (w - len(ws)) if ws else []
    for i in range(len(ws) - w + 1):
        h = mmh3.hash64(b" ".join(ws[i:i + w]), signed=False)[0]
        b, v = h % bins, h >> 32
        if v < mins[b]:
            mins[b] = v
    return mins


def resemblance(a: list[int], b: list[int]) -> float:
    """Estimated resemblance: agreeing bins among bins not empty in both."""
    used = agree = 0
    for x, y in zip(a, b):
        if x == EMPTY and y == EMPTY:
            continue
        used += 1
        agree += x == y
    return agree / used if used else 1.0


def bands(sk: list[int], rows: int) -> list[int]:
    """One 64-bit key per band of `rows` bins (bands with an empty bin are skipped:
    they would match every short document)."""
    out = []
    for i in range(0, len(sk) - rows + 1, rows):
        part = sk[i:i + rows]
        if EMPTY not in part:
            out.append(mmh3.hash64(array("I", part).tobytes(), seed=i, signed=False)[0])
    return out


def capture_value(url: str, started: float | None) -> str:
    """What the content-seen sets keep of a capture: the URL, and the start
    of its fetch when known (URLs hold no space)."""
    return url if started is None else f"{url} {started!r}"


def parse_capture(value: str) -> tuple[str, float | None]:
    url, _, started = value.partition(" ")
    try:
        return url, float(started) if started else None
    except ValueError:
        return url, None


@dataclass
class Verdict:
    fingerprint: int
    duplicate_of: str | None = None   # the first URL with this content
    captured: float | None = None     # when the fetch of that URL's copy started
    near: bool = False                # a near duplicate (not the same bytes)
    resemblance: float = 1.0
    commands: int = 0                 # Redis commands sent
    round_trips: int = 0


class ContentSeen:
    """The content-seen sets of one crawl, in the partitions of its keyspace."""

    def __init__(self, redis, keyspace, near: bool = False, threshold: float = 0.9,
                 bins: int = 60, rows: int = 6, shingle: int = 4):
        if not 0 < threshold <= 1:
            raise ValueError(f"CONTENTSEEN_NEAR_THRESHOLD must be in (0, 1], not {threshold!r}")
        if bins < rows or bins % rows:
            raise ValueError(f"sketch bins ({bins}) must be a multiple of band rows ({rows})")
        self.redis = redis
        self.keyspace = keyspace
        self.near = near
        self.threshold = threshold
        self.bins, self.rows, self.shingle = bins, rows, shingle

    def test(self, url: str, body: bytes, text: bool = True, started: float | None = None) -> Verdict:
        """Record url's document, fetched from `started` on; say whether
        another URL had it first, and when that one's fetch started."""
        return self.test_many([(url, body, text, started)])[0]

    def test_many(self, docs: list[tuple[str, bytes, bool, float | None]]) -> list[Verdict]:
        """test() of each (url, body, text, started), the exact tests of all
        in one pipelined round trip (near mode: a round trip each)."""
        if self.near:
            return [self._test_near(*doc) for doc in docs]
        pipe = self.redis.pipeline(transaction=False)
        asked = self.queue(pipe, docs)
        return self.answer(asked, pipe.execute(raise_on_error=False))

    def queue(self, pipe, docs: list[tuple[str, bytes, bool, float | None]]) -> list:
        """The exact tests of docs queued on pipe (one command each): what
        answer() needs, with the pipeline's replies, to give their verdicts.
        A part of the stores' round trip (crawlproj/stores/commit.py)."""
        asked = []
        for url, body, text, started in docs:
            v = Verdict(content_fingerprint(body, text), commands=1, round_trips=1)
            pipe.set(self.keyspace.content(v.fingerprint), capture_value(url, started), nx=True, get=True)
            asked.append((url, v))
        return asked

    def answer(self, asked: list, replies: list) -> list[Verdict]:
        """The verdicts of the tests queue() queued, from their replies; raises
        the first reply that is an error."""
        for (url, v), reply in zip(asked, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            self._first(v, url, reply)
        return [v for _, v in asked]

    @staticmethod
    def _first(v: Verdict, url: str, reply: bytes | None) -> bool:
        """Fill v from the exact test's reply (the first capture, or None);
        True when another URL had the document first."""
        first = parse_capture(reply.decode()) if reply is not None else None
        if first is not None and first[0] != url:
            v.duplicate_of, v.captured = first
            return True
        return False

    def _test_near(self, url: str, body: bytes, text: bool, started: float | None) -> Verdict:
        fp = content_fingerprint(body, text)
        v = Verdict(fp)
        value = capture_value(url, started)
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.keyspace.content(fp), value, nx=True, get=True)
        sk, doc = None, fp & 0xFFFFFFFFFFFFFFFF
        if text:
            sk = sketch(words(body), self.bins, self.shingle)
            band_keys = bands(sk, self.rows)
            for b in band_keys:
                pipe.set(self.keyspace.near_band(b), doc, nx=True, get=True)
            pipe.set(self.keyspace.sketch(fp), array("I", sk).tobytes() + value.encode(), nx=True)
        replies = pipe.execute()
        v.commands, v.round_trips = len(replies), 1
        if self._first(v, url, replies[0]) or sk is None:
            return v
        candidates = {int(r) for r in replies[1:-1] if r is not None} - {doc}
        if not candidates:
            return v
        cand = sorted(candidates)
        pipe = self.redis.pipeline(transaction=False)
        for c in cand:
            pipe.get(self.keyspace.sketch(c))
        stored = pipe.execute()
        v.commands += len(cand)
        v.round_trips += 1
        best = None
        for raw in stored:
            if raw is None:
                continue
            other = list(array("I", raw[:4 * self.bins]))
            r = resemblance(sk, other)
            if r >= self.threshold and (best is None or r > best[0]):
                best = (r, parse_capture(raw[4 * self.bins:].decode()))
        if best is not None and best[1][0] != url:
            v.resemblance, (v.duplicate_of, v.captured), v.near = best[0], best[1], True
        return v
