"""The DUE end to end: real `scrapy crawl web` workers, real HTTP on 127.0.0.1,
a real Redis-protocol server; what was fetched is read from the web server's
own request log.

* Mirrors: a site served twice under two paths (relative links, so the
  copies' links differ) is crawled once: the content-seen test finds the
  second copy and its links are not extracted; near-duplicates likewise when
  CONTENTSEEN_NEAR is on. Without the test both copies are crawled.
* Restart: the Redis server is killed (SIGKILL) and started again mid-crawl;
  the crawl goes on, every page is fetched, and none twice unless its first
  fetch was within the last seconds of writes before the kill (appendfsync
  everysec).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import ROOT, Workers, stat

pytestmark = pytest.mark.e2e

VOCAB = [f"w{i}" for i in range(3000)]


def _words(n, seed):
    rng = random.Random(seed)
    return [rng.choice(VOCAB) for _ in range(n)]


def _html(title, text, links):
    anchors = "\n".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    return f"<html><head><title>{title}</title></head><body><p>{' '.join(text)}</p>" \
           f"<ul>{anchors}</ul></body></html>"


class MirrorSite:
    """/ links to /a/, /mirror/ and /near/. /mirror/ is /a/ re-indented; /near/
    is /a/ with three words changed. Each links (relatively) to p1..p3.html of
    its own directory; those pages are alike in all three directories, but each
    a different document."""

    def __init__(self):
        self.log: list[str] = []
        text = _words(300, 1)
        near = list(text)
        for i in (30, 150, 280):
            near[i] = "changed"
        links = ["p1.html", "p2.html", "p3.html"]
        index = _html("Index", text, links)
        self.pages = {
            "/": _html("Root", _words(50, 2), ["/a/", "/mirror/", "/near/"]),
            "/a/": index,
            "/mirror/": index.replace("<li>", "\n    <li>").replace("<p>", "<p>\n  "),
            "/near/": _html("Index", near, links),
        }
        for d in ("a", "mirror", "near"):
            for i in (1, 2, 3):
                self.pages[f"/{d}/p{i}.html"] = _html(f"{d} {i}", _words(100, hash((d, i)) % 999), [])
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.log.append(self.path)
                body = site.pages.get(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                data = (body or "not found").encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def site():
    s = MirrorSite()
    yield s
    s.close()


def crawl(site, redis_url, tmp_path, crawl_id, **settings):
    items = tmp_path / f"{crawl_id}.jsonl"
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={site.url}",
           "-O", f"{items}:jsonlines"]
    # the site is on loopback, crawled directly: the address guard lets it through
    for k, v in {"LOG_LEVEL": "INFO", "FRONTIER_DELAY_FACTOR": 0, "CONCURRENT_REQUESTS": 4,
                 "ADDRESS_GUARD_ALLOW": "127.0.0.1", **settings}.items():
        cmd += ["-s", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
    env.update(REDIS_URL=redis_url, CRAWL_ID=crawl_id, CRAWL_DATA_DIR=str(tmp_path / crawl_id),
               PYTHONUNBUFFERED="1")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return [json.loads(line) for line in items.read_text().splitlines()], p.stdout + p.stderr


def subtrees(log):
    return {d for d in ("a", "mirror", "near") if f"/{d}/p1.html" in log}


def test_mirrored_pages_are_crawled_once(site, redis_url, tmp_path):
    items, log = crawl(site, redis_url, tmp_path, "mirrors")
    fetched = [p for p in site.log if p != "/robots.txt"]
    assert len(fetched) == len(set(fetched))
    # /a/ and /mirror/ are one document: only the first one's links were followed
    assert len(subtrees(site.log) & {"a", "mirror"}) == 1
    assert "near" in subtrees(site.log)  # three words differ: not the same document
    dup = [i for i in items if i["duplicate_of"]]
    assert len(dup) == 1 and dup[0]["outlinks"] == []
    first, copy = dup[0]["duplicate_of"], dup[0]["url"]
    assert {first, copy} == {site.url + "a/", site.url + "mirror/"}
    assert stat(log, "contentseen/duplicates") == 1
    assert stat(log, "contentseen/unique") == len(fetched) - 1


def test_near_duplicates_when_enabled(site, redis_url, tmp_path):
    items, log = crawl(site, redis_url, tmp_path, "near", CONTENTSEEN_NEAR=True)
    assert len(subtrees(site.log)) == 1
    assert stat(log, "contentseen/duplicates") == 1
    assert stat(log, "contentseen/near_duplicates") == 1
    assert sum(1 for i in items if i["duplicate_of"]) == 2


def test_without_the_content_seen_test_every_copy_is_crawled(site, redis_url, tmp_path):
    items, log = crawl(site, redis_url, tmp_path, "off", CONTENTSEEN_ENABLED=False)
    assert subtrees(site.log) == {"a", "mirror", "near"}
    assert not any(i["duplicate_of"] for i in items)


# -- restart ---------------------------------------------------------------------

WEB = {"seed": 11, "hosts": 40, "pages": 700, "page_bytes": 1500, "latency_ms": [10, 20],
       "crawl_delay_fraction": 0.0, "p500": 0.0}
# appendfsync everysec loses at most ~2 s of writes on a crash (Redis docs);
# a page's release reaches Redis shortly after its fetch ends
LOST_WINDOW = 3.0


@pytest.mark.faults
def test_crawl_survives_a_killed_and_restarted_redis(redis_server_factory, tmp_path):
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, server.url, tmp_path, seeds, "restart", {
            "FRONTIER_DELAY_FACTOR": 0.5, "RETRY_TIMES": 0, "FRONTIER_LEASE_TTL": 5,
            "CONCURRENT_REQUESTS": 8})
        workers.start(2)
        sw.wait_log(len(reachable) // 3, timeout=120)
        killed_at = time.time()
        server.kill()  # SIGKILL: the last second of writes may be lost
        time.sleep(1.0)
        server.restart()  # same port and directory: the AOF is loaded again
        assert workers.wait(300) == [0, 0]
        records = sw.read_log()
        after = [r for r in records if r["t0"] > killed_at + 1.0]
        assert after, "the crawl did not go on after the restart"
        counts = checks.fetch_counts(records)
        assert set(counts) == reachable
        first = {}
        for r in sorted(records, key=lambda r: r["t0"]):
            first.setdefault(checks.url_of(r), r["t0"])
        twice = {u for u, n in counts.items() if n > 1}
        early = {u for u in twice if first[u] < killed_at - LOST_WINDOW}
        assert not early, f"fetched again although first fetched long before the kill: {early}"
        logs = workers.log(0) + workers.log(1)
        assert "Redis call failed (" in logs  # they did see the server go away
