"""The README's "Crawling a real site" recipe, on a simulated site.

The recipe's own command (`scrapy crawl web -a seeds=URL -s CRAWL_CONTACT=...
-o pages.jsonl`, no REDIS_URL: the embedded server) with the project's
defaults, against a small site served by the simulated web on 127.0.0.1: a
home page, an about page, a blog on another host of the same registered
domain, a chain of archive pages deeper than the depth limit, and links to
other sites. What was fetched, by whom, is read from the simulated web's
request log.

The hosts are under .onion, a public suffix in the Public Suffix List (so
www.shop.onion and blog.shop.onion are one registered domain, as
www.example.co.uk and shop.example.co.uk are) whose names no DNS resolves
(RFC 7686): were the proxy bypassed, a crawl would reach nothing.
"""

from __future__ import annotations

import importlib
import json
import signal
import subprocess
import sys
from collections import deque
from importlib.metadata import version
from pathlib import Path

import pytest

from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = importlib.import_module("settings.base")

WWW, BLOG = "http://www.shop.onion", "http://blog.shop.onion"
SITE_HOSTS = {"www.shop.onion", "blog.shop.onion"}
SEED = f"{WWW}/"
CONTACT = "https://operator.example/about-this-crawl"
WARNING = "CRAWL_CONTACT is not set"


def site_links(chain: int) -> dict[str, list[str]]:
    """URL -> the URLs it links to."""
    links = {
        f"{WWW}/": [f"{WWW}/about", f"{BLOG}/", "http://other.onion/", "http://www.partner.onion/",
                    f"{WWW}/archive/1"],
        f"{WWW}/about": [f"{WWW}/", "http://other.onion/"],
        f"{BLOG}/": [f"{BLOG}/post", "http://other.onion/"],
        f"{BLOG}/post": [f"{WWW}/", "http://other.onion/post"],
        "http://other.onion/": ["http://other.onion/post", f"{WWW}/about"],
        "http://other.onion/post": ["http://other.onion/"],
        "http://www.partner.onion/": [f"{WWW}/", "http://other.onion/"],
    }
    for k in range(1, chain + 1):  # /archive/k is k links from the home page
        links[f"{WWW}/archive/{k}"] = [f"{WWW}/archive/{k + 1}"] if k < chain else []
    return links


def write_graph(links: dict[str, list[str]], path: Path) -> Path:
    """The site as a graph file the simulated web serves ('n ID URL', 'e SRC DST')."""
    ids = {url: i for i, url in enumerate(links)}
    lines = [f"n {i} {url}" for url, i in ids.items()]
    lines += [f"e {ids[src]} {ids[dst]}" for src, dsts in links.items() for dst in dsts]
    path.write_text("\n".join(lines) + "\n")
    return path


def on_site_within(links: dict[str, list[str]], depth_limit: int) -> set[str]:
    """The pages a crawl of the site from SEED fetches: on the site's hosts, at
    most depth_limit links from the seed (0: any), by breadth-first search."""
    depth = {SEED: 0}
    todo = deque([SEED])
    while todo:
        url = todo.popleft()
        if depth_limit and depth[url] >= depth_limit:
            continue
        for target in links[url]:
            if target not in depth and target.split("/")[2] in SITE_HOSTS:
                depth[target] = depth[url] + 1
                todo.append(target)
    return set(depth)


