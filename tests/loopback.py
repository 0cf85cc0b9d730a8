"""Small HTTP servers on loopback for tests: a quiet handler that answers in
one call, and a server run on a thread of its own."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.0, one request per connection; no log lines on stderr."""

    def reply(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "text/html", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def close(server) -> None:
    server.shutdown()
    server.server_close()


class ProxyWeb:
    """A web of hosts served on loopback as an HTTP proxy, with the interface
    of crawlproj.simweb.testing.SimWebServer that tests/e2e.py uses. A
    subclass sets server (serving on self.thread), port, records (its request
    log, a list of dicts) and _lock."""

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(http_proxy=self.proxy_url, HTTP_PROXY=self.proxy_url, no_proxy="", NO_PROXY="")
        return env

    def settle_log(self) -> list[dict]:
        with self._lock:
            return list(self.records)

    def read_log(self) -> list[dict]:
        return self.settle_log()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
