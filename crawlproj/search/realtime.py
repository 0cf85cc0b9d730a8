"""The WebCrawler's real-time search mode (Pinkerton 1994, "Real-time search
mode"): a crawl toward a user's query.

    scrapy crawl web -a query="..." [-a seeds=...] [-a max_pages=N]

"To find an initial list of similar documents, the WebCrawler runs the
user's query against its index [...] any unexplored links from those
documents are followed. As new documents are retrieved, they are added to
the index, and the query is re-run." Here:

- the start: the index's best results for the query (the crawl's index,
  CRAWL_DATA_DIR/index/<CRAWL_ID>), or the seeds when given;
- the links: ranked by the similarity prioritizer (crawlproj/prioritizers/
  similarity.py, Cho's hot queue and IS' over anchor text, text around the
  link and URL), the WebCrawler's "similarity of the anchor text to the
  user's query";
- the pages: handed over to the index like any crawl's, so each is
  searchable as soon as the indexer commits it;
- the end: after ``max_pages`` fetched pages, or when the results stop
  improving: no page entered the query's first result page while
  REALTIME_STABLE_PAGES more pages entered the index (Pinkerton: "until the
  WebCrawler has found enough similar documents"). Entering, not moving: the
  pages already there shift as links to them bring anchor text, which is
  no better result. Counting indexed pages, not fetched ones, keeps the
  indexer's lag (a commit every INDEX_TICK) from passing for a lack of
  improvement.

A query session has a frontier of its own: crawl ``<CRAWL_ID>.q-<digest of
the query's words>`` (its record, prioritizer ``similarity``, and its DUE),
while its pages go through CRAWL_ID's hand-over to CRAWL_ID's indexer and
index (INDEX_CRAWL_ID): written by that crawl's indexer wherever it runs, or
by this worker when none does. So a session never reorders the crawl it
searches, two queries never share IDF counts, and the same query run again
goes on from the links its last run left queued.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.defer import deferred_from_coro

from crawlproj.errors import CrawlprojError
from crawlproj.prioritizers.similarity import SimilarityQueryError, query_terms
from crawlproj.search.index import IndexUnavailable, PageIndex, index_dir
from crawlproj.search.searcher import QueryError, Ranking, Searcher

logger = logging.getLogger(__name__)

# The first result page: what "the results" of a query are, for the start
# (Pinkerton: "the most relevant documents are noted"), for telling whether
# they improve, and for what is printed at the end.
RESULTS = 10
# The indexer's tick in a session (seconds): see Session.configure.
REALTIME_INDEX_TICK = 0.1

# English function words: they occur on nearly every page, so a link's or a
# result's match on them says nothing about the query (a word's weight falls
# with its frequency in the collection, Pinkerton's and Cho's idf). A query is
# searched and crawled toward by its other words.
STOP_WORDS = frozenset("""
a about after all also an and any are as at be because been but by can could did do
does for from had has have he her his how i if in into is it its just more most my
no not of on one or our out she so some such than that the their them then there
these they this those to up was we were what when where which who why will with
would you your
""".split())

# finish reasons of a query session
MAX_PAGES = "max_pages"
RESULTS_STABLE = "results_stable"


class RealtimeError(CrawlprojError):
    """A query session cannot start: the message is one line, for the user."""


def query_words(query) -> list[str]:
    """The words a session searches and crawls toward: the query's distinct
    words (similarity's rules: at most 1000 characters, 32 words) without its
    stop words. RealtimeError when there is none."""
    if query is None or not str(query).strip():
        raise RealtimeError("-a query is empty: give the words to search for (-a query='...')")
    try:
        terms = query_terms(query)
    except SimilarityQueryError as exc:
        if len(str(query)) > 1000 or "distinct words" in str(exc):
            raise RealtimeError(str(exc).replace("SIMILARITY_QUERY", "-a query")) from None
        raise RealtimeError(f"-a query={query[:60]!r} has no words, only punctuation: give "
                            "the words to search for") from None
    kept = [t for t in terms if t not in STOP_WORDS]
    if not kept:
        raise RealtimeError(f"-a query={query[:60]!r} has only stop words ({', '.join(terms)}): "
                            "they are on every page; give the words that say what you look for")
    return kept


def max_pages_arg(value) -> int | None:
    """-a max_pages: a whole number of 1 or more, or None when not given."""
    if value is None:
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if n < 1:
        raise RealtimeError(f"-a max_pages must be a whole number of 1 or more, not {str(value)[:40]!r}")
    return n


def session_crawl_id(crawl_id: str, words: list[str]) -> str:
    """The crawl id of a query's session within crawl ``crawl_id``: the same
    for the same words in any order or case."""
    digest = hashlib.sha1(" ".join(sorted(words)).encode()).hexdigest()[:12]
    return f"{crawl_id}.q-{digest}"


def _lay(settings, name: str, value) -> None:
    """Set name over the settings module and -s alike (the session needs its
    values), and over CRAWL_ID's priority, whose value it derives from."""
    set_at = [p for p in (settings.getpriority(name), settings.getpriority("CRAWL_ID"))
              if p is not None]
    settings.set(name, value, priority=max([SETTINGS_PRIORITIES["spider"], *set_at]))


@dataclass
class Session:
    """One query's session: its words, its budget, where it reads and writes."""

    query: str
    words: list[str]
    max_pages: int | None
    index_directory: Path
    crawl_id: str
    stable_pages: int

    @property
    def search_text(self) -> str:
        return " ".join(self.words)

    @classmethod
    def configure(cls, settings, query, max_pages=None) -> Session:
        """Check the arguments and lay the session's settings: its own crawl
        id, the index of the crawl it searches, the similarity prioritizer
        toward its words. RealtimeError when an argument is unusable."""
        words = query_words(query)
        pages = max_pages_arg(max_pages)
        base = settings.get("CRAWL_ID")
        directory = index_dir(settings, base)
        session = cls(str(query), words, pages, directory, session_crawl_id(base, words),
                      settings.getint("REALTIME_STABLE_PAGES"))
        _lay(settings, "INDEX_CRAWL_ID", base)
        _lay(settings, "FRONTIER_PRIORITIZER", "similarity")
        _lay(settings, "SIMILARITY_QUERY", session.search_text)
        _lay(settings, "CRAWL_ID", session.crawl_id)
        # The session re-runs its query as the index grows ("as new documents
        # are retrieved, they are added to the index, and the query is
        # re-run"): a commit every INDEX_TICK seconds is the pace of that. A
        # session of a few hundred pages wants it quick more than cheap (a
        # crawl ticks every second to spare tantivy's merges); -s INDEX_TICK
        # still wins. Every tick commits: the session's own queries
        # search the index, and it does not wait for the first of them.
        settings.set("INDEX_TICK", REALTIME_INDEX_TICK, priority="spider")
        settings.set("INDEX_IDLE_COMMIT", 0.0, priority="spider")
        # Indexed in the worker's threads when the session takes the indexer
        # lock: a process of its own takes about a second to start, and pages
        # indexed late stop the session late (docs/search.md, measured).
        settings.set("INDEX_PROCESS", False, priority="spider")
        return session

    def searcher(self, settings) -> Searcher:
        """A reader of the index (IndexUnavailable when there is none yet)."""
        return Searcher(PageIndex(self.index_directory), Ranking.from_settings(settings))

    def results(self, settings, n: int = RESULTS):
        """The query's results now: a list of Hits, [] when there is no index."""
        try:
            return self.searcher(settings).search(self.search_text, n=n).results
        except IndexUnavailable:
            return []

    def start_urls(self, settings) -> list[str]:
        """The index's best results for the query: where the session starts
        when it has no seeds."""
        return [hit.url for hit in self.results(settings)]

    def require_start(self, settings, seeds: list[str]) -> list[str]:
        """The seeds, or else the index's best results; RealtimeError when
        there are neither."""
        if seeds:
            return seeds
        urls = self.start_urls(settings)
        if not urls:
            raise RealtimeError(
                f"-a query={self.query[:60]!r} has nowhere to start: the index at "
                f"{self.index_directory} has no page matching it (or there is no index); "
                "give -a seeds=... to start from")
        return urls

    def print_results(self, settings, out=None) -> None:
        """The query's results as the session leaves them: URL, title, score."""
        out = out or sys.stdout
        hits = self.results(settings)
        print(f"results for {self.search_text!r}: {len(hits)}", file=out)
        for rank, hit in enumerate(hits, 1):
            print(f"{rank:>3}  {hit.score:>9.4f}  {hit.url}  {hit.title}", file=out)
        out.flush()


class RealtimeSearch:
    """The session's stopping rule, in the worker (a Scrapy extension): after
    each fetched page, stop at max_pages; else re-run the query on the index
    when it has grown, and stop once no page entered its first result page
    while REALTIME_STABLE_PAGES more pages were indexed."""

    def __init__(self, crawler, session: Session):
        self.crawler = crawler
        self.session = session
        self.pages = 0
        self.searcher: Searcher | None = None
        self.indexed = -1       # documents in the index at the last query
        self.top: set[str] = set()  # every URL the first result page has shown
        self.since = 0          # documents in the index when it last changed
        self.closing = False

    @classmethod
    def from_crawler(cls, crawler):
        session = getattr(crawler.spider, "realtime", None)
        if session is None:
            raise NotConfigured
        ext = cls(crawler, session)
        crawler.signals.connect(ext.item_scraped, signal=signals.item_scraped)
        return ext

    def item_scraped(self, item, response, spider=None):
        self.pages += 1
        stats = self.crawler.stats
        stats.set_value("realtime/pages", self.pages)
        if self.closing:
            return
        s = self.session
        if s.max_pages is not None and self.pages >= s.max_pages:
            self._close(MAX_PAGES)
            return
        if s.stable_pages and self._stable():
            self._close(RESULTS_STABLE)

    def _stable(self) -> bool:
        """Whether no page entered the first result page over the last
        stable_pages indexed pages; the query runs again only when the index
        has grown since the last run."""
        if self.searcher is None:
            try:
                self.searcher = self.session.searcher(self.crawler.settings)
            except IndexUnavailable:
                return False  # nothing committed yet
        indexed = self.searcher.index.searcher().num_docs
        if indexed == self.indexed:
            return False
        self.indexed = indexed
        try:
            hits = self.searcher.search(self.session.search_text, n=RESULTS).results
        except QueryError:
            return False
        new = {h.url for h in hits} - self.top
        if new:
            self.top |= new
            self.since = indexed
            self.crawler.stats.inc_value("realtime/results_changed")
            return False
        return indexed - self.since >= self.session.stable_pages

    def _close(self, reason: str) -> None:
        self.closing = True
        logger.info("Real-time search %r stops (%s) after %d pages", self.session.search_text,
                    reason, self.pages)
        d = deferred_from_coro(self.crawler.engine.close_spider_async(reason=reason))
        d.addErrback(lambda f: logger.error("could not close the spider: %s", f.getErrorMessage()))
