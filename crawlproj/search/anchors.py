"""The link side of the index: anchor texts of the links to each page, the
fetch time of every indexed page, and PageRank over those links.

The text of the links that point to a page describes it in other people's
words, and often better than its own text (the WebCrawler's contemporaries
indexed little else, Pinkerton §"Observations"); it goes into the page's
`anchors` field. Links are known only once their source is fetched, often
after their target was indexed: such a target is marked stale and written
again, with its grown anchor text, by the indexer (Indexer.refresh).

One SQLite file beside the tantivy index; only the indexer writes it (WAL,
so the query server reads PageRank while it writes).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from crawlproj.ranker.pagerank import CHO_DAMPING, TransitionMatrix, build_adjacency, pagerank
from crawlproj.search.ids import id64, signed64

FILE = "anchors.sqlite3"
# anchor texts kept per link target; the most a popular page needs for its words
MAX_ANCHORS = 200

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs(key TEXT PRIMARY KEY, fetched_at REAL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS anchors(target TEXT, source TEXT, text TEXT,
                                   PRIMARY KEY(target, source)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS anchors_by_source ON anchors(source);
CREATE TABLE IF NOT EXISTS stale(key TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pagerank(id INTEGER PRIMARY KEY, score REAL);
"""


class AnchorStore:
    def __init__(self, directory: Path, readonly: bool = False):
        path = Path(directory) / FILE
        if readonly:
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0,
                                      check_same_thread=False)
        else:
            self.db = sqlite3.connect(path, timeout=5.0, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # -- the indexer --------------------------------------------------------

    def fetched_at(self, key: str) -> float | None:
        row = self.db.execute("SELECT fetched_at FROM docs WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def record(self, key: str, fetched_at: float, outlinks: list[tuple[str, str]]) -> None:
        """A page is (re)indexed: its fetch time, and its links in place of
        the ones its earlier version had; the indexed pages they point to
        are stale (their anchor text changed)."""
        from crawlproj.search.document import document_key

        db = self.db
        db.execute("INSERT OR REPLACE INTO docs(key, fetched_at) VALUES (?, ?)", (key, fetched_at))
        db.execute("DELETE FROM stale WHERE key = ?", (key,))
        old = {t for (t,) in db.execute("SELECT target FROM anchors WHERE source = ?", (key,))}
        db.execute("DELETE FROM anchors WHERE source = ?", (key,))
        texts: dict[str, list[str]] = {}
        for url, anchor in outlinks:
            target = document_key(url)
            if target != key:
                texts.setdefault(target, []).append(anchor.strip())
        db.executemany("INSERT INTO anchors(target, source, text) VALUES (?, ?, ?)",
                       [(t, key, " ".join(a for a in v if a)) for t, v in texts.items()])
        changed = [(t,) for t in old | texts.keys()]
        db.executemany("INSERT OR IGNORE INTO stale(key) SELECT key FROM docs WHERE key = ?", changed)

    def anchor_text(self, key: str) -> str:
        rows = self.db.execute("SELECT text FROM anchors WHERE target = ? LIMIT ?",
                               (key, MAX_ANCHORS)).fetchall()
        return " ".join(t for (t,) in rows if t)

    def stale(self, n: int) -> list[str]:
        return [k for (k,) in self.db.execute("SELECT key FROM stale LIMIT ?", (n,))]

    def forget(self, keys: list[str]) -> None:
        self.db.executemany("DELETE FROM stale WHERE key = ?", [(k,) for k in keys])

    def pagerank_of(self, key: str) -> float:
        row = self.db.execute("SELECT score FROM pagerank WHERE id = ?", (signed64(id64(key)),)).fetchone()
        return row[0] if row else 0.0

    def commit(self) -> None:
        self.db.commit()

    def clear(self) -> None:
        for table in ("docs", "anchors", "stale", "pagerank"):
            self.db.execute(f"DELETE FROM {table}")  # noqa: S608 (fixed names)
        self.db.commit()

    def update_pagerank(self, damping: float = CHO_DAMPING) -> int:
        """PageRank [Cho §2, IR(P), the ranker's computation] over every link
        of the indexed pages, unfetched targets included (the web's graph, not
        the crawl's); scores of indexed pages kept, on Cho's scale (mean 1)."""
        ids: dict[str, int] = {}
        src, dst = [], []
        for s, t in self.db.execute("SELECT source, target FROM anchors"):
            src.append(ids.setdefault(s, len(ids)))
            dst.append(ids.setdefault(t, len(ids)))
        for (k,) in self.db.execute("SELECT key FROM docs"):
            ids.setdefault(k, len(ids))
        n = len(ids)
        if not n:
            return 0
        adj = build_adjacency(np.asarray(src, np.int64), np.asarray(dst, np.int64), n=n)
        scores = pagerank(TransitionMatrix(adj), damping).scores
        self.db.execute("DELETE FROM pagerank")
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS ranked(key TEXT PRIMARY KEY, score REAL)")
        self.db.execute("DELETE FROM ranked")
        self.db.executemany("INSERT INTO ranked VALUES (?, ?)",
                            ((k, float(scores[i])) for k, i in ids.items()))
        self.db.executemany("INSERT INTO pagerank(id, score) VALUES (?, ?)", (
            (signed64(id64(k)), s) for k, s in self.db.execute(
                "SELECT ranked.key, ranked.score FROM ranked JOIN docs ON docs.key = ranked.key"
            ).fetchall()))
        self.db.commit()
        return n

    # -- the query server ---------------------------------------------------

    def pageranks(self, ids: list[int]) -> dict[int, float]:
        """PageRank by the index's unsigned key ids (index.id64)."""
        out: dict[int, float] = {}
        for i in range(0, len(ids), 500):
            chunk = [signed64(u) for u in ids[i:i + 500]]
            marks = ",".join("?" * len(chunk))
            out.update((u & 0xFFFFFFFFFFFFFFFF, s) for u, s in self.db.execute(
                f"SELECT id, score FROM pagerank WHERE id IN ({marks})", chunk))  # noqa: S608
        return out
