"""The indexer: the one process of a crawl that writes its index.

Workers hand documents over through Redis (handover.HandOver); whichever
process holds the crawl's indexer lock takes them in batches, writes them,
commits, and trims them off the hand-over list. The lock is the ranker's kind
(crawlproj/ranker/loop.py): renewed on every tick while its holder lives,
taken over by another process once its TTL runs out. tantivy's own lock file
in the index directory keeps a second writer out should two ever disagree.

Pinkerton's WebCrawler committed its index "every few hundred documents" to
protect it from crashes; here documents are trimmed off the hand-over list
only once a commit holds them, so a crash loses nothing. While the index is
searched (a reader touched its stamp in the last SEARCHED_WINDOW seconds) every
tick commits, which keeps a page's time to searchable within 2 s; while
nobody searches, a commit waits until INDEX_BATCH documents or
INDEX_IDLE_COMMIT seconds are uncommitted. Each commit makes a segment, and
tantivy's merges of many small segments cost several times the indexing
itself (docs/search.md); Elasticsearch's search-idle shards skip their
periodic refresh for the same reason.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from crawlproj.ranker.loop import RankerLock
from crawlproj.search.anchors import link_texts
from crawlproj.search.document import Document, document_key
from crawlproj.search.handover import HandOver
from crawlproj.search.index import PageIndex

logger = logging.getLogger(__name__)

# A query within this many seconds makes the index "searched" (the stamp's
# mtime, crawlproj/search/index.py): every tick commits.
SEARCHED_WINDOW = 30.0


def _rank(doc: Document, key: str) -> tuple[bool, float]:
    """Which of two pages holds a key: the key's own page, then the latest."""
    return doc.own_key == key, doc.fetched_at


class IndexerLock(RankerLock):
    """At most one indexer per crawl (Keyspace.indexer_lock)."""

    def __init__(self, redis, keyspace, ttl: float = 10.0):
        super().__init__(redis, keyspace, ttl)
        self.key = keyspace.indexer_lock


@dataclass
class Batch:
    taken: int = 0       # documents read off the hand-over list
    written: int = 0     # ... written (the others were older than the indexed version)
    refreshed: int = 0   # indexed pages written again for their new anchor text
    committed: int = 0   # documents read off the list that a commit now holds


