"""The full-text index of one crawl: tantivy, under CRAWL_DATA_DIR/index/<crawl>.

tantivy (a Rust inverted index with BM25 scoring, the engine of Quickwit and
ParadeDB, through its official Python binding) was measured against SQLite's
FTS5 on this machine: docs/search.md has the figures and the choice.

Fields: `key` (the canonical URL, raw: the upsert's term), `url`, `host` (raw:
`host:h0001.example`), `title`, `text`, `anchors` (the anchor texts of links
to the page, not stored: AnchorStore has them), `fetched_at`. Title, text and
anchors are tokenized (Unicode words, lower-cased) with positions, so quoted
phrases work. One process writes (tantivy's lock file in the directory, and
the indexer's Redis lock before it); any number read, and see a commit within
tantivy's reload poll (about 0.5 s).

A reader's searches touch the file `searched` in the directory (at most every
STAMP_EVERY seconds): the indexer commits every tick while the index is
searched, and less often while it is not (crawlproj/search/indexer.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import tantivy

from crawlproj.errors import CrawlprojError
from crawlproj.search.anchors import AnchorStore
from crawlproj.search.document import Document, document_key
from crawlproj.search.ids import id64
from crawlproj.stores.common import data_dir, private_dir, safe_name

SEARCH_FIELDS = ("title", "text", "anchors")
TANTIVY_META = "meta.json"
SEARCHED_STAMP = "searched"
STAMP_EVERY = 5.0  # seconds between two touches of the stamp by one reader


class IndexUnavailable(CrawlprojError):
    """The index cannot be opened or written: the message says where and why."""


def index_dir(settings, crawl_id: str | None = None) -> Path:
    """INDEX_DIR; unset, CRAWL_DATA_DIR/index/<crawl>."""
    base = settings.get("INDEX_DIR")
    return Path(base) if base else data_dir(settings) / "index" / safe_name(
        crawl_id or settings.get("CRAWL_ID"))


def schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("key", stored=True, tokenizer_name="raw")
    sb.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("host", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("title", stored=True)
    sb.add_text_field("text", stored=True)
    sb.add_text_field("anchors", stored=False)
    sb.add_float_field("fetched_at", stored=True)
    # 64-bit ids of the key and the host as fast (columnar) fields: ranking
    # reads them for every candidate without loading its stored document
    sb.add_unsigned_field("key_id", fast=True)
    sb.add_unsigned_field("host_id", fast=True)
    return sb.build()



class PageIndex:
    """The tantivy index and its anchor store, opened to read or to write."""

    def __init__(self, directory: Path, write: bool = False, heap_bytes: int = 128_000_000):
        self.directory = Path(directory)
        self.writer = None
        self._meta_stamp = None
        self._meta_path = str(self.directory / TANTIVY_META)
        self._stamp_path = str(self.directory / SEARCHED_STAMP)
        self._stamped = -STAMP_EVERY
        try:
            if write:
                private_dir(self.directory)
            elif not (self.directory / TANTIVY_META).exists():
                raise IndexUnavailable(f"no index at {self.directory} (a crawl with INDEX_ENABLED "
                                       "makes one; `scrapy index --rebuild` makes one from the WARC files)")
            self.index = tantivy.Index(schema(), path=str(self.directory), reuse=True)
        except IndexUnavailable:
            raise
        except (ValueError, OSError) as exc:
            raise IndexUnavailable(f"the index at {self.directory} cannot be opened ({exc}); "
                                   "`scrapy index --rebuild` rebuilds it from the WARC files") from None
        try:
            self.anchors = AnchorStore(self.directory, readonly=not write)
        except Exception as exc:  # sqlite3.Error, OSError
            raise IndexUnavailable(f"the anchor store of the index at {self.directory} cannot be "
                                   f"opened ({exc}); `scrapy index --rebuild` rebuilds it") from None
        if write:
            try:
                self.writer = self.index.writer(heap_size=heap_bytes, num_threads=1)
            except ValueError as exc:
                self.anchors.close()
                raise IndexUnavailable(f"the index at {self.directory} is being written by another "
                                       f"process ({exc})") from None

    # -- writing --------------------------------------------------------------

    def put(self, doc: Document, anchors: str | None = None, new: bool = False) -> None:
        """Add or replace the document of doc.key (new: it has none yet)."""
        key, host = doc.key, doc.host
        if not new:
            self.writer.delete_documents_by_term("key", key)
        d = tantivy.Document(
            key=key, url=doc.url, host=host, title=doc.title, text=doc.text,
            anchors=self.anchors.anchor_text(key) if anchors is None else anchors,
            fetched_at=float(doc.fetched_at))
        # typed explicitly: a keyword argument over 2**63 would be taken for a float
        d.add_unsigned("key_id", id64(key))
        d.add_unsigned("host_id", id64(host))
        self.writer.add_document(d)

    def delete(self, key: str) -> None:
        """Remove the document of key (a noindex page), uncommitted."""
        self.writer.delete_documents_by_term("key", key)

    def stored(self, keys: list[str]) -> dict[str, Document]:
        """The documents of keys as the index has them (outlinks not kept)."""
        if not keys:
            return {}
        searcher = self.index.searcher()
        query = tantivy.Query.term_set_query(self.index.schema, "key", list(keys))
        out = {}
        for _, addr in searcher.search(query, len(keys)).hits:
            d = searcher.doc(addr)
            key, url = d["key"][0], d["url"][0]
            # a copy of a canonical page: its document keeps the key it has
            canonical = key if key != document_key(url) else ""
            out[key] = Document(url=url, title=d["title"][0] if d["title"] else "",
                                text=d["text"][0] if d["text"] else "", fetched_at=d["fetched_at"][0],
                                canonical=canonical)
        return out

    def commit(self) -> None:
        # the anchor store first: should the process die between the two, the
        # batch is written again (it is trimmed off the hand-over list only
        # after this) and finds its pages recorded, so it replaces rather than
        # adds them; the other way round it would add them a second time. (The
        # stale pages it was writing again keep their old anchor text until
        # a link to them changes again.)
        self.anchors.commit()
        self.writer.commit()
        self.index.reload()

    def clear(self) -> None:
        self.writer.delete_all_documents()
        self.writer.commit()
        self.anchors.clear()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.wait_merging_threads()  # consumes the writer: its lock is released
            self.writer = None
        self.anchors.close()

    def searched_within(self, seconds: float) -> bool:
        """Whether a reader searched the index in the last `seconds`."""
        try:
            return time.time() - os.stat(self._stamp_path).st_mtime < seconds
        except OSError:
            return False

    # -- reading --------------------------------------------------------------

    def searcher(self):
        """A searcher of the latest commit: a commit rewrites meta.json, and a
        reader that sees it changed reloads at once rather than at tantivy's
        next poll (up to 0.5 s later), which a page's 2 s to searchable needs."""
        if self.writer is None:
            self._stamp()
            try:
                stamp = os.stat(self._meta_path).st_mtime_ns
            except OSError:
                stamp = None
            if stamp != self._meta_stamp:
                self._meta_stamp = stamp
                self.index.reload()
        return self.index.searcher()

    def _stamp(self) -> None:
        now = time.monotonic()
        if now - self._stamped < STAMP_EVERY:
            return
        self._stamped = now
        try:
            try:
                os.utime(self._stamp_path)
            except FileNotFoundError:
                open(self._stamp_path, "a").close()
        except OSError:
            pass  # a directory this reader may not write: the indexer keeps its idle pace

    def num_docs(self) -> int:
        return self.index.searcher().num_docs
