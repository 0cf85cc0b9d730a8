"""Similarity to a query: Cho, Garcia-Molina & Page 1998 §2 (IS(P), IS'(P))
and §7 (the hot queue), with the WebCrawler's use of anchor text
(Pinkerton 1994, real-time search mode).

A URL not fetched yet has no text; what predicts its text is the link that
led to it: its anchor text, the words around the link, and the URL itself
(Cho §3: "we may be able to use the text that anchors the URL u as a
predictor of the text that P might contain"). The link context
(crawlproj/prioritizers/linkcontext.py) carries those from the page to the request.

Order, lower score first:

1. the hot queue: URLs whose anchor text or URL holds every word of the
   query (Cho §7, Fig. 4);
2. URLs within SIMILARITY_HOT_HOPS links of a hot page, a page that has the
   query in its title or at least SIMILARITY_HOT_COUNT times in its text
   (Cho §7, Fig. 5: "within 3 links from a hot page"; 0 turns it off);
3. the rest;

and within each class by IS'(u), highest first, then first discovered. IS'
is the inner product of the query with the link's words weighted by IDF
(§2), the IDF estimated from the pages seen so far (§2: "we have to estimate
the idf factors"). The counts behind it are crawl-wide, in one Redis hash
(:attr:`crawlproj.redis.keyspace.Keyspace.similarity_df`): every worker scores
with the same estimate, whatever share of the pages it fetched.

A URL's place is the best any of its links has given it so far (BEST_LINK:
the frontier keeps the lower score of a queued URL's links): a URL first
found under an anchor that says nothing, a hub page's link to it, moves up
when another page links it with the query in its anchor. The queued request
stays the first link's (its depth, Referer and distance to a hot page).
"""

from __future__ import annotations

import logging
import math
import re
import time

from crawlproj.prioritizers.basic import Prioritizer
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.signals import page_parsed

logger = logging.getLogger(__name__)

# A word is a run of letters and digits, as the crawl's index cuts text
# (tantivy's default tokenizer; crawlproj/search/searcher.py): an identifier
# such as mod_deflate or ssl_howto is two words, in an anchor, a URL or a
# page, as the real-time session's own query on the index reads them.
_WORD = re.compile(r"[^\W_]+")

# Longest query, in characters and in distinct words: a query is a few words
# (the WebCrawler's averaged 1.5); a page of text is no query, and every word
# costs a count per page in Redis.
MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 32

# Weights of the link's three texts in IS'(u): the anchor describes the
# target, the text around it less closely; a URL's words are as telling as
# an anchor's when they are words at all.
ANCHOR_WEIGHT, AROUND_WEIGHT, URL_WEIGHT = 1.0, 0.5, 1.0

# Scores: class x CLASS + (IS'_CAP - IS') x UNIT + discovery stamp, so a
# class outranks any IS', and IS' any stamp. The stamp counts seconds from
# EPOCH (under UNIT for the next 30 years), so that a score keeps it to
# STAMP_STEP: a double resolves 61 us below 3e11, where time.time() itself
# in a score of 2e13 resolved 4 ms, and a page's links, scored within a few
# milliseconds, tied and were served in the order of their fingerprints
# instead of the order they were found in (Cho Fig. 4's queues are FIFO).
CLASS, UNIT, IS_CAP = 1e11, 1e9, 99.0
HOT, NEAR, REST = 0, 1, 2
EPOCH = 1.7e9  # 2023-11-14, seconds since 1970
# Each stamp a worker gives is at least this much after its last one: a
# page's links keep the order they were found in within the score's
# resolution, and the stamps run at most a page's links x STAMP_STEP ahead
# of the clock.
STAMP_STEP = 1e-4


class SimilarityQueryError(ValueError):
    """SIMILARITY_QUERY is missing or unusable; the message is one line."""


def words(text: str) -> list[str]:
    """Lower-case words: runs of letters and digits (any script)."""
    return _WORD.findall(text.lower()) if text else []


def query_terms(query) -> list[str]:
    """The distinct words of a query, in order; SimilarityQueryError when
    there are none or the query is too long."""
    query = "" if query is None else str(query)
    if len(query) > MAX_QUERY_CHARS:
        raise SimilarityQueryError(f"SIMILARITY_QUERY is {len(query)} characters; at most "
                                   f"{MAX_QUERY_CHARS}")
    terms = list(dict.fromkeys(words(query)))
    if not terms:
        raise SimilarityQueryError("FRONTIER_PRIORITIZER similarity needs SIMILARITY_QUERY, "
                                   "the words to crawl toward (-s SIMILARITY_QUERY='...')")
    if len(terms) > MAX_QUERY_TERMS:
        raise SimilarityQueryError(f"SIMILARITY_QUERY has {len(terms)} distinct words; at "
                                   f"most {MAX_QUERY_TERMS}")
    return terms


