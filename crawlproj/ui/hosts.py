"""The hosts routes: which hosts hold the crawl back, and why.

    GET /hosts[?crawl=ID]           the hosts page; its script (static/hosts.js)
                                    reads /api/hosts, sorts and searches there
    GET /host?name=HOST[&crawl=ID]  one host's page (static/host.js, /api/host)
    GET /api/hosts[?crawl=ID][&sort=queue|wait|errors|fetched|backoff|host]
                  [&q=TEXT][&n=N][&offset=K]
                                    crawlproj/monitor/hosts.py's list
    GET /api/host?name=HOST[&crawl=ID]
                                    one host's story (hosts.host)
         -> 400 {"error"} for a bad sort, number or host name; 404 for a
            crawl id that names no crawl, or a host the crawl does not know;
            503 while Redis cannot be read

The pages run this app's scripts only (the dashboard's Content-Security-Policy)
and put every value from the crawl in as text: a host name with markup is
shown as the characters it is.
"""

from __future__ import annotations

from twisted.web import resource

from crawlproj.monitor.hosts import MAX_ROWS
from crawlproj.ui.app import send_json
from crawlproj.ui.dashboard import Page, StatusService, _answer, _crawl, arg, number


class ApiHosts(resource.Resource):
    isLeaf = True

    def __init__(self, service: StatusService):
        super().__init__()
        self.service = service

    def render_GET(self, request):
        try:
            n = number(request, "n", 100, int, 1)
            offset = number(request, "offset", 0, int)
        except ValueError as exc:
            return send_json(request, 400, {"error": str(exc)})
        return _answer(request, self.service.hosts, _crawl(request, self.service),
                       arg(request, "sort") or "queue", arg(request, "q")[:200],
                       min(n, MAX_ROWS), offset)


class ApiHost(resource.Resource):
    isLeaf = True

    def __init__(self, service: StatusService):
        super().__init__()
        self.service = service

    def render_GET(self, request):
        return _answer(request, self.service.host, _crawl(request, self.service),
                       arg(request, "name"))


def add_hosts(app, service: StatusService) -> None:
    app.route("hosts", Page("hosts.html"))
    app.route("host", Page("host.html"))
    app.route("api/hosts", ApiHosts(service))
    app.route("api/host", ApiHost(service))
