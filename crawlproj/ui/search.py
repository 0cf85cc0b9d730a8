"""The search routes: GET /api/search (JSON) and the search page at /.

    GET /api/search?q=...&n=10&offset=0[&per_host=0]
    -> {"query", "total", "took_ms", "results": [{"url", "title", "snippet",
        "score", "fetched_at"}]}   (+ "notice" when the query was read as words)
    -> 400 {"error"} for a query that cannot be run, 503 {"error"} when the
       index cannot be opened

`snippet` is HTML (the page's text escaped, the query's terms in <mark>);
every other string is plain text. The page at / is rendered on the server
from templates/search.html, every value escaped, and runs no script.
"""

from __future__ import annotations

import html
import time
from string import Template
from urllib.parse import urlencode

from twisted.web import resource

from crawlproj.search.index import IndexUnavailable, PageIndex
from crawlproj.search.searcher import QueryError, Ranking, Searcher
from crawlproj.ui.app import send_html, send_json, template


class SearchService:
    """The index, opened on first use and again after it could not be."""

    def __init__(self, directory, ranking: Ranking):
        self.directory = directory
        self.ranking = ranking
        self._searcher: Searcher | None = None

    def searcher(self) -> Searcher:
        if self._searcher is None:
            self._searcher = Searcher(PageIndex(self.directory), self.ranking)
        return self._searcher

    def search(self, q: str, n: int, offset: int, per_host: int | None):
        try:
            return self.searcher().search(q, n, offset, per_host)
        except IndexUnavailable:
            self._searcher = None
            raise


def _arg(request, name: str, default: str = "") -> str:
    values = request.args.get(name.encode())
    if not values:
        return default
    return values[0].decode("utf-8", errors="replace")


def _int(request, name: str, default: int) -> int:
    text = _arg(request, name, str(default))
    try:
        return int(text)
    except ValueError:
        raise QueryError(f"{name} must be a whole number, not {text[:40]!r}") from None


def _run(service: SearchService, request):
    per_host = _arg(request, "per_host")
    return service.search(_arg(request, "q"), _int(request, "n", 10), _int(request, "offset", 0),
                          _int(request, "per_host", 0) if per_host else None)


class ApiSearch(resource.Resource):
    isLeaf = True

    def __init__(self, service: SearchService):
        super().__init__()
        self.service = service

    def render_GET(self, request):
        try:
            res = _run(self.service, request)
        except QueryError as exc:
            return send_json(request, 400, {"error": str(exc)})
        except IndexUnavailable as exc:
            return send_json(request, 503, {"error": str(exc)})
        body = {"query": res.query, "total": res.total, "took_ms": res.took_ms,
                "results": [{"url": h.url, "title": h.title, "snippet": h.snippet, "score": h.score,
                             "fetched_at": h.fetched_at} for h in res.results]}
        if res.notice:
            body["notice"] = res.notice
        return send_json(request, 200, body)


def ago(fetched_at: float, now: float) -> str:
    minutes = max(0, int((now - fetched_at) // 60))
    if minutes < 1:
        return "fetched less than a minute ago"
    if minutes < 120:
        return f"fetched {minutes} minute{'s' if minutes != 1 else ''} ago"
    hours = minutes // 60
    if hours < 48:
        return f"fetched {hours} hours ago"
    return f"fetched {hours // 24} days ago"


class SearchPage(resource.Resource):
    isLeaf = True

    def __init__(self, service: SearchService):
        super().__init__()
        self.service = service
        self.page = Template(template("search.html"))
        self.result = Template(template("result.html"))

    def render_GET(self, request):
        q = _arg(request, "q")
        status, message, body, paging = 200, "", "", ""
        if q.strip():
            try:
                res = _run(self.service, request)
            except QueryError as exc:
                status, message = 400, str(exc)
            except IndexUnavailable as exc:
                status, message = 503, str(exc)
            else:
                body, paging, message = self.results(res, _int(request, "n", 10),
                                                     _int(request, "offset", 0))
        return send_html(request, status, self.page.substitute(
            title=html.escape(f"{q} - crawlproj search" if q.strip() else "crawlproj search"),
            q=html.escape(q, quote=True), message=message and f'<p class="message">{html.escape(message)}</p>',
            results=body, paging=paging))

    def results(self, res, n: int, offset: int):
        now = time.time()
        if not res.results:
            summary = f"No pages match <b>{html.escape(res.query)}</b>."
        else:
            summary = (f"Results {offset + 1}-{offset + len(res.results)} of {res.total:,} "
                       f"for <b>{html.escape(res.query)}</b> ({res.took_ms:.1f} ms)")
        if res.notice:
            summary += f'<br><span class="notice">{html.escape(res.notice)}</span>'
        items = "".join(self.result.substitute(
            url=html.escape(h.url, quote=True), title=html.escape(h.title or h.url),
            shown_url=html.escape(h.url), snippet=h.snippet, ago=ago(h.fetched_at, now),
            score=f"{h.score:.2f}") for h in res.results)
        links = []
        if offset > 0:
            links.append(self._link(res.query, n, max(0, offset - n), "previous", "prev"))
        if offset + n < min(res.total, self.service.ranking.max_results):
            links.append(self._link(res.query, n, offset + n, "next", "next"))
        return (f'<p class="summary">{summary}</p><ol class="results">{items}</ol>',
                f'<nav class="paging">{" ".join(links)}</nav>', "")

    @staticmethod
    def _link(q: str, n: int, offset: int, label: str, rel: str) -> str:
        href = "/?" + urlencode({"q": q, "n": n, "offset": offset})
        return f'<a rel="{rel}" href="{html.escape(href, quote=True)}">{label}</a>'


def add_search(app, service: SearchService) -> None:
    app.route("", SearchPage(service))
    app.route("api/search", ApiSearch(service))
