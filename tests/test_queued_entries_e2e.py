"""Queued entries written into the frontier by someone else than a worker:
a real worker drops each bad one (logged, counted) and crawls the good ones.

The entries go in through the frontier's own script, as any process that can
write to the server could put them there: one that names a class of a module
(which the worker must not import: the module, on the worker's import path,
leaves a mark when imported), one with a file: URL of a local file, one with a
callback that is not the spider's, and one good page.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from http.server import ThreadingHTTPServer

import msgpack
import pytest
import redis
from scrapy.utils.test import get_crawler

from crawlproj.frontier.frontier import Batch, Frontier
from crawlproj.spiders.web import WebSpider
from tests.e2e import ROOT, stat
from tests.loopback import QuietHandler, close, serve

pytestmark = pytest.mark.e2e

SECRET = "the-secret-of-this-machine"


class Site(ThreadingHTTPServer):
    def __init__(self):
        self.paths: list[str] = []
        self.headers: dict[str, dict[str, str]] = {}
        site = self

        class Handler(QuietHandler):
            def do_GET(self):
                site.paths.append(self.path)
                site.headers[self.path] = dict(self.headers.items())
                if self.path == "/good":
                    self.reply(200, b"<html><p>a page</p></html>")
                else:
                    self.reply(404)

        super().__init__(("127.0.0.1", 0), Handler)


def join_crawl(site, settings: dict, tmp_path, **env) -> str:
    """A worker that joins the crawl (no seeds) and finishes it with exit 0; its log.
    Closes the site."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web"]
    for k, v in {**settings, "LOG_LEVEL": "INFO", "FRONTIER_IDLE_WAIT": 0}.items():
        cmd += ["-s", f"{k}={v}"]
    environ = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy")}
    environ.update(CRAWL_DATA_DIR=str(tmp_path / "data"), **env)
    try:
        run = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=180)
    finally:
        close(site)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    return log


def test_bad_queued_entries_are_dropped_and_counted_and_the_good_one_crawled(
        redis_url, tmp_path):
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "crawlproj_probe_module.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_suffix('.imported').touch()\n"
        "from scrapy import Request as Req\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    site = serve(Site())
    host = f"127.0.0.1:{site.server_address[1]}"
    settings = {"REDIS_URL": redis_url, "CRAWL_ID": "poisoned", "FRONTIER_DELAY_FACTOR": 0,
                "ADDRESS_GUARD_ALLOW": "127.0.0.1"}  # the site is on loopback
    frontier = Frontier.from_settings(get_crawler(WebSpider, settings).settings,
                                      redis.Redis.from_url(redis_url))
    payloads = {
        "/import": {"u": "/import", "_class": "crawlproj_probe_module.Req"},
        "/file": {"url": f"file://{secret}"},
        "/callback": {"u": "/callback", "callback": "update_settings"},
        "/good": {"u": "/good"},
    }
    batch = Batch()
    for i, (path, payload) in enumerate(payloads.items()):
        batch.enqueue.append(frontier.entry(host, f"http://{host}{path}", float(i),
                                            msgpack.packb(payload, use_bin_type=True), fp=i + 1))
    frontier.sync({frontier.partition_of(host): batch})

    log = join_crawl(site, settings, tmp_path, PYTHONPATH=str(probe))
    assert not (probe / "crawlproj_probe_module.imported").exists()  # never imported
    assert stat(log, "frontier/undecodable") == 3
    for reason in ("class", "scheme", "callback"):
        assert stat(log, f"frontier/undecodable/{reason}") == 1, reason
    assert log.count("unreadable queued request on") == 3
    assert [p for p in site.paths if p != "/robots.txt"] == ["/good"]
    warc = b"".join(gzip.decompress(p.read_bytes())
                    for p in (tmp_path / "data" / "warc").glob("*.warc.gz"))
    assert SECRET.encode() not in warc and b"WARC-Target-URI: file:" not in warc


def test_entries_written_past_the_crawls_counters_do_not_keep_the_crawl_open(redis_url, tmp_path):
    """Entries put straight into a host's queue (ZADD, HSET: the frontier's
    script never counted them) and then taken out by the lease hand-out must
    not leave the crawl's counters out of range: the worker finishes, each
    bad entry refused with its reason, the URL judged as stored before a host
    is joined to it, and the queued request's own headers not sent."""
    site = serve(Site())
    host = f"127.0.0.1:{site.server_address[1]}"
    settings = {"REDIS_URL": redis_url, "CRAWL_ID": "foreign", "FRONTIER_DELAY_FACTOR": 0,
                "ADDRESS_GUARD_ALLOW": "127.0.0.1"}
    client = redis.Redis.from_url(redis_url)
    frontier = Frontier.from_settings(get_crawler(WebSpider, settings).settings, client)
    p = frontier.partition_of(host)
    frontier.sync({p: Batch()})  # the crawl's state is set up, its queue empty
    ks = frontier.keyspace
    foreign = {
        "/good": {"u": "/good", "h": {b"User-Agent": [b"someone-else/1.0"],
                                      b"X-Forwarded-For": [b"203.0.113.9"]}},
        "/file": {"u": "file:///etc/passwd"},
        "/gone": {"u": "/gone", "callback": "no_such_method"},
    }
    for i, payload in enumerate(foreign.values(), 1):
        client.zadd(ks.queue(p, host), {str(1000 + i): float(i)})
        client.hset(ks.payloads(p, host), str(1000 + i), msgpack.packb(payload, use_bin_type=True))
    client.zadd(ks.ready(p), {host: 1.0})

    log = join_crawl(site, settings, tmp_path)
    assert [p for p in site.paths if p != "/robots.txt"] == ["/good"]
    assert stat(log, "frontier/undecodable/scheme") == 1
    assert stat(log, "frontier/undecodable/callback") == 1
    assert "file:///etc/passwd" in log and "simfile" not in log and f"{host}file:" not in log
    sent = site.headers["/good"]
    assert sent["User-Agent"].startswith("crawlproj/") and "X-Forwarded-For" not in sent
    counters = frontier.counters()
    assert counters["queued"] == 0, counters
