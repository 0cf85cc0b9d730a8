"""The link side of the index: anchor texts of the links to each page, the
fetch time of every indexed page, and PageRank over those links.

The text of the links that point to a page describes it in other people's
words, and often better than its own text (the WebCrawler's contemporaries
indexed little else, Pinkerton §"Observations"); it goes into the page's
`anchors` field. Links are known only once their source is fetched, often
after their target was indexed: such a target is marked stale and written
again, with its grown anchor text, by the indexer (Indexer.write), oldest
stale first.

One SQLite file beside the tantivy index; only the indexer writes it (WAL,
so the query server reads PageRank while it writes). Pages are keyed by the
64-bit id of their index key (ids.id64, the DUE's kind of fingerprint): a
link is two integers and its text; the key itself is kept once, in `docs`,
for the pages that are indexed, with the ids of the page's own link targets
(what a recrawl of the page takes back).

Links are read by target but written by source, ~15 a page to targets all
over the id space: inserted one by one into a B-tree ordered by target, each
lands on a page of its own, and every commit rewrites thousands of pages.
So the store is a two-level log-structured merge tree (O'Neil et al., "The
Log-Structured Merge-Tree", 1996): a batch's links are appended to `recent`,
and when `recent` has grown to a share of `anchors` (MERGE_SHARE) it is
merged into `anchors` in target order, one sequential pass. A lookup by
target reads both.
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from pathlib import Path

import numpy as np

from crawlproj.ranker.pagerank import CHO_DAMPING, TransitionMatrix, build_adjacency, pagerank
from crawlproj.search.document import document_key
from crawlproj.search.ids import id64, signed64

FILE = "anchors.sqlite3"
# anchor texts kept per link target; the most a popular page needs for its words
MAX_ANCHORS = 200
# PRAGMA user_version of the tables below: a store of another layout is
# refused with the way out (`scrapy index --rebuild`) rather than misread
SCHEMA_VERSION = 3
# SQLite's page cache for the writer (KiB)
WRITER_CACHE_KIB = 65536
# WAL pages between checkpoints (SQLite's default is 1,000): a merge or a big
# batch dirties more than that, and a checkpoint after every commit wrote the
# same pages to the database again and again (half the commit time at
# 100,000 pages, docs/search.md); the WAL is cut back to WAL_KEEP_BYTES after
WAL_CHECKPOINT_PAGES = 50_000
WAL_KEEP_BYTES = 64 << 20
# ids per IN (...) list: under SQLite's default limit of bound parameters
CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs(id INTEGER PRIMARY KEY, key TEXT NOT NULL, fetched_at REAL,
                                 targets BLOB);
CREATE TABLE IF NOT EXISTS anchors(target INTEGER, source INTEGER, text TEXT,
                                   PRIMARY KEY(target, source)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS recent(target INTEGER, source INTEGER, text TEXT);
CREATE INDEX IF NOT EXISTS recent_by_target ON recent(target);
CREATE TABLE IF NOT EXISTS stale(seq INTEGER PRIMARY KEY, id INTEGER UNIQUE);
CREATE TABLE IF NOT EXISTS pagerank(id INTEGER PRIMARY KEY, score REAL);
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value) WITHOUT ROWID;
"""


# A page's links name the same popular targets again and again: the id of a
# link target's key is remembered, not its canonical URL computed anew.
@lru_cache(maxsize=1 << 17)
def target_id(url: str) -> int:
    """The signed id of the index key of a link's target URL."""
    return signed64(id64(document_key(url)))


def link_texts(outlinks: list[tuple[str, str]]) -> dict[int, str]:
    """A page's links as {target id: their anchor texts joined}."""
    texts: dict[int, list[str]] = {}
    for url, anchor in outlinks:
        texts.setdefault(target_id(url), []).append(anchor)
    return {t: " ".join(filter(None, map(str.strip, v))) for t, v in texts.items()}


def _chunks(items: list, n: int = CHUNK):
    for i in range(0, len(items), n):
        yield items[i:i + n]


