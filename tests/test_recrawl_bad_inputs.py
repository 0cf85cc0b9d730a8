"""Continuous crawling of a site that sends bad input (docs/recrawl.md, "The
live crawl"): a Last-Modified in the future or unparsable, an ETag that
changes on every fetch, a page that changes on every fetch, a page that turns
404, a page that starts to redirect. Each is handled as documented, none
stops the crawl or starves the other pages; and a misspelt RECRAWL_POLICY is
refused in one line.

A real `scrapy crawl web` worker, a real Redis-protocol server, HTTP to a
small server on loopback (let through by ADDRESS_GUARD_ALLOW).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import redis

from crawlproj.keyspace import Keyspace
from crawlproj.stores.warc import NOT_MODIFIED_PROFILE
from crawlproj.urls import host_of
from tests.loopback import QuietHandler, close, serve
from tests.test_bad_inputs import one_line, scrapy

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("/static", "/future-lm", "/bad-lm", "/etag-every", "/change-every", "/turns-404",
         "/moves", "/moved-here")
STATIC_ETAG = '"static-1"'


class Site(QuietHandler):
    hits: Counter = Counter()
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            self.hits[self.path] += 1
            n = self.hits[self.path]
        path = self.path
        if path == "/robots.txt":
            return self.reply(404)
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)
            return self.reply(200, f"<html><body>{links}</body></html>".encode(),
                              {"ETag": '"index"'})
        page = f"<html><body><p>{path}</p></body></html>"
        headers = {"ETag": f'"{path[1:]}"'}
        if path == "/future-lm":
            headers["Last-Modified"] = "Fri, 01 Jan 2100 00:00:00 GMT"
        elif path == "/bad-lm":
            headers["Last-Modified"] = "yesterday, around noon"
        elif path == "/etag-every":
            headers["ETag"] = f'"e{n}"'
        elif path == "/change-every":
            page = f"<html><body><p>version {n}</p></body></html>"
            headers["ETag"] = f'"v{n}"'
        elif path == "/turns-404" and n > 1:
            return self.reply(404, b"gone")
        elif path == "/moves" and n > 1:
            return self.reply(301, b"", {"Location": "/moved-here"})
        if self.headers.get("If-None-Match") == headers["ETag"]:
            return self.reply(304, b"", {"ETag": headers["ETag"]})
        return self.reply(200, page.encode(), headers)


def warc_revisits(root: Path) -> list[tuple[str, str]]:
    """(target URI, profile) of every revisit record in the WARC files under root."""
    from warcio.archiveiterator import ArchiveIterator
    out = []
    for path in root.rglob("*.warc.gz"):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "revisit":
                    out.append((rec.rec_headers.get_header("WARC-Target-URI"),
                                rec.rec_headers.get_header("WARC-Profile")))
    return out


@pytest.mark.e2e
def test_bad_input_pages_are_handled_and_starve_no_other_page(redis_url, tmp_path):
    Site.hits = Counter()
    server = serve(ThreadingHTTPServer(("127.0.0.1", 0), Site))
    try:
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        env = {k: v for k, v in os.environ.items() if k not in ("http_proxy", "HTTP_PROXY")}
        env.update(REDIS_URL=redis_url, CRAWL_ID="rcbad", CRAWL_DATA_DIR=str(tmp_path / "data"))
        cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={origin}/"]
        for k, v in {"ADDRESS_GUARD_ALLOW": "127.0.0.1", "CRAWL_SCOPE": "host",
                     "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0.02, "RETRY_TIMES": 0,
                     "RECRAWL_ENABLED": True, "RECRAWL_POLICY": "uniform", "RECRAWL_BUDGET": 20,
                     "RECRAWL_MIN_INTERVAL": 0.3, "RECRAWL_MAX_INTERVAL": 1,
                     "RECRAWL_PLAN_INTERVAL": 0.5}.items():
            cmd += ["-s", f"{k}={v}"]
        with open(tmp_path / "worker.log", "wb") as log:
            worker = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 120
            while min(Site.hits[p] for p in ("/static", "/etag-every", "/change-every",
                                             "/future-lm", "/bad-lm", "/moved-here")) < 4:
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                assert time.monotonic() < deadline, dict(Site.hits)
                time.sleep(0.2)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        text = (tmp_path / "worker.log").read_text()
        assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
        # a page gone or redirecting leaves the schedule after one more fetch
        assert Site.hits["/turns-404"] == 2 and Site.hits["/moves"] == 2, dict(Site.hits)
        r = redis.Redis.from_url(redis_url)
        ks = Keyspace.open(r, "rcbad")
        host = host_of(origin + "/")
        queue = ks.recrawl_queue(ks.partition_of(host), host)
        assert r.zcard(queue) == len(PAGES) + 1 - 2  # the index, less the two gone
        assert "'recrawl/gone': 2" in text
        # the others are fetched again and again; /static comes back 304 to
        # its conditional GET, the pages whose ETag changes never do
        assert "'recrawl/not_modified'" in text
        # each 304 is in the WARC as a revisit record, server-not-modified
        revisits = warc_revisits(tmp_path / "data")
        paths = {uri[len(origin):] for uri, _ in revisits}
        # the pages with a stable ETag; never those whose ETag or content changes
        assert "/static" in paths and paths <= {"/static", "/future-lm", "/bad-lm",
                                                "/moved-here"}, paths
        assert {profile for _, profile in revisits} == {NOT_MODIFIED_PROFILE}
    finally:
        close(server)


def test_a_misspelt_recrawl_policy_is_refused_in_one_line(tmp_path):
    # refused whether the crawl is continuous or not: the setting is wrong
    run = scrapy("crawl", "web", "-a", "seeds=http://www.example.org/",
                 "-s", "RECRAWL_POLICY=optimall",
                 env_extra={"CRAWL_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2, run.stderr
    assert one_line(run) == ("crawlproj: RECRAWL_POLICY 'optimall' is not one of uniform, "
                             "adaptive, optimal, webfountain")
