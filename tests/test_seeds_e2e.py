"""The seeds argument as `scrapy crawl web` takes it: one that is neither a
file nor URLs with a scheme is refused in one line; a seeds file's bad lines
are named by their line number and its good ones crawled (Debian's Python
manual under nginx, tests/nginxweb.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import Workers, stat
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web

ROOT = Path(__file__).resolve().parent.parent
HOST = "docs.python.test"


@pytest.mark.parametrize("arg, fix", [
    ("http//docs.python.test/library/json.html", "http://docs.python.test/library/json.html"),
    ("docs.python.test", "http://docs.python.test"),
])
def test_scrapy_crawl_refuses_a_seeds_argument_without_a_scheme(tmp_path, arg, fix):
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    env["CRAWL_DATA_DIR"] = str(tmp_path / "data")
    run = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={arg}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        f"crawlproj: seeds {arg!r} is neither an existing file nor a URL with a scheme (did "
        f"you mean {fix!r}?)")
    assert not (tmp_path / "data" / "redis").exists()  # nothing was started


@pytest.mark.e2e
def test_a_seeds_files_bad_lines_are_named_and_its_good_ones_crawled(redis_url, tmp_path):
    require_real_web()
    lines = [f"http//{HOST}/library/os.html",          # 1: the colon missing
             f"http://{HOST}/library/json.html",       # 2
             "ftp://files.python.test/",               # 3
             f"{HOST}/library/re.html",                # 4: a bare domain name, taken as http
             "docs/library/sys.html"]                  # 5: no domain name
    with NginxWeb([Site(HOST, PYTHON_DOCS)], tmp_path / "nginx") as web:
        workers = Workers(web, redis_url, tmp_path, lines, "seedsfile",
                          {"DEPTH_LIMIT": 1, "CRAWL_SCOPE": "host",
                           # the two pages alone, not their links
                           "URLFILTER_INCLUDE": r"/(json|re)\.html$"})
        workers.start(1)
        assert workers.wait() == [0]
        records = web.settle_log()
    log = workers.log(0)
    seeds = workers.seeds_file
    skipped = [line.split("seed skipped: ", 1)[1] for line in log.splitlines()
               if "seed skipped: " in line]
    assert skipped == [
        f"{seeds}:1: no scheme: 'http//{HOST}/library/os.html' (did you mean "
        f"'http://{HOST}/library/os.html'?)",
        f"{seeds}:3: not an http(s) URL: 'ftp://files.python.test/'",
        f"{seeds}:5: no scheme: 'docs/library/sys.html' (did you mean "
        "'http://docs/library/sys.html'?)"]
    assert sorted(r["path"] for r in records if r["path"] != "/robots.txt") == [
        "/library/json.html", "/library/re.html"]
    assert stat(log, "seeds/invalid") == 3 and stat(log, "seeds/accepted") == 2
