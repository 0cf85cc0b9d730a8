"""Small HTTP servers on loopback for tests: a quiet handler that answers in
one call, and a server run on a thread of its own."""

from __future__ import annotations

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