class Indexer:
    def __init__(self, index: PageIndex, handover: HandOver | None, batch: int = 1000,
                 pagerank_interval: float = 60.0, damping: float = 0.9, refresh_share: float = 0.25,
                 idle_commit: float = 0.0):
        self.index = index
        self.handover = handover
        self.batch = batch
        self.idle_commit = idle_commit
        # read off the hand-over list and written, not committed: trimmed off
        # the list at the commit
        self.uncommitted = 0
        self._since = 0.0
        self._head: bytes | None = None   # ... the first of them
        # ... their keys, and what was written under each (the index's
        # searcher sees the last commit only)
        self._written: dict[str, Document] = {}
        # Stale pages written again per batch, as a share of the pages the batch
        # brings (of a full batch when it brings none): new pages first (they
        # are not searchable at all yet), and a small batch, which is what keeps
        # a page's time to searchable short, stays small; anchor text catches
        # up as the crawl's pace allows.
        self.refresh_share = refresh_share
        self.refresh = max(1, int(batch * refresh_share))
        self.pagerank_interval = pagerank_interval
        self.damping = damping
        self._last_rank = time.monotonic()
        self._unranked = 0

    def write(self, docs: list[Document]) -> tuple[int, int]:
        """put() and commit."""
        done = self.put(docs)
        self.commit()
        return done

    def put(self, docs: list[Document]) -> tuple[int, int]:
        """Write documents, then the stale pages' new anchor text,
        uncommitted. Returns (written, refreshed).

        The latest fetch of each page counts. A key's document is the page
        that is its own canonical URL if there is one, else the latest page
        that names it (RFC 6596: the canonical page is the one to show; the
        others are its copies). A noindex page's document is a removal of
        its own key (and of the canonical URL's, if it stood for it there);
        its fetch time and links are recorded like any page's, so that an
        older fetch handed over late does not bring it back."""
        pages: dict[str, Document] = {}
        for doc in docs:
            own = doc.own_key
            seen = pages.get(own)
            if seen is None or doc.fetched_at >= seen.fetched_at:
                pages[own] = doc
        latest: dict[str, Document] = {}
        for own, doc in pages.items():
            key = own if doc.noindex else doc.key
            seen = latest.get(key)
            if seen is None or _rank(doc, key) >= _rank(seen, key):
                latest[key] = doc
        anchors = self.index.anchors
        before = anchors.fetched_at(list(latest) + [d.key for d in latest.values() if d.noindex])
        fresh = self._fresh(latest, before)
        links = {key: link_texts(doc.outlinks) for key, doc in fresh.items()}
        # the batch's anchor text as it will be once its links are recorded
        # (links between its pages count): tantivy's thread indexes the pages
        # while this one writes the links
        texts = anchors.anchor_texts([k for k, d in fresh.items() if not d.noindex], pending=links)
        for key, doc in fresh.items():
            if doc.noindex:
                if key in before:
                    self.index.delete(key)
            else:
                self.index.put(doc, texts.get(key, ""), new=key not in before)
        self._unrepresent([d for d in fresh.values() if d.noindex and d.key != d.own_key],
                          before, latest)
        anchors.record([(key, doc.fetched_at, links[key], key not in before) for key, doc in fresh.items()])
        anchors.forget(list(fresh))
        budget = self.refresh if not docs else min(self.refresh, max(1, int(len(docs) * self.refresh_share)))
        # a page written since the last commit stays stale until it: the
        # index's stored copy, which a refresh writes again, is the older one
        stale = [key for key in anchors.stale(budget) if key not in self._written]
        texts = anchors.anchor_texts(stale)
        refreshed = 0
        for key, doc in self.index.stored(stale).items():
            self.index.put(doc, texts.get(key, ""))
            refreshed += 1
        anchors.forget(stale)
        self._written.update(fresh)
        self._unranked += len(fresh)
        return len(fresh), refreshed

    def _fresh(self, latest: dict[str, Document], before: dict[str, float]) -> dict[str, Document]:
        """The documents of latest that replace what the index has: newer
        ones, and a canonical page over a copy whatever their times. The
        stored document is read where that decides (a copy newer than what
        is stored, a canonical page older): seldom, pages with canonical
        links apart."""
        fresh, ask = {}, []
        for key, doc in latest.items():
            t = before.get(key)
            if t is None:
                fresh[key] = doc
            elif (doc.fetched_at >= t) != (doc.own_key == key):
                ask.append(key)
            elif doc.fetched_at >= t:
                fresh[key] = doc
        if ask:
            stored = self._stored(ask)
            for key in ask:
                doc, old = latest[key], stored.get(key)
                mine = doc.own_key == key
                # no document, but a fetch time: its own page said noindex
                theirs = old is None or document_key(old.url) == key
                if (mine and not theirs) or (mine == theirs and doc.fetched_at >= before[key]):
                    fresh[key] = doc
        return fresh

    def _stored(self, keys: list[str]) -> dict[str, Document]:
        """What the index holds for keys, written since the last commit or
        before it."""
        out = self.index.stored([k for k in keys if k not in self._written])
        out.update((k, self._written[k]) for k in keys if k in self._written)
        return out

    def _unrepresent(self, gone: list[Document], before: dict[str, float],
                     latest: dict[str, Document]) -> None:
        """noindex pages that name another canonical URL: that URL's document,
        where it is theirs (they were its latest copy), goes too."""
        keys = [d.key for d in gone if d.key in before and d.key not in latest]
        if not keys:
            return
        stored = self._stored(keys)
        dropped = []
        for doc in gone:
            old = stored.get(doc.key)
            if old is not None and document_key(old.url) == doc.own_key:
                self.index.delete(doc.key)
                dropped.append(doc.key)
        # no page stands for the URL now: the next that names it may
        self.index.anchors.drop(dropped)

    def commit(self) -> int:
        """Commit; trim what the commit holds off the hand-over list. Returns
        how many documents read off the list it holds."""
        self.index.commit()
        self._written.clear()
        committed, self.uncommitted = self.uncommitted, 0
        if committed and self._same_list():
            self.handover.done(committed)
        return committed

    def _same_list(self) -> bool:
        """Whether the hand-over list still starts with the first uncommitted
        document: `scrapy crawls delete`, or a Redis without persistence
        restarted, empties it under the indexer, and what it holds then is
        new (read from the head, not after the documents that went)."""
        if self.handover.head() == self._head:
            return True
        logger.warning("Indexer: the hand-over list was emptied under the indexer; reading it from its head")
        return False

    def commit_due(self) -> bool:
        return self.uncommitted >= self.batch or time.monotonic() - self._since >= self.idle_commit \
            or self.index.searched_within(SEARCHED_WINDOW)

    def step(self, commit: bool = False) -> Batch:
        """One batch from the hand-over list into the index, committed when
        due (or asked): see the module's docstring."""
        if self.uncommitted and not self._same_list():
            self.uncommitted = 0
        packed = self.handover.peek(self.batch, after=self.uncommitted)
        docs = []
        for data in packed:
            try:
                docs.append(Document.unpack(data))
            except Exception as exc:  # a corrupt entry must not block the list
                logger.error("Indexer: dropping an unreadable document (%s)", exc)
        written, refreshed = self.put(docs) if docs else (0, 0)
        if packed and not self.uncommitted:
            self._since, self._head = time.monotonic(), packed[0]
        self.uncommitted += len(packed)
        committed = 0
        if self.uncommitted and (commit or self.commit_due()):
            committed = self.commit()
        if not self.uncommitted:
            # a PageRank run commits the anchor store, with the stale pages it
            # forgot: only once tantivy holds their new anchor text
            self.maybe_rank()
        return Batch(len(packed), written, refreshed, committed)

    def maybe_rank(self, force: bool = False) -> None:
        if self._unranked and (force or time.monotonic() - self._last_rank >= self.pagerank_interval):
            n = self.index.anchors.update_pagerank(self.damping)
            self._last_rank, self._unranked = time.monotonic(), 0
            logger.info("Indexer: PageRank over %d pages", n)
