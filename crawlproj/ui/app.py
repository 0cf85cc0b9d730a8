"""The web app: one Twisted Web resource tree, a route per page.

Twisted Web serves it: Twisted is already the crawler's own dependency
(through Scrapy), it runs in the same reactor as everything else crawlproj
does, and a handful of routes need no framework. The app is a root resource
with routes added by name (`App.route`), so that more pages (a crawl
dashboard, a status API, metrics) are added beside search without touching
it; crawlproj/ui/search.py holds the search routes.
"""

from __future__ import annotations

import json
from importlib.resources import files

from twisted.web import resource


def template(name: str) -> str:
    """A template shipped in the package, read with importlib.resources (so from an egg too)."""
    return files("crawlproj.ui").joinpath("templates", name).read_text(encoding="utf-8")


def send_json(request, status: int, body: dict) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json; charset=utf-8")
    request.setHeader(b"cache-control", b"no-store")
    return json.dumps(body, ensure_ascii=False).encode()


def send_html(request, status: int, page: str) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"text/html; charset=utf-8")
    # the page runs no script at all: any that got into a title or a query stays text
    request.setHeader(b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'")
    request.setHeader(b"x-content-type-options", b"nosniff")
    return page.encode()


class NotFound(resource.Resource):
    isLeaf = True

    def render(self, request):
        return send_json(request, 404, {"error": "no such page"})


class App(resource.Resource):
    """The root: '/' and every named route."""

    def __init__(self):
        super().__init__()
        self.home: resource.Resource | None = None

    def route(self, path: str, res: resource.Resource) -> None:
        """Serve res at /path ('' = the home page, '/'); 'api/search' nests."""
        if path == "":
            self.home = res
            return
        parent = self
        parts = path.split("/")
        for part in parts[:-1]:
            child = parent.children.get(part.encode())
            if child is None:
                child = resource.Resource()
                parent.putChild(part.encode(), child)
            parent = child
        parent.putChild(parts[-1].encode(), res)

    def getChild(self, name, request):
        if name == b"" and self.home is not None and not request.postpath:
            return self.home
        return NotFound()
