"""Bad input to the README's commands: one line, a non-zero exit, no traceback.

Each case runs the real `scrapy` command in a subprocess, as a user would,
and checks the exact line it prints and its exit status: 2 for what is wrong
before anything starts (arguments, settings, an unreachable, unwritable or
locked resource), 1 for a crawl that stopped on an error. A refused crawl
leaves no key behind on the server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from crawlproj.redis.embedded import free_port
from crawlproj.simweb.testing import SimWebServer

ROOT = Path(__file__).resolve().parents[1]


def scrapy(*args, env_extra: dict | None = None, timeout: float = 120):
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "CRAWL_DATA_DIR", "CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def one_line(run) -> str:
    """The one line a refused command printed on stderr: its last, the only
    one of crawlproj's, and no error or traceback beside it. `scrapy crawl`
    logs Scrapy's start-up lines (versions, settings) first; every other
    command prints that line alone."""
    assert "Traceback" not in run.stdout + run.stderr, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("crawlproj: ")]
    assert len(said) == 1 and lines[-1] == said[0], run.stderr
    assert not any(" ERROR: " in ln or " CRITICAL: " in ln for ln in lines), run.stderr
    if "crawl" not in run.args[3:4]:
        assert lines == said, run.stderr
    return said[0]


def crawl(redis_url, tmp_path, *args, **env):
    return scrapy("crawl", "web", *args, env_extra={
        "REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path / "data"), **env})


# -- arguments and settings ------------------------------------------------------------

def test_an_unknown_scope(redis_url, tmp_path):
    run = crawl(redis_url, tmp_path, "-a", "seeds=http://a.example/", "-a", "scope=site")
    assert run.returncode == 2
    assert one_line(run) == "crawlproj: scope must be one of host, domain, any, not 'site'"
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_a_typo_in_the_prioritizer(redis_url, tmp_path):
    run = crawl(redis_url, tmp_path, "-a", "seeds=http://a.example/",
                "-s", "FRONTIER_PRIORITIZER=pagernak")
    assert run.returncode == 2
    assert one_line(run) == (
        "crawlproj: unknown FRONTIER_PRIORITIZER 'pagernak' (did you mean pagerank?); use one "
        "of bfs, random, backlinks, pagerank, opic, hostfirst, similarity or a dotted class path")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_a_prioritizer_class_that_does_not_exist(redis_url, tmp_path):
    run = crawl(redis_url, tmp_path, "-s", "FRONTIER_PRIORITIZER=crawlproj.prioritizers.basic.Nope")
    assert run.returncode == 2
    assert one_line(run).startswith(
        "crawlproj: FRONTIER_PRIORITIZER 'crawlproj.prioritizers.basic.Nope' cannot be loaded: ")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_a_seeds_file_without_a_valid_url(redis_url, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# my seeds\nftp://a.example/\nmailto:me@a.example\n")
    run = crawl(redis_url, tmp_path, "-a", f"seeds={seeds}")
    assert run.returncode == 2
    assert one_line(run) == (f"crawlproj: no usable seed URL in '{seeds}': {seeds}:2: not an "
                             "http(s) URL: 'ftp://a.example/' (and 1 more)")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_a_missing_seeds_file_named_by_one_word(redis_url, tmp_path):
    assert not (ROOT / "myseeds").exists()
    run = crawl(redis_url, tmp_path, "-a", "seeds=myseeds")
    assert run.returncode == 2
    assert one_line(run) == ("crawlproj: seeds file not found: 'myseeds' (URLs need their "
                             "scheme: http://...)")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_seeding_without_a_valid_url(redis_url, tmp_path):
    run = scrapy("seed", "ftp://a.example/", env_extra={"REDIS_URL": redis_url})
    assert run.returncode == 2
    assert one_line(run) == ("crawlproj: no usable seed URL in 'ftp://a.example/': seeds[1]: "
                             "not an http(s) URL: 'ftp://a.example/'")
    assert redis.Redis.from_url(redis_url).dbsize() == 0


def test_an_unknown_spider(redis_url):
    run = scrapy("crawl", "webb", env_extra={"REDIS_URL": redis_url})
    assert run.returncode == 2
    assert one_line(run) == "crawlproj: no spider 'webb' in this project; its spiders: web"


# -- resources: Redis, the data directory, a port --------------------------------------

@pytest.fixture
def secured(redis_server_factory):
    return redis_server_factory(appendonly=False, extra={"requirepass": "s3cret"})


@pytest.mark.parametrize("userinfo", ["", ":wrong@"])
def test_a_missing_or_wrong_redis_password_says_authentication(secured, tmp_path, userinfo):
    url = f"redis://{userinfo}127.0.0.1:{secured.port}/0"
    run = crawl(url, tmp_path, "-a", "seeds=http://a.example/")
    assert run.returncode == 2
    line = one_line(run)
    if userinfo:
        assert line == (f"crawlproj: Redis at redis://:***@127.0.0.1:{secured.port}/0 refused "
                        "the credentials of REDIS_URL (authentication failed: invalid "
                        "username-password pair or user is disabled)")
    else:
        assert line == (f"crawlproj: Redis at {url} requires authentication: give the password "
                        "in REDIS_URL (redis://:PASSWORD@host:port/db, or "
                        "redis://USER:PASSWORD@host:port/db)")
    assert secured.client(password="s3cret").dbsize() == 0


def unwritable_data_dirs(tmp_path) -> list[Path]:
    """Data dirs no process can write in: one under a regular file (even root
    cannot), and a read-only directory where permissions bind (not as root)."""
    (tmp_path / "a-file").write_text("")
    dirs = [tmp_path / "a-file" / "data"]
    if os.geteuid() != 0:
        ro = tmp_path / "read-only"
        ro.mkdir(mode=0o555)
        dirs.append(ro / "data")
    return dirs


# Every README command that reaches Redis, with the embedded server (REDIS_URL unset).
EMBEDDED_COMMANDS = [
    ["crawl", "web", "-a", "seeds=http://a.example/"],
    ["seed", "http://a.example/"],
    ["frontier"],
    ["redis", "start"],
    ["rank", "--once"],
    ["crawls", "list"],
    ["demo", "--hosts", "5", "--pages", "20"],
]


@pytest.mark.parametrize("args", EMBEDDED_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_unwritable_data_dir_with_the_embedded_server(tmp_path, args):
    for data in unwritable_data_dirs(tmp_path):
        run = scrapy(*args, env_extra={"CRAWL_DATA_DIR": str(data)})
        assert run.returncode == 2, run.stderr
        # the first directory the server could not make
        where, reason = (data, "Not a directory") if data.parent.is_file() \
            else (data, "Permission denied")
        assert one_line(run) == (
            f"crawlproj: the embedded Redis server cannot use {where}: {reason} (set "
            "CRAWL_DATA_DIR to a writable directory, or REDIS_URL to a server)")


# The same commands against a server nobody answers on.
@pytest.mark.parametrize("args", EMBEDDED_COMMANDS[:3] + EMBEDDED_COMMANDS[4:]
                         + [["redis", "status"], ["export-graph", "out"]],
                         ids=lambda a: " ".join(a[:2]))
def test_an_unreachable_redis(tmp_path, args):
    port = free_port()
    run = scrapy(*args, env_extra={"REDIS_URL": f"redis://127.0.0.1:{port}/0",
                                   "CRAWL_DATA_DIR": str(tmp_path / "data")})
    assert run.returncode == 2
    assert one_line(run) == (f"crawlproj: cannot reach Redis at redis://127.0.0.1:{port}/0: "
                             "Connection refused")
    assert not (tmp_path / "data" / "redis").exists()  # nothing embedded was started


def test_export_graph_into_an_unwritable_place(redis_url, tmp_path):
    seeded = scrapy("seed", "http://h0001.example/", env_extra={
        "REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path / "data")})
    assert seeded.returncode == 0, seeded.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = scrapy("export-graph", str(blocker / "out"), env_extra={
        "REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path / "data")})
    assert run.returncode == 2
    assert one_line(run).startswith("crawlproj: ")


@pytest.mark.parametrize("args", [["report", "no-such.jsonl"], ["cdx", "--warc-dir", "no-such"]],
                         ids=lambda a: a[0])
def test_a_missing_input_of_a_report_tool(tmp_path, args):
    run = scrapy(*args, env_extra={"CRAWL_DATA_DIR": str(tmp_path / "data")})
    assert run.returncode == 2
    assert one_line(run).startswith("crawlproj: no ")


def test_a_busy_simulated_web_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = scrapy("simweb", "serve", "--port", str(port), "--hosts", "5", "--pages", "20",
                     timeout=60)
    assert run.returncode == 2
    assert one_line(run) == (f"crawlproj: the simulated web cannot listen on 127.0.0.1:{port}: "
                             "Address already in use (--port 0 picks a free port)")


# -- a crawl that stops on an error ---------------------------------------------------

@pytest.mark.e2e
def test_a_crawl_stopped_by_a_store_error_exits_non_zero(redis_url, tmp_path):
    """The WARC directory cannot be made (a file is in the way): the store
    guard stops the crawl (finish reason store_error), and the worker says so
    in one last line and exits 6, so a script or Scrapyd sees the failure."""
    (tmp_path / "a-file").write_text("")
    with SimWebServer({"seed": 3, "hosts": 4, "pages": 30}) as sw:
        seeds = ",".join(sw.web.seeds(2))
        env = sw.env()
        env.update(REDIS_URL=redis_url, CRAWL_DATA_DIR=str(tmp_path / "data"))
        run = subprocess.run(
            [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
             "-s", f"WARC_DIR={tmp_path / 'a-file' / 'warc'}", "-s", "LOG_LEVEL=WARNING"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 6, run.stderr
    assert "Traceback" not in run.stderr
    errors = [ln for ln in run.stderr.splitlines() if " ERROR: " in ln]
    assert len(errors) == 1 and "cannot write" in errors[0] and "Not a directory" in errors[0]
    assert run.stderr.strip().splitlines()[-1] == (
        "crawlproj: the crawl stopped on an error: a store cannot write (finish reason "
        "store_error); the log says what failed (exit status 6)")
