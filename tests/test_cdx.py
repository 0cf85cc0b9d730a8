"""`scrapy cdx` indexes the WARC files of its crawl, every crawl's with --all.

The files are the content store's own (WarcWriter, as a worker writes them),
of three crawls in one data directory: "alpha", "alpha-2" (whose files'
names begin as alpha's do) and "beta". The command runs as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse, Request

from crawlproj.stores.exchange import Exchange
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import WarcWriter

ROOT = Path(__file__).resolve().parent.parent
CRAWLS = {"alpha": 3, "alpha-2": 2, "beta": 4}  # crawl -> pages


def exchange(url: str) -> Exchange:
    req = Request(url, headers={"User-Agent": "crawlproj-test"}, meta={"depth": 1})
    resp = HtmlResponse(url, status=200, body=f"<p>{url}</p>".encode(), request=req,
                        headers={"Content-Type": "text/html; charset=utf-8"})
    return Exchange.capture(req, resp, time.time() - 0.05, time.time())


@pytest.fixture
def data_dir(tmp_path) -> Path:
    warc = tmp_path / "data" / "warc"
    for crawl, pages in CRAWLS.items():
        # two workers each, so that a crawl has several files
        for worker in ("h:1:aaaaaa", "h:2:bbbbbb"):
            w = WarcWriter(LocalStorage(warc), crawl, worker, max_size=1 << 30)
            for i in range(pages):
                w.write(exchange(f"http://{crawl}.test/{worker[2]}/{i}"))
            w.close()
    return tmp_path / "data"


def cdx(data_dir: Path, *args, crawl_id: str | None = None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    env["CRAWL_DATA_DIR"] = str(data_dir)
    if crawl_id is not None:
        env["CRAWL_ID"] = crawl_id
    return subprocess.run([sys.executable, "-m", "scrapy", "cdx", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def hosts_of(index: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in index.read_text().splitlines():
        host = json.loads(line.split(" ", 2)[2])["url"].split("/")[2]
        out[host] = out.get(host, 0) + 1
    return out


@pytest.mark.parametrize("crawl", ["alpha", "alpha-2", "beta"])
def test_the_index_of_a_crawl_has_its_records_alone(data_dir, crawl):
    run = cdx(data_dir, "--rebuild", crawl_id=crawl)  # the crawl's files indexed again
    assert run.returncode == 0, run.stderr
    index = data_dir / "warc" / "index.cdxj"
    # a line per response record (as pywb indexes), two workers
    assert hosts_of(index) == {f"{crawl}.test": 2 * CRAWLS[crawl]}
    assert run.stdout.strip().endswith(f"{index}: {2 * CRAWLS[crawl]} records")
    assert run.stdout.startswith(f"crawl {crawl}: indexed 2 WARC file(s)")


def test_the_crawl_id_option_and_all(data_dir, tmp_path):
    run = cdx(data_dir, "--crawl-id", "beta", "-o", str(tmp_path / "beta.cdxj"), crawl_id="alpha")
    assert run.returncode == 0, run.stderr
    assert hosts_of(tmp_path / "beta.cdxj") == {"beta.test": 8}
    assert cdx(data_dir, crawl_id="alpha").returncode == 0  # WARC_DIR/index.cdxj, of alpha
    run = cdx(data_dir, "--all", "-o", str(tmp_path / "all.cdxj"))
    assert run.returncode == 0, run.stderr
    assert hosts_of(tmp_path / "all.cdxj") == {f"{c}.test": 2 * n for c, n in CRAWLS.items()}
    assert run.stdout.startswith("every crawl: ")


def test_a_crawl_without_warc_files_is_refused_in_one_line(data_dir):
    run = cdx(data_dir, crawl_id="gamma")
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"crawlproj: no WARC file of crawl gamma in {data_dir / 'warc'} (crawls there: alpha, "
        "alpha-2, beta; --crawl-id ID, or --all for every crawl's)"]
    assert not (data_dir / "warc" / "index.cdxj").exists()
