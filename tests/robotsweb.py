"""A small web of hosts whose robots.txt misbehaves, served on loopback as an
HTTP proxy (as the simulated web is), with a request log in the simulated
web's format (crawlproj/simweb/checks.py reads it).

Each host answers robots.txt with a sequence of responses (the last one
repeats) and serves a few pages linking to each other.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.loopback import ProxyWeb

CHUNK = 64 * 1024


class Host:
    def __init__(self, robots: list[tuple[int, bytes, dict]], pages: dict[str, list[str]],
                 latency: float = 0.01):
        self.robots = robots        # (status, body, headers) per robots.txt request
        self.pages = pages          # path -> the paths it links to
        self.latency = latency
        self.robots_served = 0


def page_body(host: str, path: str, links: list[str]) -> bytes:
    # a page of its own on each host: the crawl's content-seen test drops
    # the links of a document it has seen on another host
    return (f"<html><body><h1>{host}{path}</h1>" + "".join(f'<a href="{p}">{p}</a> ' for p in links)
            + "</body></html>").encode()


class RobotsWeb(ProxyWeb):
    def __init__(self, hosts: dict[str, Host]):
        self.hosts = hosts
        self.records: list[dict] = []
        self._lock = threading.Lock()
        web = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                t0 = time.time()
                parts = urlsplit(self.path)
                host_name, path = (parts.hostname or "").rstrip("."), parts.path or "/"
                status, body, headers = web.answer(host_name, path)
                host = web.hosts.get(host_name)
                if host is not None:
                    time.sleep(host.latency)
                sent = 0
                try:
                    self.send_response(status)
                    for k, v in {"Content-Type": "text/html" if path != "/robots.txt"
                                 else "text/plain", "Content-Length": str(len(body)),
                                 **headers}.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for i in range(0, len(body), CHUNK):
                        self.wfile.write(body[i:i + CHUNK])
                        sent += min(CHUNK, len(body) - i)
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True
                with web._lock:
                    web.records.append({"t0": t0, "t1": time.time(), "host": host_name,
                                        "path": path, "status": status, "bytes": sent})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, host_name: str, path: str) -> tuple[int, bytes, dict]:
        host = self.hosts.get(host_name)
        if host is None:
            return 502, b"unknown host", {}
        if path == "/robots.txt":
            with self._lock:
                i = min(host.robots_served, len(host.robots) - 1)
                host.robots_served += 1
            return host.robots[i]
        if path in host.pages:
            return 200, page_body(host_name, path, host.pages[path]), {}
        if path.startswith("/hop"):  # robots.txt redirect chains: /hopN -> /hop(N-1) ... -> /hop0
            n = int(path[4:] or 0)
            if n == 0:
                return 200, b"User-agent: *\nDisallow: /private/\n", {}
            return 301, b"", {"Location": f"/hop{n - 1}"}
        return 404, b"not found", {}
