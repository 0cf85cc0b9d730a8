"""The stores with unusual input, against small local HTTP servers: a body
over DOWNLOAD_MAXSIZE, and duplicate content (revisit records).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlproj.stores.crawllog import log_files, read_lines
from tests.e2e import ROOT, stat
from tests.test_pipelines_e2e import warc_records

pytestmark = pytest.mark.e2e

# The servers here are on loopback and crawled directly (no proxy): the address
# guard lets loopback through for these crawls alone.
LOOPBACK = "127.0.0.1"


def test_body_over_download_maxsize_is_never_stored(redis_url, tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    big = 300_000

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/":
                body = b"<html><a href='/small'>s</a><a href='/big'>b</a><a href='/stream'>t</a></html>"
                self._send(200, body, "text/html")
            elif self.path == "/small":
                self._send(200, b"s" * 100, "text/plain")
            elif self.path == "/big":
                self._send(200, b"b" * big, "application/octet-stream")
            elif self.path == "/stream":  # no Content-Length: the size shows only as it comes
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                try:
                    for _ in range(big // 10_000):
                        self.wfile.write(b"t" * 10_000)
                except OSError:
                    pass
            else:
                self._send(404, b"no", "text/plain")

        def _send(self, status, body, ctype):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
        env.update(REDIS_URL=redis_url, CRAWL_ID="maxsize", CRAWL_DATA_DIR=str(tmp_path / "data"))
        cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={base}/",
               "-s", "DOWNLOAD_MAXSIZE=100000", "-s", "DOWNLOAD_WARNSIZE=0",
               "-s", "FRONTIER_DELAY_FACTOR=0", "-s", "RETRY_TIMES=0",
               "-s", f"ADDRESS_GUARD_ALLOW={LOOPBACK}"]
        run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
    finally:
        server.shutdown()
    recs = warc_records(tmp_path / "data" / "warc")
    assert sorted((u[len(base):], s) for u, s, _, _ in recs) == \
        [("/", 200), ("/robots.txt", 404), ("/small", 200)]
    lines = {ln.url[len(base):]: ln for ln in
             read_lines(log_files(tmp_path / "data" / "logs", "maxsize"))}
    for path in ("/big", "/stream"):
        assert lines[path].status == -5 and lines[path].size is None
    log = (tmp_path / "data" / "logs")
    assert "err=size-exceeded" in "".join(p.read_text() for p in log.iterdir())


def test_duplicate_content_is_written_as_a_revisit(redis_url, tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    same = b"<html><head><title>t</title></head><body>" + b"same words " * 200 + b"</body></html>"
    pages = {"/": b"<html><a href='/a'>a</a> <a href='/b'>b</a> <a href='/c'>c</a></html>",
             "/a": same, "/b": same, "/c": same.replace(b"same", b"diff")}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = pages.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
        env.update(REDIS_URL=redis_url, CRAWL_ID="revisit", CRAWL_DATA_DIR=str(tmp_path / "data"))
        cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={base}/",
               "-s", "FRONTIER_DELAY_FACTOR=0", "-s", "CONCURRENT_REQUESTS=1",
               "-s", f"ADDRESS_GUARD_ALLOW={LOOPBACK}"]
        run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
    finally:
        server.shutdown()
    kinds = {}
    with open(next((tmp_path / "data" / "warc").glob("*.warc.gz")), "rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            if rec.rec_type in ("response", "revisit"):
                kinds[rec.rec_headers.get_header("WARC-Target-URI")[len(base):]] = (
                    rec.rec_type, rec.rec_headers, rec.content_stream().read())
    assert kinds["/c"][0] == "response"  # other words: not a copy
    # the content-seen test (Mercator §3 step 4) finds the second of /a and /b
    # a copy of the first: a revisit record (WARC 1.1 §6.7.2) refers to it
    assert sorted((kinds["/a"][0], kinds["/b"][0])) == ["response", "revisit"]
    first, copy = ("/a", "/b") if kinds["/b"][0] == "revisit" else ("/b", "/a")
    assert kinds[first][2] == same
    h = kinds[copy][1]
    assert h.get_header("WARC-Profile") == \
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert h.get_header("WARC-Refers-To-Target-URI") == base + first
    assert h.get_header("WARC-Refers-To-Date") <= h.get_header("WARC-Date")
    assert h.get_header("WARC-Payload-Digest") == kinds[first][1].get_header("WARC-Payload-Digest")
    assert kinds[copy][2] == b""  # the payload is not stored twice
    assert stat(run.stderr, "contentseen/duplicates") == 1