class DocumentFrequencies:
    """How many pages were seen, and in how many of them each query word
    occurs: the IDF estimate of Cho §2. ``redis``/``key`` None: this process's
    counts alone."""

    def __init__(self, terms: list[str], redis=None, key: str | None = None):
        self.terms = terms
        self.redis, self.key = redis, key
        self.pages = 0
        self.df = dict.fromkeys(terms, 0)

    def add(self, present: set[str]) -> None:
        """Count one page holding the query words in ``present``."""
        if self.redis is None:
            self.pages += 1
            for t in present:
                self.df[t] += 1
            return
        pipe = self.redis.pipeline(transaction=False)
        pipe.hincrby(self.key, PAGES_FIELD, 1)
        for t in present:
            pipe.hincrby(self.key, t, 1)
        pipe.hmget(self.key, self.terms)
        replies = pipe.execute()
        self.pages = int(replies[0])
        self.df = {t: int(c or 0) for t, c in zip(self.terms, replies[-1])}

    def idf(self, term: str) -> float:
        """log((N + 1) / (df + 1)) + 1: Cho's 1/df, on the usual log scale and
        smoothed, so a word not seen yet (df 0) has a finite, highest weight
        and a word on every page keeps a weight of about 1."""
        return math.log((self.pages + 1) / (self.df.get(term, 0) + 1)) + 1.0


# The field of the page count in the crawl's counts hash: no word has a NUL.
PAGES_FIELD = "\0pages"


class SimilarityOrder(Prioritizer):
    """FRONTIER_PRIORITIZER = "similarity": hot queue first, then by IS'."""

    # A URL is as good as the best link to it found so far: Cho's hot queue
    # holds the URLs "seen in an anchor mentioning" the query, whichever of
    # their links that was, and a URL first found far from a hot page may be
    # found again near one (Cho §7, Figs. 4-5).
    BEST_LINK = True

    def __init__(self, query, hot_hops: int = 3, hot_count: int = 5,
                 frequencies: DocumentFrequencies | None = None):
        self.terms = query_terms(query)
        self.query = set(self.terms)
        self.hot_hops = hot_hops
        self.hot_count = hot_count
        self.frequencies = frequencies or DocumentFrequencies(self.terms)
        self._stamp = 0.0

    @classmethod
    def check_settings(cls, settings) -> list[str]:
        """The query's words; PrioritizerError (one line) when it has none or
        is too long. The crawl command calls it before anything starts."""
        from crawlproj.prioritizers import PrioritizerError

        try:
            return query_terms(settings.get("SIMILARITY_QUERY"))
        except SimilarityQueryError as exc:
            raise PrioritizerError(str(exc)) from None

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        terms = cls.check_settings(s)
        key = Keyspace(s.get("CRAWL_ID"), 1).similarity_df
        order = cls(" ".join(terms), s.getint("SIMILARITY_HOT_HOPS"),
                    s.getint("SIMILARITY_HOT_COUNT"),
                    DocumentFrequencies(terms, get_redis(s), key))
        crawler.signals.connect(order.page_parsed, signal=page_parsed)
        return order

    # -- pages seen: the IDF estimate, and which pages are hot -----------------

    def page_parsed(self, response, title: str, text: str) -> None:
        """Count the page for the IDF estimate, and mark it hot (its links'
        distance to a hot page is 1) or not (one more than its own)."""
        title_words = set(words(title))
        counts: dict[str, int] = dict.fromkeys(self.terms, 0)
        for w in words(text):
            if w in counts:
                counts[w] += 1
        present = {t for t in self.terms if counts[t] or t in title_words}
        self.frequencies.add(present)
        if self.query <= title_words or all(c >= self.hot_count for c in counts.values()):
            response.meta["hot_hops"] = 0

    # -- URLs ---------------------------------------------------------------------

    def estimate(self, anchor: str, around: str, url: str) -> tuple[float, bool]:
        """IS'(u) of a link, and whether it belongs in the hot queue."""
        a, c, u = words(anchor), words(around), words(url)
        sim = 0.0
        for t in self.terms:
            tf = ANCHOR_WEIGHT * a.count(t) + AROUND_WEIGHT * c.count(t) + URL_WEIGHT * u.count(t)
            if tf:
                sim += tf * self.frequencies.idf(t)
        return sim, self.query <= set(a) | set(u)

    def score(self, request) -> float:
        ctx = request.meta.get("link_context")
        if not ctx:
            again = request.meta.get("frontier_score")
            if again is not None:
                return again  # a retry or redirect keeps its place
            anchor, around, parent_hops = "", "", None
        else:
            anchor, around, parent_hops = (tuple(ctx[3:6]) + ("", "", None))[:3]
        sim, hot = self.estimate(anchor or "", around or "", request.url)
        hops = None if parent_hops is None else parent_hops + 1
        if hops is not None and hops > self.hot_hops:
            hops = None  # too far for the rule: nothing to carry
        if hops is not None:
            request.meta["hot_hops"] = hops  # stored with the URL: its page's distance
        if hot:
            cls = HOT
        elif hops is not None and hops <= self.hot_hops:
            cls = NEAR
        else:
            cls = REST
        return cls * CLASS + (IS_CAP - min(sim, IS_CAP)) * UNIT + self.stamp()

    def stamp(self) -> float:
        """When the link was found, in seconds from EPOCH: the clock, but at
        least STAMP_STEP after this worker's last stamp, so that links found
        one after the other keep that order in their scores."""
        self._stamp = max(time.time() - EPOCH, self._stamp + STAMP_STEP)
        return self._stamp
