"""What pages say to crawlers, obeyed in a real crawl of real pages.

Pages of Debian's Python 3.11 manual, copied into a document root of the
test's with robots meta tags, rel=nofollow links, canonical links and a meta
refresh put into the copies, and X-Robots-Tag and Link headers added by
nginx (tests/nginxweb.py), crawled by two `scrapy crawl web` workers. What
was fetched is read from nginx's access log; what is searchable from the
search API of `scrapy ui`; the links from `scrapy export-graph`; the rest
from the WARC files and page metadata.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from urllib.parse import urlencode, urljoin, urlsplit

import pyarrow.parquet as pq
import pytest
import redis as redis_lib

from crawlproj.redis.embedded import free_port
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.pagemeta import PageMetaStore
from tests.e2e import ROOT, Workers, stat, warc_records
from tests.nginxweb import PYTHON_DOCS, NginxWeb, Site, require_real_web

pytestmark = pytest.mark.e2e

HOST = "docs.python.test"
CRAWL = "robotsmeta"


def url(path: str) -> str:
    return f"http://{HOST}{path}"


# path: (page of the manual it is a copy of, what goes into its <head>,
# links put at the top of its <body>, a word no other page has)
PAGES = {
    "/hub.html": ("json", "", [
        ("/meta-nofollow.html", ""), ("/xrt-nofollow.html", ""), ("/xrt-otherbot.html", ""),
        ("/meta-noindex.html", ""), ("/xrt-noindex.html", ""), ("/later.html", ""),
        ("/original.html", ""), ("/copy1.html", ""), ("/copy2.html", ""), ("/copy3.html", ""),
        ("/refresh.html", ""), ("/noarchive.html", ""),
        ("/only-rel-nofollow.html", "nofollow"), ("/only-ugc.html", "ugc"),
        ("/only-sponsored.html", "Sponsored noopener"), ("/both.html", "nofollow"),
    ], "hubword"),
    "/meta-nofollow.html": ("marshal", '<meta name="robots" content="nofollow">',
                            [("/only-from-meta-nofollow.html", "")], "gnuword"),
    "/xrt-nofollow.html": ("csv", "", [("/only-from-xrt-nofollow.html", "")], "elandword"),
    "/xrt-otherbot.html": ("shelve", "", [("/from-xrt-otherbot.html", "")], "wombatother"),
    "/meta-noindex.html": ("copyreg", '<meta name="ROBOTS" content="NoIndex, follow">',
                           [("/from-meta-noindex.html", "")], "quaggaindex"),
    "/xrt-noindex.html": ("dbm", "", [], "okapiheader"),
    "/later.html": ("zlib", "", [], "narwhallater"),
    "/original.html": ("pickle", f'<link rel="canonical" href="{url("/original.html")}">', [],
                       "quokkacanon originalword"),
    "/copy1.html": ("pickle", '<link rel="canonical" href="/original.html">', [], "quokkacanon firstcopy"),
    "/copy2.html": ("pickle", '<link rel="canonical" href="original.html">', [], "quokkacanon secondcopy"),
    "/copy3.html": ("pickle", "", [], "quokkacanon thirdcopy"),
    "/refresh.html": ("gzip", '<meta http-equiv="refresh" content="0; url=/refresh-target.html">',
                      [("/from-refresh.html", ""), ("/both.html", "")], "ibexrefresh"),
    "/noarchive.html": ("lzma", '<meta name="crawlproj" content="noarchive">', [], "tapirarchive"),
}
# leaves: each linked from one place only (or /both.html from two)
LEAVES = ["/only-from-meta-nofollow.html", "/only-from-xrt-nofollow.html", "/from-xrt-otherbot.html",
          "/from-meta-noindex.html", "/only-rel-nofollow.html", "/only-ugc.html", "/only-sponsored.html",
          "/both.html", "/from-refresh.html", "/refresh-target.html"]
NEVER = ["/only-from-meta-nofollow.html", "/only-from-xrt-nofollow.html", "/only-rel-nofollow.html",
         "/only-ugc.html", "/only-sponsored.html"]
# nginx adds these response headers
HEADERS = {
    "/xrt-nofollow.html": ['X-Robots-Tag "otherbot: noindex"', 'X-Robots-Tag "crawlproj: nofollow"'],
    "/xrt-otherbot.html": ['X-Robots-Tag "otherbot: noindex, nofollow"'],
    "/xrt-noindex.html": ['X-Robots-Tag "noindex"'],
    "/copy3.html": [f"Link '<{url('/original.html')}>; rel=\"canonical\"'"],
}


def copy(manual_page: str, head: str, links: list[tuple[str, str]], words: str) -> bytes:
    html = (PYTHON_DOCS / "library" / f"{manual_page}.html").read_text()
    nav = "".join(f'<a href="{href}"{f" rel={rel!r}" if rel else ""}>{href}</a> ' for href, rel in links)
    html = html.replace("<head>", f"<head>{head}", 1)
    return html.replace("<body>", f"<body><p>{words}</p><nav>{nav}</nav>", 1).encode()


def site(root) -> Site:
    for path, page in PAGES.items():
        (root / path.lstrip("/")).write_bytes(copy(*page))
    leaf = (PYTHON_DOCS / "library" / "tarfile.html").read_text()
    for i, path in enumerate(LEAVES):
        (root / path.lstrip("/")).write_text(leaf.replace("<body>", f"<body><p>leaf{i}word</p>", 1))
    locations = "".join(f"location = {path} {{ {' '.join(f'add_header {h};' for h in headers)} }}\n"
                        for path, headers in HEADERS.items())
    return Site(HOST, root, locations)


def links_of(root, path: str, nofollow: bool = False) -> set[str]:
    """The paths on this site, other than its own, of the <a href> of a
    served page, read with the standard library: those without (or,
    nofollow=True, with) a nofollow link type."""
    out = set()
    for tag in re.findall(r"<a\s[^>]*>", (root / path.lstrip("/")).read_text()):
        href = re.search(r"""href=["']([^"']*)["']""", tag)
        rel = re.search(r"""rel=["']([^"']*)["']""", tag)
        marked = rel is not None and bool({"nofollow", "ugc", "sponsored"} & set(rel.group(1).lower().split()))
        if href is None or marked != nofollow:
            continue
        target = urlsplit(urljoin(url(path), href.group(1)))
        if target.netloc == HOST and target.path != path:  # not its own fragments
            out.add(target.path + (f"?{target.query}" if target.query else ""))
    return out


def scrapy(*args, env):
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def search(base: str, q: str) -> list[str]:
    with urllib.request.urlopen(f"{base}/api/search?{urlencode({'q': q, 'n': 10, 'per_host': 0})}",
                                timeout=30) as r:
        return [hit["url"] for hit in json.loads(r.read())["results"]]


@pytest.fixture(scope="module")
def crawl(redis_server, tmp_path_factory):
    require_real_web()
    if not redis_server.alive:
        redis_server.restart()
    tmp = tmp_path_factory.mktemp("robotsmeta-e2e")
    root = tmp / "site"
    root.mkdir()
    with redis_lib.Redis.from_url(redis_server.url) as r:
        r.flushall()
    with NginxWeb([site(root)], tmp / "nginx") as web:
        workers = Workers(web, redis_server.url, tmp, [url("/hub.html")], CRAWL,
                          {"DEPTH_LIMIT": 2, "CRAWL_SCOPE": "host", "FRONTIER_DELAY_FACTOR": 0})
        workers.start(2)
        assert workers.wait() == [0, 0]
        first = web.settle_log()
        env = dict(os.environ, CRAWL_DATA_DIR=str(tmp / "data"), CRAWL_ID=CRAWL, REDIS_URL=redis_server.url)
        graph = scrapy("export-graph", str(tmp / "graph"), env=env)
        assert graph.returncode == 0, graph.stderr
        with redis_lib.Redis.from_url(redis_server.url) as r:
            store = PageMetaStore(r, Keyspace.found(r, CRAWL), 4096)
            meta = {p: store.get(url(p)) for p in ("/copy1.html", "/copy2.html", "/copy3.html",
                                                   "/original.html", "/hub.html")}
        port = free_port()
        ui = subprocess.Popen([sys.executable, "-m", "scrapy", "ui", "--port", str(port)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = ui.stdout.readline()
            assert f"127.0.0.1:{port}" in line, line + ui.stderr.read()
            base = f"http://127.0.0.1:{port}"
            words = ["hubword", "wombatother", "quaggaindex", "okapiheader", "narwhallater", "quokkacanon",
                     "ibexrefresh", "tapirarchive", "gnuword", "elandword"]
            found = {w: search(base, w) for w in words}
            # the page found noindex on its next fetch: a second crawl after
            # the first one's Redis state is deleted (the index stays)
            later = root / "later.html"
            later.write_bytes(later.read_bytes().replace(b"<head>", b'<head><meta name="robots" '
                                                         b'content="noindex">', 1))
            gone = scrapy("crawls", "delete", CRAWL, "--yes", env=env)
            assert gone.returncode == 0, gone.stderr
            workers.start(2)
            assert workers.wait() == [0, 0, 0, 0]
            refound = {w: search(base, w) for w in ("narwhallater", "hubword")}
            # the index again from the WARC files alone: the same rules, read from the records
            rebuilt = scrapy("index", "--rebuild", env=env)
            assert rebuilt.returncode == 0, rebuilt.stderr
            rebuilt = {w: search(base, w) for w in words}
        finally:
            ui.terminate()
            ui.wait(30)
        yield {"tmp": tmp, "data": tmp / "data", "first": first, "all": web.settle_log(),
               "found": found, "refound": refound, "rebuilt": rebuilt, "meta": meta,
               "logs": [workers.log(i) for i in range(4)]}


def test_the_crawl_ran_clean(crawl):
    for log in crawl["logs"]:
        assert "'finish_reason': 'finished'" in log and "Traceback" not in log


def test_nofollow_pages_and_links_are_not_followed(crawl):
    paths = Counter(r["path"] for r in crawl["first"])
    assert max(paths.values()) == 1, paths.most_common(3)
    # every page of the site was fetched, once, but what only nofollow led to
    for path in [*PAGES, *LEAVES]:
        assert paths[path] == (0 if path in NEVER else 1), path
    # a refresh page's links and its target; a link nofollow on one page, plain on another
    assert paths["/from-refresh.html"] == paths["/refresh-target.html"] == paths["/both.html"] == 1
    # X-Robots-Tag for another crawler is not for this one
    assert paths["/from-xrt-otherbot.html"] == 1
    # the real pages' own links (most lead to no page of this site: 404):
    # those of the pages followed were requested, those only a nofollow page
    # or link leads to were not
    root = crawl["tmp"] / "site"
    plain = {path: links_of(root, path) for path in PAGES}
    followed = set().union(*(plain[p] for p in PAGES if p not in ("/meta-nofollow.html", "/xrt-nofollow.html")))
    assert followed <= set(paths), sorted(followed - set(paths))[:5]
    unfollowed = (plain["/meta-nofollow.html"] | plain["/xrt-nofollow.html"]
                  | links_of(root, "/hub.html", nofollow=True)) - followed
    assert len(unfollowed) > len(NEVER)  # the real pages' links among them
    assert not unfollowed & set(paths), sorted(unfollowed & set(paths))
    logs = crawl["logs"][:2]
    assert sum(stat(log, "robotsmeta/pages/nofollow") for log in logs) == 2
    assert sum(stat(log, "robotsmeta/links/nofollow") for log in logs) >= 5
    assert sum(stat(log, "web/refresh/followed") for log in logs) == 1


def test_noindex_pages_are_archived_not_searchable(crawl):
    found = crawl["found"]
    for word, path in [("hubword", "/hub.html"), ("wombatother", "/xrt-otherbot.html"),
                       ("narwhallater", "/later.html"), ("ibexrefresh", "/refresh.html"),
                       ("tapirarchive", "/noarchive.html"), ("gnuword", "/meta-nofollow.html"),
                       ("elandword", "/xrt-nofollow.html")]:
        assert found[word] == [url(path)], word
    assert found["quaggaindex"] == [] and found["okapiheader"] == []
    archived = {u for u, _ in warc_records(crawl["data"] / "warc", "response", "Crawlproj-Robots")}
    assert {url("/meta-noindex.html"), url("/xrt-noindex.html")} <= archived
    # a noindex,follow page's links are followed
    assert any(r["path"] == "/from-meta-noindex.html" for r in crawl["first"])
    assert sum(stat(log, "robotsmeta/pages/noindex") for log in crawl["logs"][:2]) == 2


def test_a_page_found_noindex_on_its_next_fetch_leaves_the_index(crawl):
    assert sum(1 for r in crawl["all"] if r["path"] == "/later.html") == 2
    assert crawl["found"]["narwhallater"] == [url("/later.html")]
    assert crawl["refound"]["narwhallater"] == []
    assert crawl["refound"]["hubword"] == [url("/hub.html")]


def test_the_index_rebuilt_from_the_warc_files_obeys_the_same(crawl):
    expected = {**crawl["found"], "narwhallater": []}  # its latest fetch said noindex
    assert crawl["rebuilt"] == expected


def test_pages_that_name_one_canonical_url_are_one_search_result(crawl):
    assert crawl["found"]["quokkacanon"] == [url("/original.html")]
    meta = crawl["meta"]
    for path in ("/copy1.html", "/copy2.html", "/copy3.html"):  # tags and the Link header
        assert meta[path].canonical == url("/original.html"), path
    assert meta["/original.html"].canonical == "" and meta["/hub.html"].canonical == ""


def test_the_graph_keeps_nofollow_links_marked(crawl):
    edges = pq.read_table(crawl["tmp"] / "graph" / "edges.parquet").to_pylist()
    urls = {u["id"]: u["url"] for u in pq.read_table(crawl["tmp"] / "graph" / "urls.parquet").to_pylist()}
    marks = {}
    for e in edges:
        marks.setdefault((urls[e["src"]], urls[e["dst"]]), set()).add(e["nofollow"])
    hub = url("/hub.html")
    for path in ("/only-rel-nofollow.html", "/only-ugc.html", "/only-sponsored.html", "/both.html"):
        assert marks[(hub, url(path))] == {True}, path
    assert marks[(hub, url("/meta-nofollow.html"))] == {False}
    assert marks[(url("/refresh.html"), url("/both.html"))] == {False}
    assert marks[(url("/refresh.html"), url("/refresh-target.html"))] == {False}
    root = crawl["tmp"] / "site"
    for page in ("/meta-nofollow.html", "/xrt-nofollow.html"):
        out = {urlsplit(d).path: m for (s, d), m in marks.items() if s == url(page)}
        assert set(out) >= links_of(root, page), page  # every link is there, marked
        assert all(m == {True} for m in out.values()), page
    assert marks[(url("/meta-nofollow.html"), url("/only-from-meta-nofollow.html"))] == {True}
    assert marks[(url("/xrt-otherbot.html"), url("/from-xrt-otherbot.html"))] == {False}


def test_a_noarchive_page_is_archived_marked_and_left_out_of_replay(crawl):
    records = warc_records(crawl["data"] / "warc", "response", "Crawlproj-Robots")
    marked = {u for u, mark in records if mark}
    assert marked == {url("/noarchive.html")}
    assert dict(records)[url("/noarchive.html")] == "noarchive"
    lines = [line for path in (crawl["data"] / "warc").glob("*.cdxj")
             for line in path.read_text().splitlines()]
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in lines}
    assert url("/hub.html") in indexed and url("/noarchive.html") not in indexed
