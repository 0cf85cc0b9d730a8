"""Queries: BM25 over title, text and anchor text, combined with PageRank.

Pinkerton's query server ranked by a vector-space weight summed over the
query's words; BM25 is that weighting's modern form (term frequency
saturated, document length normalised), computed by tantivy per field and
summed with field boosts (SEARCH_BOOST_TITLE, SEARCH_BOOST_ANCHORS; text 1).
Words are ANDed by default (Pinkerton §"Observations": precision, not recall,
is what suffers with short queries), so a two-word query asks for both.

PageRank [Cho §2] enters as a prior on the top SEARCH_CANDIDATES by BM25:

    score = bm25 * (1 + SEARCH_PAGERANK_WEIGHT * ln(1 + PR))

multiplicative, so that a page matching nothing stays at nothing and a
page's importance scales its relevance rather than replacing it; the log
keeps PageRank's heavy tail (a few pages hold hundreds of times the mean)
from burying the best textual match under the most linked page. PR is on
Cho's scale (mean 1): an average page gets x1.14 at the default weight 0.2,
a hub of PR 100 x1.92 (docs/search.md: a larger weight lets hubs whose text
merely contains the words outrank the page a query names).

The first page shows at most SEARCH_PER_HOST results of one host (the others
move down, after the first page), as the WebCrawler's "every server
represented"; per_host=0 asks for all.
"""

from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass, field

import numpy as np
import tantivy

from crawlproj.errors import CrawlprojError
from crawlproj.search.index import SEARCH_FIELDS, PageIndex

SNIPPET_CHARS = 200
SNIPPET_WINDOW = 5 * SNIPPET_CHARS
# tantivy's query syntax characters, and its operators: what a query that
# does not parse loses when it is searched as plain words
_SYNTAX = re.compile(r'[+\-:()\[\]{}^"~*!\\<>=\'`/]')
_OPERATORS = {"AND", "OR", "NOT", "IN", "TO"}


def _reason(exc: Exception) -> str:
    return str(exc).split(":", 1)[0].strip() or "cannot be read"


class QueryError(CrawlprojError, ValueError):
    """A query that cannot be run: the message says why, for the user."""


@dataclass
class Hit:
    url: str
    title: str
    snippet: str      # HTML: the text escaped, the query's terms in <mark>
    score: float
    fetched_at: float
    host: str = ""


@dataclass
class Results:
    query: str
    total: int
    took_ms: float
    results: list[Hit] = field(default_factory=list)
    notice: str | None = None   # set when the query was read otherwise than written


@dataclass
class Ranking:
    boost_title: float = 3.0
    boost_anchors: float = 2.0
    pagerank_weight: float = 0.2
    candidates: int = 200
    per_host: int = 2
    max_query_chars: int = 1000
    max_results: int = 1000

    @classmethod
    def from_settings(cls, s) -> Ranking:
        return cls(s.getfloat("SEARCH_BOOST_TITLE"), s.getfloat("SEARCH_BOOST_ANCHORS"),
                   s.getfloat("SEARCH_PAGERANK_WEIGHT"), s.getint("SEARCH_CANDIDATES"),
                   s.getint("SEARCH_PER_HOST"), s.getint("SEARCH_MAX_QUERY_CHARS"),
                   s.getint("SEARCH_MAX_RESULTS"))


def highlight(snippet) -> str:
    """The snippet's fragment, HTML-escaped, with its matched ranges in <mark>."""
    raw = snippet.fragment().encode()
    out, at = [], 0
    for r in sorted(snippet.highlighted(), key=lambda r: r.start):
        if r.start < at:
            continue
        out.append(html.escape(raw[at:r.start].decode(errors="replace")))
        out.append("<mark>" + html.escape(raw[r.start:r.end].decode(errors="replace")) + "</mark>")
        at = r.end
    out.append(html.escape(raw[at:].decode(errors="replace")))
    return "".join(out)


