"""A small web of URL shapes that web archives key differently, served on
loopback as an HTTP proxy (as the simulated web is), with a request log.

Each page answers its request target exactly as it was sent (path and
query, percent-escapes as written), so every URL shape is a capture of its
own; copies of a page under other URLs make the content-seen test write
revisit records, and one original answers 500 before its 200.
"""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.loopback import ProxyWeb, QuietHandler

HOST = "shapes.test"
WWW2 = "www2.shapes.test"

# Shapes from the web archives' canonicalisation rules: a directory's
# trailing slash, '+' and %20 in a query, %7E, www2., a bare query name,
# a servlet session id in a path parameter, '//', upper case, escaped UTF-8.
SHAPES = [
    "/s1/", "/s1/p1.html", "/s1/p1.html?x=1+2&y=a%20b", "/%7Euser/home.html", "/q.html?b",
    "/a.html;jsessionid=0123456789ABCDEF0123456789ABCDEF", "/d//e.html", "/P.HTML?B=2&a=1",
    "/caf%C3%A9.html", "/sp%20ace.html", "/plus+sign.html", "/t.html?b=2&a=1&a=0",
]
MISSING = {"/s1/p1.html?x=1+2&y=a%20b"}        # archived as a 404
# Response heads as a server may send them: a reason phrase of its own,
# headers in an order and case of their own, a chunked body, Connection.
HEADS = {
    "/head.html": ("Fine Thanks", [("x-zeta", "1"), ("Content-Length", "95"), ("CONTENT-TYPE", "text/html"),
                                   ("X-Alpha", "2"), ("x-zeta", "3"), ("Connection", "keep-alive")]),
    "/chunked.html": ("OK", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"),
                             ("Connection", "keep-alive")]),
}
COPIES = [f"/copy/{i}.html" for i in range(6)]  # the content of /orig.html
FLAKY_COPIES = [f"/deep/copy{i}.html" for i in range(3)]  # the content of /flaky.html


def _page(title: str, links: list[str]) -> bytes:
    return (f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
            + "".join(f'<a href="{p}">{p}</a> ' for p in links) + "</body></html>").encode()


class ShapesWeb(ProxyWeb):
    def __init__(self):
        self.records: list[dict] = []
        self.flaky_served = 0
        self._lock = threading.Lock()
        web = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as servers answer crawlers

            def do_GET(self):
                t0 = time.time()
                parts = urlsplit(self.path)
                host = (parts.hostname or "").rstrip(".")
                target = parts.path + ("?" + parts.query if parts.query else "")
                status, body = web.answer(host, target)
                if target in HEADS:  # a head of its own: reason, order, case, chunks
                    reason, headers = HEADS[target]
                    self.send_response(status, reason)
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    if ("Transfer-Encoding", "chunked") in headers:
                        half = len(body) // 2
                        for chunk in (body[:half], body[half:], b""):
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    else:
                        self.wfile.write(body)
                else:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                with web._lock:
                    web.records.append({"t0": t0, "t1": time.time(), "host": host,
                                        "path": target, "status": status, "bytes": len(body)})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, host: str, target: str) -> tuple[int, bytes]:
        if host == WWW2 and target == "/w.html":
            return 200, _page("www2 page", [])
        # www2.shapes.test/robots.txt and shapes.test/robots.txt have one
        # SURT key (www2. is dropped): a replay cannot tell them apart, so
        # they answer alike
        if host not in (HOST, WWW2) or target == "/robots.txt" or host == WWW2:
            return 404, b"no robots.txt"
        if target == "/":
            return 200, _page("seed", SHAPES + list(HEADS) + [f"http://{WWW2}/w.html", "/orig.html",
                                                              "/flaky.html", "/hub.html"])
        if target in MISSING:
            return 404, f"<html>archived 404 of {target}</html>".encode()
        if target in SHAPES or target in HEADS:
            return 200, _page(f"shape {target}", [])
        if target == "/orig.html" or target in COPIES:
            return 200, _page("the original", [])
        if target == "/flaky.html" or target in FLAKY_COPIES:
            if target == "/flaky.html":
                with self._lock:
                    self.flaky_served += 1
                    if self.flaky_served == 1:
                        return 500, b"<html>try again</html>"
            return 200, _page("flaky", [])
        if target == "/hub.html":
            return 200, _page("hub", ["/hub2.html"])
        if target == "/hub2.html":
            return 200, _page("hub2", COPIES + ["/hub3.html"])
        if target == "/hub3.html":
            return 200, _page("hub3", FLAKY_COPIES)
        return 404, f"<html>no page at {target}</html>".encode()