class AnchorStore:
    # `recent` is merged into `anchors` once it holds a 1/merge_share as many
    # links, and at least merge_min: each merge rewrites about every page of
    # `anchors` it reaches, so merging in proportion keeps a link's share of
    # that work the same however large the store grows
    merge_share = 8
    merge_min = 50_000

    def __init__(self, directory: Path, readonly: bool = False):
        path = Path(directory) / FILE
        if readonly:
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0,
                                      check_same_thread=False)
        else:
            self.db = sqlite3.connect(path, timeout=5.0, check_same_thread=False)
        try:
            self._check_schema(readonly)
        except Exception:
            self.db.close()
            raise

    def _check_schema(self, readonly: bool) -> None:
        db = self.db
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        self._ranks = (None, np.zeros(0, np.int64), np.zeros(0))  # (version, ids, scores)
        self._sizes: list[int] | None = None  # links in (anchors, recent), counted when first needed
        if tables and version != SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"its tables are of layout {version}, this crawlproj reads "
                                        f"layout {SCHEMA_VERSION}")
        if readonly:
            return
        db.execute("PRAGMA journal_mode=WAL")
        # NORMAL: no fsync at commit, only at checkpoints. A process that dies
        # loses nothing committed (the WAL is in the OS's hands); a power loss
        # may take back the last commits, leaving pages in tantivy that the
        # store does not know: `scrapy index --rebuild` rebuilds both from the
        # WARC files, which hold every page
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        db.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
        db.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.commit()

    def close(self) -> None:
        self.db.close()

    # -- the indexer --------------------------------------------------------

    def fetched_at(self, keys: list[str]) -> dict[str, float]:
        """The indexed fetch time of each of keys that is indexed."""
        by_id = {signed64(id64(k)): k for k in keys}
        out: dict[str, float] = {}
        for chunk in _chunks(list(by_id)):
            marks = ",".join("?" * len(chunk))
            out.update((by_id[i], t) for i, t in self.db.execute(
                f"SELECT id, fetched_at FROM docs WHERE id IN ({marks})", chunk))  # noqa: S608
        return out

    def record(self, pages: list[tuple[str, float, dict[int, str], bool]]) -> None:
        """Pages are (re)indexed, each (key, fetched_at, link_texts(its
        links), new): their fetch times, and their links in place of the ones
        their earlier versions had; the indexed pages those point to, other
        than the pages recorded here, are stale (their anchor text changed).
        A new page has no earlier links to take back."""
        db = self.db
        if self._sizes is None:
            self._sizes = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # noqa: S608
                           for t in ("anchors", "recent")]
        ids = [signed64(id64(key)) for key, _, _, _ in pages]
        changed: set[int] = set()
        rows, docs, gone = [], [], []
        for source, (key, fetched_at, links, new) in zip(ids, pages):
            if not new:
                old = db.execute("SELECT targets FROM docs WHERE id = ?", (source,)).fetchone()
                if old and old[0]:
                    targets = np.frombuffer(old[0], np.int64).tolist()
                    changed.update(targets)
                    gone.extend((t, source) for t in targets)
            targets = [t for t in links if t != source]
            rows.extend((t, source, links[t]) for t in targets)
            docs.append((source, key, fetched_at, np.array(targets, np.int64).tobytes()))
            changed.update(targets)
        if gone:
            self._sizes[0] -= db.executemany("DELETE FROM anchors WHERE target = ? AND source = ?", gone).rowcount
            self._sizes[1] -= db.executemany("DELETE FROM recent WHERE target = ? AND source = ?", gone).rowcount
        db.executemany("INSERT OR REPLACE INTO docs(id, key, fetched_at, targets) VALUES (?, ?, ?, ?)", docs)
        db.executemany("INSERT INTO recent(target, source, text) VALUES (?, ?, ?)", rows)
        self._sizes[1] += len(rows)
        if self._sizes[1] >= max(self.merge_min, self._sizes[0] // self.merge_share):
            self.merge()
        changed.difference_update(ids)
        db.executemany("INSERT OR IGNORE INTO stale(id) SELECT id FROM docs WHERE id = ?",
                       [(t,) for t in changed])

    def drop(self, keys: list[str]) -> None:
        """keys are indexed no more: their links are taken back, and they are
        forgotten (a document for them is new again)."""
        if not keys:
            return
        self.record([(key, 0.0, {}, False) for key in keys])
        ids = [(signed64(id64(key)),) for key in keys]
        self.db.executemany("DELETE FROM docs WHERE id = ?", ids)
        self.db.executemany("DELETE FROM stale WHERE id = ?", ids)

    def merge(self) -> None:
        """Move the recent links into `anchors`, in its own order (part of the
        indexer's transaction: a crash undoes it with the batch)."""
        self.db.execute("INSERT INTO anchors(target, source, text) "
                        "SELECT target, source, text FROM recent ORDER BY target, source")
        self.db.execute("DELETE FROM recent")
        self._sizes = [self._sizes[0] + self._sizes[1], 0]

    def anchor_texts(self, keys: list[str], pending: dict[str, dict[int, str]] | None = None) -> dict[str, str]:
        """The anchor text of each of keys (at most MAX_ANCHORS links each).
        pending: pages about to be recorded, {key: link_texts(its links)}:
        the text as it will be once they are, their links in place of their
        earlier versions' (what lets the indexer hand a batch to tantivy
        before recording its links)."""
        by_id = {signed64(id64(k)): k for k in keys}
        replaced = {signed64(id64(k)): links for k, links in (pending or {}).items()}
        texts: dict[int, list[str]] = {}
        for chunk in _chunks(list(by_id)):
            marks = ",".join("?" * len(chunk))
            for target, source, text in self.db.execute(
                    f"SELECT target, source, text FROM anchors WHERE target IN ({marks}) "  # noqa: S608
                    f"UNION ALL SELECT target, source, text FROM recent WHERE target IN ({marks})", chunk + chunk):
                got = texts.setdefault(target, [])
                if text and source not in replaced and len(got) < MAX_ANCHORS:
                    got.append(text)
        for source, links in replaced.items():
            for target, text in links.items():
                if text and target in by_id and target != source:
                    got = texts.setdefault(target, [])
                    if len(got) < MAX_ANCHORS:
                        got.append(text)
        return {by_id[t]: " ".join(v) for t, v in texts.items()}

    def anchor_text(self, key: str) -> str:
        return self.anchor_texts([key]).get(key, "")

    def stale(self, n: int) -> list[str]:
        """Up to n stale pages, those marked first first."""
        return [k for (k,) in self.db.execute(
            "SELECT docs.key FROM stale JOIN docs ON docs.id = stale.id ORDER BY stale.seq LIMIT ?", (n,))]

    def forget(self, keys: list[str]) -> None:
        """keys are written with their current anchor text: not stale."""
        self.db.executemany("DELETE FROM stale WHERE id = ?", [(signed64(id64(k)),) for k in keys])

    def pagerank_of(self, key: str) -> float:
        row = self.db.execute("SELECT score FROM pagerank WHERE id = ?", (signed64(id64(key)),)).fetchone()
        return row[0] if row else 0.0

    def commit(self) -> None:
        self.db.commit()

    def clear(self) -> None:
        for table in ("docs", "anchors", "recent", "stale", "pagerank"):
            self.db.execute(f"DELETE FROM {table}")  # noqa: S608 (fixed names)
        self._new_ranking()
        self.db.commit()
        self._sizes = [0, 0]

    def _new_ranking(self) -> None:
        """The pagerank table changed: readers load it again."""
        self.db.execute("INSERT INTO meta(name, value) VALUES ('pagerank', 1) "
                        "ON CONFLICT(name) DO UPDATE SET value = value + 1")

    def update_pagerank(self, damping: float = CHO_DAMPING) -> int:
        """PageRank [Cho §2, IR(P), the ranker's computation] over every link
        of the indexed pages, unfetched targets included (the web's graph, not
        the crawl's); scores of indexed pages kept, on Cho's scale (mean 1)."""
        links = np.array(self.db.execute("SELECT source, target FROM anchors UNION ALL "
                                         "SELECT source, target FROM recent").fetchall(),
                         dtype=np.int64).reshape(-1, 2)
        docs = np.array([i for (i,) in self.db.execute("SELECT id FROM docs")], dtype=np.int64)
        nodes, inverse = np.unique(np.concatenate([links[:, 0], links[:, 1], docs]), return_inverse=True)
        n = len(nodes)
        if not n:
            return 0
        m = len(links)
        adj = build_adjacency(inverse[:m], inverse[m:2 * m], n=n)
        scores = pagerank(TransitionMatrix(adj), damping).scores
        self.db.execute("DELETE FROM pagerank")
        self.db.executemany("INSERT INTO pagerank(id, score) VALUES (?, ?)",
                            zip(docs.tolist(), scores[inverse[2 * m:]].tolist()))
        self._new_ranking()
        self.db.commit()
        return n

    # -- the query server ---------------------------------------------------

    def pageranks(self, ids: np.ndarray) -> np.ndarray:
        """PageRank of each of the index's unsigned key ids (ids.id64), 0 for
        a page without one. The table is held in memory as sorted arrays (16
        bytes a page), loaded again when the indexer has ranked since: a
        query's candidates are then one binary search, not one SQL lookup each."""
        row = self.db.execute("SELECT value FROM meta WHERE name = 'pagerank'").fetchone()
        version, known, scores = self._ranks
        if row is None:
            return np.zeros(len(ids))
        if row[0] != version:
            # read after the version: a ranking that lands in between is read again next time
            rows = self.db.execute("SELECT id, score FROM pagerank ORDER BY id").fetchall()
            known = np.fromiter((i for i, _ in rows), np.int64, len(rows))
            scores = np.fromiter((x for _, x in rows), np.float64, len(rows))
            self._ranks = (row[0], known, scores)
        if not len(known):
            return np.zeros(len(ids))
        signed = np.asarray(ids, dtype=np.uint64).view(np.int64)   # as SQLite holds them (signed64)
        at = np.minimum(np.searchsorted(known, signed), len(known) - 1)
        return np.where(known[at] == signed, scores[at], 0.0)