def lead(text: str, chars: int = SNIPPET_CHARS) -> str:
    if len(text) <= chars:
        return html.escape(text)
    cut = text.rfind(" ", 0, chars)
    return html.escape(text[:cut if cut > chars // 2 else chars]) + " …"


def _words_of(q: str) -> list[str]:
    """The query's words, lower-cased, as tantivy's default tokenizer cuts
    them (runs of letters and digits); field names (`title:`) are not words."""
    return sorted({w for w, colon in re.findall(r"([^\W_]+)(:?)", q.lower())
                   if not colon and w.upper() not in _OPERATORS})


def _first_of(words: list[str], text: str) -> int:
    """Where the first of the words stands in the text as a word, or -1."""
    low, best = text.lower(), -1
    for w in words:
        at = low.find(w)
        while at >= 0 and (best < 0 or at < best):
            end = at + len(w)
            if (at == 0 or not low[at - 1].isalnum()) and (end >= len(low) or not low[end].isalnum()):
                best = at
                break
            at = low.find(w, at + 1)
    return best


def snippet(snippets, text: str, words: list[str]) -> str:
    """The best fragment of the text for the query, its terms in <mark>; the
    text's beginning when none of the query's words is in it. The fragment
    is sought in the SNIPPET_WINDOW characters from just before the first of
    the query's words rather than in the whole page: tantivy tokenizes all
    it is given, and a page's text is often 50 times a snippet."""
    at = _first_of(words, text)
    if at < 0:
        return lead(text)
    start = max(0, at - SNIPPET_CHARS // 2)
    snip = snippets.snippet_from_doc(tantivy.Document(text=text[start:start + SNIPPET_WINDOW]))
    return highlight(snip) if snip.highlighted() else lead(text)


def diversify(ranked: list, first_page: int, per_host: int) -> list:
    """At most per_host results of a host among the first `first_page`; those
    left out follow, in their order."""
    if per_host <= 0:
        return ranked
    head, later, count = [], [], {}
    for item in ranked:
        host = item[1]
        if len(head) < first_page and count.get(host, 0) < per_host:
            head.append(item)
            count[host] = count.get(host, 0) + 1
        else:
            later.append(item)
    return head + later


class Searcher:
    def __init__(self, index: PageIndex, ranking: Ranking | None = None):
        self.index = index
        self.ranking = ranking or Ranking()

    def check(self, q: str) -> str:
        q = (q or "").strip()
        if not q:
            raise QueryError("empty query: type some words")
        if len(q) > self.ranking.max_query_chars:
            raise QueryError(f"query too long ({len(q):,} characters; at most "
                             f"{self.ranking.max_query_chars:,})")
        return q

    def parse(self, q: str):
        """(query, notice): the query as written; if its syntax is wrong, its
        words alone, with a notice saying so."""
        try:
            return self._parse(q), None
        except ValueError as exc:
            words = " ".join(w for w in _SYNTAX.sub(" ", q).split() if w not in _OPERATORS)
            notice = f"query syntax error ({_reason(exc)}): searched for the words alone"
            if not words:
                raise QueryError(f"query syntax error ({_reason(exc)}) and no words to search "
                                 "for") from None
            try:
                return self._parse(words), notice
            except ValueError:
                raise QueryError(f"query syntax error ({_reason(exc)})") from None

    def _parse(self, q: str):
        r = self.ranking
        return self.index.index.parse_query(
            q, list(SEARCH_FIELDS), field_boosts={"title": r.boost_title, "anchors": r.boost_anchors},
            conjunction_by_default=True)

    def search(self, q: str, n: int = 10, offset: int = 0, per_host: int | None = None) -> Results:
        t0 = time.perf_counter()
        q = self.check(q)
        r = self.ranking
        if n < 1 or n > 100:
            raise QueryError("n must be between 1 and 100")
        if offset < 0 or offset + n > r.max_results:
            raise QueryError(f"offset must be between 0 and {r.max_results - n}")
        per_host = r.per_host if per_host is None else per_host
        query, notice = self.parse(q)
        searcher = self.index.searcher()
        k = min(r.max_results, max(r.candidates, offset + n + r.candidates // 2))
        try:
            found = searcher.search(query, k, count=True)
        except ValueError as exc:
            raise QueryError(f"query cannot be run: {exc}") from None
        hits = found.hits
        ranked = []
        if hits:
            addrs = [addr for _, addr in hits]
            key_ids = searcher.fast_field_values("key_id", addrs)
            host_ids = searcher.fast_field_values("host_id", addrs)
            bm25 = np.fromiter((score for score, _ in hits), np.float64, len(hits))
            known = np.fromiter((k is not None for k in key_ids), bool, len(hits))
            pr = np.zeros(len(hits))
            pr[known] = self.index.anchors.pageranks(
                np.fromiter((k for k in key_ids if k is not None), np.uint64, int(known.sum())))
            final = bm25 * (1.0 + r.pagerank_weight * np.log1p(pr))
            # stable: equal scores keep BM25's order
            scores = final.tolist()
            ranked = [(scores[i], host_ids[i], addrs[i]) for i in np.argsort(-final, kind="stable").tolist()]
        page = diversify(ranked, n, per_host)[offset:offset + n]
        results = []
        if page:
            snippets = tantivy.SnippetGenerator.create(searcher, query, self.index.index.schema, "text")
            snippets.set_max_num_chars(SNIPPET_CHARS)
            words = _words_of(q)
            for score, _, addr in page:
                d = searcher.doc(addr)
                text = d["text"][0] if d["text"] else ""
                results.append(Hit(url=d["url"][0], title=d["title"][0] if d["title"] else "",
                                   snippet=snippet(snippets, text, words), score=round(score, 4),
                                   fetched_at=d["fetched_at"][0], host=d["host"][0]))
        return Results(q, found.count, round((time.perf_counter() - t0) * 1e3, 3), results, notice)
