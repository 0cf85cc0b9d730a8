"""URL filters in a real crawl: Debian's Python manual under nginx
(tests/nginxweb.py), two workers, include and exclude patterns and a file of
rules; what was fetched is read from nginx's access log, what was refused
from the workers' per-rule counters."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from crawlproj.extract import extract_page
from tests.e2e import Workers, stat
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web

pytestmark = pytest.mark.e2e

HOST = "docs.python.test"
SEED = f"http://{HOST}/library/index.html"


def seed_links() -> list[str]:
    """The links of the seed page on its own host: what the crawl, one link
    deep with scope host, offers the frontier."""
    body = (PYTHON_DOCS / "library" / "index.html").read_bytes()
    links = [u for u, _ in extract_page(body, SEED, "utf-8").links]
    return [u for u in links if u.startswith(f"http://{HOST}/")]


def module(url: str) -> str:
    """'asyncio-task.html' of http://host/library/asyncio-task.html; '' off /library/."""
    prefix = f"http://{HOST}/library/"
    return url[len(prefix):] if url.startswith(prefix) else ""


def test_two_workers_fetch_the_included_urls_and_never_an_excluded_one(redis_url, tmp_path):
    require_real_web()
    rules = tmp_path / "regex-urlfilter.txt"
    rules.write_text(f"# Nutch's form\n-^http://{HOST.replace('.', '[.]')}/library/c[a-n]\n+.\n")
    settings = {
        "DEPTH_LIMIT": 1, "CRAWL_SCOPE": "host",
        # the seed, and the modules from a to c
        "URLFILTER_INCLUDE": json.dumps([r"/library/index\.html$", "/library/[a-c]"]),
        # no module from aa to as: abc, argparse, array, ast, asyncio, ...
        "URLFILTER_EXCLUDE": "/library/a[a-s]",
        "URLFILTER_FILE": str(rules),
    }
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "robots.txt").write_text("User-agent: *\nCrawl-delay: 0.01\n")
    site = Site(HOST, PYTHON_DOCS, f"location = /robots.txt {{ alias {extra}/robots.txt; }}")
    with NginxWeb([site], tmp_path / "nginx") as web:
        workers = Workers(web, redis_url, tmp_path, [SEED], "urlfilter", settings)
        workers.start(2)
        assert workers.wait() == [0, 0]
        records = web.settle_log()

    # what each filter must do, worked out here with string tests alone
    links = seed_links()
    excluded = [u for u in links if module(u)[:1] == "a" and "a" <= module(u)[1:2] <= "s"]
    not_included = [u for u in links if u not in excluded and module(u)[:1] not in ("a", "b", "c")]
    by_file = [u for u in links if module(u)[:1] == "c" and "a" <= module(u)[1:2] <= "n"]
    admitted = set(links) - set(excluded) - set(not_included) - set(by_file)
    assert len(excluded) >= 5 and len(not_included) > 100 and len(by_file) >= 5
    assert len(admitted) > 10  # atexit, audioop, base64, bisect, cmath, ..., curses, ...

    paths = Counter(r["path"] for r in records)
    assert max(paths.values()) == 1, paths.most_common(3)
    fetched = {f"http://{HOST}{p}" for p in paths} - {f"http://{HOST}/robots.txt"}
    assert not fetched & set(excluded)
    assert not fetched & set(not_included)
    assert not fetched & set(by_file)
    assert fetched == admitted | {SEED}
    assert {r["status"] for r in records} == {200}

    logs = [workers.log(i) for i in range(2)]
    counted = {rule: sum(stat(log, f"urlfilter/refused/{rule}") for log in logs)
               for rule in ("exclude/0", "include", "file/2", "file/unmatched")}
    assert counted == {"exclude/0": len(excluded), "include": len(not_included),
                       "file/2": len(by_file), "file/unmatched": 0}
    assert all(stat(log, "response_received_count") > 0 for log in logs)  # both worked
