"""Sitemaps on a real site under a real web server, crawled by two workers.

Debian's Python 3.11 manual under nginx (tests/nginxweb.py), with a
robots.txt and sitemaps of the test's (an index, a gzip urlset, a text
sitemap, and hostile ones) served by nginx `location`/`alias` directives.
Everything claimed is read from nginx's access log, the rest from the
workers' stats.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from urllib.parse import urljoin

import pytest
import redis as redis_lib

from crawlproj.monitor.status import crawl_status
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from tests.e2e import Workers, stat
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web

pytestmark = pytest.mark.e2e

HOST = "docs.python.test"
BASE = f"http://{HOST}"
CRAWL_DELAY = 0.05
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
MB = 1024 * 1024
SEED = "/copyright.html"
# reachable through a sitemap and nothing else (checked below on the pages)
ONLY_IN_SITEMAPS = ["/library/zlib.html", "/library/lzma.html", "/library/csv.html",
                    "/library/json.html"]
ROBOTS = f"""User-agent: *
Allow: {SEED}
{''.join(f'Allow: {p}{chr(10)}' for p in ONLY_IN_SITEMAPS)}Allow: /sitemap
Allow: /maps/
Disallow: /
Crawl-delay: {CRAWL_DELAY}

Sitemap: {BASE}/sitemap-index.xml
Sitemap: {BASE}/sitemap-pages.txt
"""


def urlset(*locs: str) -> str:
    rows = "".join(f"<url><loc>{loc}</loc><lastmod>2024-05-01</lastmod></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{rows}</urlset>\n'


def index(*locs: str) -> str:
    rows = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {NS}>{rows}</sitemapindex>\n'


def gzip_bomb(first: str, megabytes: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [z.compress(f"<urlset {NS}><url><loc>{first}</loc></url>".encode())]
    out += [z.compress(b" " * MB) for _ in range(megabytes)]
    return b"".join(out) + z.compress(b"</urlset>") + z.flush()


# path served -> file content
SITEMAPS = {
    "/sitemap-index.xml": index(
        f"{BASE}/sitemap-lib.xml.gz", f"{BASE}/sitemap-broken.xml", f"{BASE}/sitemap-html.xml",
        f"{BASE}/sitemap-bomb.xml.gz", f"{BASE}/sitemap-huge.txt", f"{BASE}/sitemap-deep1.xml",
        f"{BASE}/maps/sub/outside.xml", "http://other.test/sitemap.xml"),
    "/sitemap-lib.xml.gz": gzip.compress(urlset(
        f"{BASE}/library/zlib.html", "http://other.test/stolen.html",
        f"{BASE}/library/lzma.html").encode()),
    "/sitemap-pages.txt": (f"{BASE}/library/lzma.html\n{BASE}/library/lzma.html\n"
                           "http://other.test/x.html\n"),
    # well-formed up to its first entry, then cut
    "/sitemap-broken.xml": urlset(f"{BASE}/library/csv.html", f"{BASE}/nothing")[:-70],
    "/sitemap-bomb.xml.gz": gzip_bomb(f"{BASE}/library/json.html", 64),
    "/sitemap-huge.txt": "".join(f"http://other.test/{i}\n" for i in range(150_000)),
    # an index under an index under an index: past SITEMAP_MAX_DEPTH (2)
    "/sitemap-deep1.xml": index(f"{BASE}/sitemap-deep2.xml"),
    "/sitemap-deep2.xml": index(f"{BASE}/sitemap-deep3.xml"),
    "/sitemap-deep3.xml": index(f"{BASE}/sitemap-deep4.xml"),
    # a sitemap no robots.txt names lists its own directory only
    "/maps/sub/outside.xml": urlset(f"{BASE}{SEED}", f"{BASE}/library/zlib.html"),
}


def site(tmp_path) -> Site:
    extra = tmp_path / "extra"
    extra.mkdir()
    files = {"/robots.txt": ROBOTS, **SITEMAPS}
    directives = []
    for i, (path, content) in enumerate(files.items()):
        f = extra / f"f{i}"
        f.write_bytes(content if isinstance(content, bytes) else content.encode())
        directives.append(f"location = {path} {{ alias {f}; }}")
    # an HTML page where a sitemap should be
    directives.append(f"location = /sitemap-html.xml {{ alias {PYTHON_DOCS}/about.html; "
                      "types { } default_type text/html; }")
    return Site(HOST, PYTHON_DOCS, "\n".join(directives))


def links_of(path: str) -> set[str]:
    """The http links of a page of the manual, as absolute paths on HOST."""
    html = (PYTHON_DOCS / path.lstrip("/")).read_text(errors="replace")
    out = set()
    for href in re.findall(r'href="([^"#]*)', html):
        url = urljoin(BASE + path, href)
        if url.startswith(BASE + "/"):
            out.add(url[len(BASE):])
    return out


def test_two_workers_read_a_sites_sitemaps_once_and_politely(redis_url, tmp_path):
    require_real_web()
    # the premise: no page the crawl may fetch links to a page only in a sitemap
    for page in [SEED] + ONLY_IN_SITEMAPS:
        assert not links_of(page) & set(ONLY_IN_SITEMAPS) - {page}, page
    with NginxWeb([site(tmp_path)], tmp_path / "nginx") as web:
        workers = Workers(web, redis_url, tmp_path, [web.url(HOST, SEED)], "sitemaps",
                          {"DEPTH_LIMIT": 3, "CRAWL_SCOPE": "host", "SITEMAP_MAX_BYTES": MB})
        # the second worker joins first and waits for work (FRONTIER_IDLE_WAIT), so that
        # both are crawling when the seed comes, however loaded the machine
        workers.start(1, seeds=False)
        workers.wait_opened()
        workers.start(1)
        assert workers.wait() == [0, 0]
        records = web.settle_log()
    paths = Counter(r["path"] for r in records)
    status = {r["path"]: r["status"] for r in records}
    logs = [workers.log(i) for i in range(2)]

    def total(name):
        return sum(stat(log, name) for log in logs)

    # a page reachable only through a sitemap is fetched: from an index's gzip
    # urlset, a text sitemap, a broken sitemap's entry before the break, and a
    # gzip bomb's first entry
    for page in ONLY_IN_SITEMAPS:
        assert paths[page] == 1 and status[page] == 200, (page, paths[page])
    # every sitemap once per crawl, whichever worker read robots.txt or the index
    fetched = {"/robots.txt", "/sitemap-index.xml", "/sitemap-lib.xml.gz", "/sitemap-pages.txt",
               "/sitemap-broken.xml", "/sitemap-html.xml", "/sitemap-bomb.xml.gz",
               "/sitemap-huge.txt", "/sitemap-deep1.xml", "/sitemap-deep2.xml",
               "/maps/sub/outside.xml"}
    assert {p: paths[p] for p in fetched} == dict.fromkeys(fetched, 1)
    assert max(paths.values()) == 1, paths.most_common(3)
    # bounded: the index past SITEMAP_MAX_DEPTH is never asked for
    assert "/sitemap-deep3.xml" not in paths and total("sitemaps/dropped/depth") == 1
    # refused: other hosts' URLs, and a sitemap's URLs outside its directory
    assert {r["host"] for r in records} == {HOST}
    assert total("sitemaps/urls/dropped/cross_host") >= 2
    assert total("sitemaps/dropped/cross_host") == 1            # the index's other.test child
    assert total("sitemaps/urls/dropped/outside_path") == 2
    # no two requests at once to the host, and its Crawl-delay kept between any
    # two requests, sitemaps and robots.txt included (nginx logs in ms)
    assert checks.overlaps(records) == []
    bad = checks.politeness_violations(records, factor=0.0, crawl_delay_of={HOST: CRAWL_DELAY},
                                       ignore_paths=(), tolerance=0.002)
    assert bad == [], bad[:3]
    # each bad sitemap: counted, one line, the crawl went on
    assert total("sitemaps/invalid/malformed") == 1
    assert total("sitemaps/invalid/not_sitemap") == 1
    # the bomb, inflated to 1 MB, and the 3.6 MB file, downloaded to 1 MB
    assert total("sitemaps/invalid/too_large") == 2
    # (of its 150,000 lines, the 44,000 or so of its first megabyte)
    assert 35_000 < total("sitemaps/urls/found") < 50_000
    text = "\n".join(logs)
    assert len(re.findall(r"WARNING: Sitemap http://docs\.python\.test/sitemap-broken\.xml ", text)) == 1
    assert "Traceback" not in text
    assert total("sitemaps/fetched") == 10  # every sitemap but deep3
    assert not any(k.startswith("'sitemaps/failed") for log in logs for k in log.split())
    # (which worker leases the one host's pages is the machine's timing: one lease at
    # a time per host, and a worker that waits polls; each page once holds either way)
    # the crawl-wide counts the dashboard and /api/status show
    r = redis_lib.Redis.from_url(redis_url)
    sitemaps = crawl_status(r, Keyspace.found(r, "sitemaps"))["sitemaps"]
    assert sitemaps["fetched"] == 10 and sitemaps["invalid"] == 4  # broken, html, bomb, huge
    assert sitemaps["urls_found"] == total("sitemaps/urls/found")
    assert sitemaps["urls_admitted"] == total("sitemaps/urls/admitted") >= len(ONLY_IN_SITEMAPS)


@pytest.mark.parametrize("guess", [False, True])
def test_a_host_without_robots_txt_has_its_root_sitemap_tried_only_when_asked(
        guess, redis_url, tmp_path):
    """SITEMAP_GUESS: /sitemap.xml is tried where robots.txt names no
    sitemap (here it answers 404); off by default."""
    require_real_web()
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "sitemap.xml").write_text(urlset(f"{BASE}/library/zlib.html"))
    host = Site(HOST, PYTHON_DOCS, f"location = /sitemap.xml {{ alias {extra}/sitemap.xml; }}")
    with NginxWeb([host], tmp_path / "nginx") as web:
        workers = Workers(web, redis_url, tmp_path, [web.url(HOST, SEED)], f"guess-{guess}",
                          {"DEPTH_LIMIT": 1, "CRAWL_SCOPE": "host", "SITEMAP_GUESS": guess})
        workers.start(1)
        assert workers.wait() == [0]
        paths = Counter(r["path"] for r in web.settle_log())
    assert paths["/robots.txt"] == 1
    assert paths["/sitemap.xml"] == paths["/library/zlib.html"] == int(guess)