def recipe_command(out: Path, contact: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={SEED}", "-o", str(out)]
    if contact is not None:
        cmd += ["-s", f"CRAWL_CONTACT={contact}"]
    return cmd


class Recipe:
    """Runs of the recipe's command in one crawl, as a newcomer runs them: the
    embedded server (no REDIS_URL), one CRAWL_ID, one CRAWL_DATA_DIR."""

    def __init__(self, sw, data_dir: Path, tmp: Path, contact: str | None):
        self.sw, self.tmp = sw, tmp
        self.pages = tmp / "pages.jsonl"
        self.cmd = recipe_command(self.pages, contact)
        self.env = sw.env()
        self.env.pop("REDIS_URL", None)
        self.env.update(CRAWL_ID="mysite", CRAWL_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
        self.runs: list[subprocess.Popen] = []

    def start(self) -> subprocess.Popen:
        log = open(self.tmp / f"run{len(self.runs)}.log", "wb")
        p = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.runs.append(p)
        return p

    def log(self, i: int) -> str:
        return (self.tmp / f"run{i}.log").read_text(errors="replace")

    def kill_all(self) -> None:
        for p in self.runs:
            if p.poll() is None:
                p.kill()
                p.wait()


def contact_warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if "WARNING" in line and WARNING in line]


def page_records(records) -> list[dict]:
    return [r for r in records if r["path"] != "/robots.txt"]


@pytest.mark.faults
def test_recipe_crawls_the_site_stops_on_sigterm_and_resumes(tmp_path, embedded_data_dir):
    """Defaults: the seed's registered domain (the blog host too, no other
    site), DEPTH_LIMIT links deep, Mercator's politeness, the operator's
    contact in every request's User-Agent. SIGTERM stops the crawl cleanly;
    the same command with the same CRAWL_ID finishes it, each page fetched
    once over both runs and stored once in pages.jsonl."""
    limit = DEFAULTS.DEPTH_LIMIT
    assert limit > 0, "settings.base must set a depth limit for a first crawl"
    links = site_links(chain=limit + 3)
    expected = on_site_within(links, limit)
    assert f"{BLOG}/post" in expected and f"{WWW}/archive/{limit}" in expected
    assert f"{WWW}/archive/{limit + 1}" not in expected
    # 50 ms a page and ten times that between two pages of a host: the chain
    # of archive pages alone, found one page at a time, takes seconds.
    spec = {"graph": str(write_graph(links, tmp_path / "site.graph")), "format": "kleinberg",
            "latency_ms": 50, "page_bytes": 2000}
    with SimWebServer(spec, log_path=str(tmp_path / "web.jsonl")) as sw:
        recipe = Recipe(sw, embedded_data_dir, tmp_path, CONTACT)
        try:
            first = recipe.start()
            sw.wait_log(lambda recs: len(page_records(recs)) >= 4, timeout=120)
            first.send_signal(signal.SIGTERM)
            assert first.wait(60) == 0, recipe.log(0)[-3000:]
            before = set(checks.fetch_counts(sw.settle_log()))
            assert f"{WWW}/archive/{limit}" not in before, "the crawl ended before it was stopped"

            second = recipe.start()  # the same command, the same CRAWL_ID
            assert second.wait(300) == 0, recipe.log(1)[-3000:]
        finally:
            recipe.kill_all()
        records = sw.settle_log()

    counts = checks.fetch_counts(records)
    assert set(counts) == expected, (
        f"missing {sorted(expected - set(counts))}, extra {sorted(set(counts) - expected)}")
    assert [u for u, n in counts.items() if n > 1] == []
    assert set(counts) - before, "the second run fetched nothing"
    assert {r["host"] for r in records} == SITE_HOSTS  # robots.txt of no other site either
    assert {r["ua"] for r in records} == {f"crawlproj/{version('crawlproj')} (+{CONTACT})"}
    assert checks.overlaps(records) == []
    # the README's promise: each request to a host waits 10 times the download
    # before it, across the stop too (the host's next time is in Redis)
    assert checks.politeness_violations(records, factor=10, max_delay=float("inf")) == []
    stored = [json.loads(line)["url"] for line in recipe.pages.read_text().splitlines()]
    assert sorted(stored) == sorted(expected)  # both runs appended, no page twice
    assert contact_warnings(recipe.log(0) + recipe.log(1)) == []


@pytest.mark.parametrize("contact", [None, CONTACT], ids=["placeholder", "set"])
def test_user_agent_names_the_contact_or_the_worker_warns_once(contact, tmp_path,
                                                               embedded_data_dir):
    """Left at its placeholder, CRAWL_CONTACT gets one WARNING when the worker
    starts, however many requests follow, and the User-Agent is the product
    alone; set, no warning and every request carries it."""
    links = site_links(chain=3)
    spec = {"graph": str(write_graph(links, tmp_path / "site.graph")), "format": "kleinberg"}
    with SimWebServer(spec, log_path=str(tmp_path / "web.jsonl")) as sw:
        recipe = Recipe(sw, embedded_data_dir, tmp_path, contact)
        try:
            assert recipe.start().wait(300) == 0, recipe.log(0)[-3000:]
        finally:
            recipe.kill_all()
        records = sw.settle_log()
    assert len(page_records(records)) == len(on_site_within(links, 0)) > 3
    product = f"crawlproj/{version('crawlproj')}"
    assert {r["ua"] for r in records} == {product if contact is None else f"{product} (+{contact})"}
    assert len(contact_warnings(recipe.log(0))) == (1 if contact is None else 0), recipe.log(0)[-3000:]
