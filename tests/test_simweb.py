"""Tests of the simulated web (crawlproj.simweb): model, graph files, server,
log checks and the scrapy command."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import math
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from contextlib import redirect_stdout
from urllib.parse import urljoin, urlsplit

import lxml.html
import pytest

from crawlproj.simweb import SimWeb, checks, read_log
from crawlproj.simweb.testing import SimWebServer
from tests.data import SHARED_DATA, require

GRAPHS = SHARED_DATA / "graphs"
HOLLINS = f"{GRAPHS}/with_urls/hollins/hollins.dat.gz"


@pytest.fixture
def graph_files():
    require(GRAPHS)


needs_data = pytest.mark.usefixtures("graph_files")

SMALL = {"seed": 7, "hosts": 30, "pages": 400, "page_bytes": 2000,
         "p500": 0.03, "p_redirect": 0.03, "crawl_delay_fraction": 0.2}


def digest(web: SimWeb) -> str:
    h = hashlib.sha256()
    for v in range(web.n_nodes):
        r = web.respond(*web.host_path(v), t=0.0)
        h.update(f"{web.url(v)} {r.status} {r.location}\n".encode() + r.body)
    for host in web.hosts:
        h.update((web.robots_txt(host) or "-").encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------
# The generated web
# ---------------------------------------------------------------------------
def test_same_seed_same_web_different_seed_different_web():
    a, b = SimWeb.generate(**SMALL), SimWeb.generate(**SMALL)
    assert digest(a) == digest(b)
    c = SimWeb.generate(**dict(SMALL, seed=8))
    assert digest(c) != digest(a)
    assert [c.links(v) for v in range(50)] != [a.links(v) for v in range(50)]


def test_spec_round_trips_through_json():
    web = SimWeb.generate(**SMALL)
    again = SimWeb.from_spec(json.dumps(web.spec))
    assert again.spec == web.spec
    assert digest(again) == digest(web)
    with pytest.raises(TypeError):
        SimWeb.generate(no_such_option=1)


def test_host_sizes_are_zipf_like():
    web = SimWeb.generate(seed=3, hosts=200, pages=20000)
    sizes = sorted((web.host_size(h) for h in web.hosts), reverse=True)
    assert sum(sizes) == 20000 and min(sizes) >= 1
    assert sizes[0] >= 10 * sizes[len(sizes) // 2]
    # log-log slope of size vs rank over ranks 1..100 near -1 (loose)
    xs = [math.log(r + 1) for r in range(100)]
    ys = [math.log(s) for s in sizes[:100]]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert -1.5 < slope < -0.5


def test_links_in_degree_and_locality():
    web = SimWeb.generate(seed=5, hosts=100, pages=5000)
    offsets, targets = web.edges()
    n = web.n_nodes
    assert len(offsets) == n + 1
    indeg = Counter(targets)
    degs = sorted((indeg.get(v, 0) for v in range(n)), reverse=True)
    mean = sum(degs) / n
    assert degs[0] > 20 * mean                      # heavy tail
    assert sum(degs[: n // 100]) > 0.15 * sum(degs)  # top 1% hold a big share
    ok = [v for v in range(n) if web.status(v) == 200]
    mean_links = sum(len(web.links(v)) for v in ok) / len(ok)
    assert 12 <= mean_links <= 20
    local = total = 0
    for v in ok:
        h = web.host_path(v)[0]
        for u, _ in web.links(v):
            total += 1
            local += urlsplit(u).hostname == h
    assert 0.7 < local / total < 0.97


def test_urls_and_nodes_round_trip():
    web = SimWeb.generate(**SMALL)
    for v in range(web.n_nodes):
        u = web.url(v)
        assert web.node_of(u) == v
        assert web.node_of(u + "#frag") == v
    assert web.node_of("http://H0001.EXAMPLE:80/") == web.node_of("http://h0001.example/")
    v = next(v for v in range(web.n_nodes) if "/s" in web.url(v))
    host, path = web.host_path(v)
    k = int(path.split("/p")[1][:-5])
    for bad in [f"http://{host}/s{(k + 1) % 5}/p{k}.html", f"http://{host}/private/p{k}.html",
                f"http://{host}/s{k % 5}/p0{k}.html", f"http://{host}/s1/p999999.html",
                "http://nohost.example/", "ftp://x/", "mailto:a@b"]:
        assert web.node_of(bad) is None, bad
    assert all(h.endswith(".example") and h[0] == "h" for h in web.hosts)


def test_every_page_reachable_from_one_seed():
    web = SimWeb.generate(**SMALL)
    seeds = web.seeds(3)
    assert len(set(seeds)) == 3 and all(web.url(web.node_of(s)) == s for s in seeds)
    # seeds are the roots of the biggest hosts
    sizes = [web.host_size(urlsplit(s).hostname) for s in seeds]
    assert sizes == sorted(sizes, reverse=True) == sorted((web.host_size(h) for h in web.hosts), reverse=True)[:3]
    polite = web.reachable(seeds[:1])
    rude = web.reachable(seeds[:1], obey_robots=False)
    pages = {web.url(v) for v in range(web.n_nodes)}
    private = {u for u in pages if web.is_disallowed(u)}
    assert private and not private & polite
    assert pages - private <= polite
    assert pages <= rude
    extra = polite - pages
    assert any("/gone/" in u for u in extra) and any(u.endswith((".png", ".pdf")) for u in extra)
    assert not any(u.endswith("/robots.txt") for u in rude)
    for u in extra:  # 404 targets and binary resources answer what they claim
        st = web.respond(*urlsplit(u)[1:3]).status
        assert st == (404 if "/gone/" in u else 200)
    no_bin = web.reachable(seeds[:1], skip_extensions=(".png", ".pdf"))
    assert no_bin == {u for u in polite if not u.endswith((".png", ".pdf"))}
    shallow = web.reachable(seeds[:1], max_depth=1)
    assert seeds[0] in shallow and len(shallow) < len(polite)


def _extract(url: str, body: bytes) -> tuple[list[str], list[str], dict]:
    """What a careful crawler extracts: hrefs resolved against <base> or the
    page URL, fragments dropped, non-http links dropped."""
    doc = lxml.html.fromstring(body)
    base = doc.find(".//base")
    base_url = urljoin(url, base.get("href")) if base is not None else url
    urls, anchors, forms = [], [], Counter()
    for a in doc.iter("a"):
        href = a.get("href")
        if href.startswith(("mailto:", "javascript:")):
            forms["junk"] += 1
            continue
        forms["fragment"] += "#" in href
        forms["absolute" if href.startswith("http://") else "protocol" if href.startswith("//")
              else "root" if href.startswith("/") else "relative"] += 1
        urls.append(urljoin(base_url, href).split("#")[0])
        anchors.append(a.text_content())
    forms["base"] += base is not None
    return urls, anchors, forms


def check_links_resolve(web: SimWeb, nodes) -> Counter:
    forms = Counter()
    for v in nodes:
        r = web.respond(*web.host_path(v))
        if r.status != 200 or not r.content_type.startswith("text/html"):
            continue
        urls, anchors, f = _extract(web.url(v), r.body)
        forms += f
        links = web.links(v)
        assert urls == [u for u, _ in links], web.url(v)
        assert anchors == [a for _, a in links]
        assert lxml.html.fromstring(r.body).findtext(".//title") == web.title(v)
    return forms


def test_hrefs_resolve_to_the_links_and_use_every_form():
    web = SimWeb.generate(**SMALL)
    forms = check_links_resolve(web, range(web.n_nodes))
    for f in ("absolute", "protocol", "root", "relative", "fragment", "junk", "base"):
        assert forms[f] > 0, f
    # anchor text of a link is the target's title
    v = web.node_of(web.seeds(1)[0])
    url, anchor = next((u, a) for u, a in web.links(v) if web.node_of(u) is not None)
    assert anchor == web.title(web.node_of(url))


def test_page_size_and_small_pages():
    big = SimWeb.generate(seed=1, hosts=10, pages=50)
    small = SimWeb.generate(seed=1, hosts=10, pages=50, page_bytes=500)
    sizes = [len(big.render(v)) for v in range(50) if big.status(v) == 200]
    assert all(abs(s - 10000) < 200 for s in sizes if s < 10200)
    assert max(len(small.render(v)) for v in range(50)) < 3000


def test_statuses_redirects_binaries_and_robots():
    web = SimWeb.generate(**dict(SMALL, pages=2000, robots_fraction=0.5))
    st = Counter(web.status(v) for v in range(web.n_nodes))
    assert st[500] and st[301] and st[302] and st[200] > 0.8 * web.n_nodes
    for v in range(web.n_nodes):
        if web.status(v) in (301, 302):
            r = web.respond(*web.host_path(v))
            assert r.status == web.status(v) and r.location == web.redirect_target(v)
            assert web.status(web.node_of(r.location)) == 200
            assert not web.is_disallowed(r.location)
    robots_hosts = [h for h in web.hosts if web.robots_txt(h)]
    disallow = [h for h in robots_hosts if "Disallow: /private/" in web.robots_txt(h)]
    assert disallow and len(robots_hosts) < len(web.hosts)
    # protego (what Scrapy uses) agrees with is_disallowed
    from protego import Protego

    linked_private = set()
    for v in range(web.n_nodes):
        linked_private |= {u for u, _ in web.links(v) if "/private/" in u}
    assert linked_private
    for u in linked_private:
        rp = Protego.parse(web.robots_txt(urlsplit(u).hostname))
        assert not rp.can_fetch(u, "crawlproj") and web.is_disallowed(u)
    h = disallow[0]
    assert Protego.parse(web.robots_txt(h)).can_fetch(f"http://{h}/", "crawlproj")
    plain = next(h for h in web.hosts if not web.robots_txt(h))
    assert web.respond(plain, "/robots.txt").status == 404
    delays = {h: web.crawl_delay(h) for h in web.hosts if web.crawl_delay(h)}
    assert delays and all(d == 0.5 and f"Crawl-delay: {d:g}" in web.robots_txt(h) for h, d in delays.items())
    assert Protego.parse(web.robots_txt(next(iter(delays)))).crawl_delay("crawlproj") == 0.5
    # binary resources
    res = web.resource_urls()
    png = next(u for u in res if u.endswith(".png"))
    pdf = next(u for u in res if u.endswith(".pdf"))
    r = web.respond(*urlsplit(png)[1:3])
    assert r.status == 200 and r.content_type == "image/png" and r.body.startswith(b"\x89PNG\r\n\x1a\n")
    r = web.respond(*urlsplit(pdf)[1:3])
    assert r.content_type == "application/pdf" and r.body.startswith(b"%PDF-") and r.body.endswith(b"%%EOF\n")
    assert web.respond(urlsplit(png).hostname, "/img/99999.png").status == 404


def test_latency_per_host():
    fixed = SimWeb.generate(seed=1, hosts=10, pages=20, latency_ms=40)
    assert {fixed.latency(h) for h in fixed.hosts} == {0.04}
    ranged = SimWeb.generate(seed=1, hosts=50, pages=100, latency_ms=[10, 50])
    lat = [ranged.latency(h) for h in ranged.hosts]
    assert all(0.01 <= x <= 0.05 for x in lat) and len(set(lat)) > 40
    assert SimWeb.generate().latency("h0001.example") == 0


def test_pages_change_over_time():
    web = SimWeb.generate(seed=2, hosts=5, pages=40, change_rate=0.5, change_period=10.0)
    changing = [v for v in range(40) if web.version(v, 0.0) != web.version(v, 1e6)]
    static = [v for v in range(40) if v not in changing]
    assert changing and static
    v = changing[0]
    t = 1_000_000.0
    r = web.respond(*web.host_path(v), t=t)
    assert web.version(v, r.expires - 1e-3) == web.version(v, t)
    assert web.version(v, r.expires + 1e-3) == web.version(v, t) + 1
    assert web.render(v, t) != web.render(v, t + 10) and web.render(v, t) == web.render(v, t)
    assert web.links(v) == web.links(v)  # links never change
    s = static[0]
    assert web.render(s, t) == web.render(s, t + 1000)
    assert web.respond(*web.host_path(s), t=t).expires == math.inf


# ---------------------------------------------------------------------------
# Graph files
# ---------------------------------------------------------------------------
@needs_data
def test_hollins_keeps_real_hosts_and_paths():
    web = SimWeb.from_graph(HOLLINS)
    assert web.format == "dat"
    # every URL of the file is one the frontier admits, two of them on misspelt hosts
    assert web.n_nodes == 6012 and "skipped_urls" not in web.load_stats
    assert sorted(web.hosts) == ["www.hollins.edu", "www1", "www1.hollins", "www1.hollins.edu"]
    u = "http://www1.hollins.edu/Docs/CampusLife/StudentAct/studentorgs/Habitat/photos.htm"
    v = web.node_of(u)
    assert v is not None and web.url(v) == u
    assert web.edges()[0][-1] == web.load_stats["edges"] == 23875
    from scrapy import Request

    for v in range(0, web.n_nodes, 7):  # stored as Scrapy will request them
        assert Request(web.url(v)).url == web.url(v)
        assert web.node_of(web.url(v)) == v
    pdf = next(v for v in range(web.n_nodes) if web.url(v).endswith(".pdf") and not web.out_links(v))
    assert web.respond(*web.host_path(pdf)).content_type == "application/pdf"
    check_links_resolve(web, range(0, web.n_nodes, 5))
    seeds = web.seeds(3)
    assert seeds[0] == "http://www.hollins.edu/"
    assert len(web.reachable(seeds)) > 5000


@pytest.mark.slow
@needs_data
def test_kleinberg_gml_tsaparas_and_hostgraph_files():
    cal = SimWeb.from_graph(f"{GRAPHS}/with_urls/kleinberg_california/gr0.California.gz")
    assert cal.format == "kleinberg" and cal.load_stats["skipped_urls"] > 0
    assert 9000 < cal.n_nodes < 9664 and len(cal.hosts) > 5000
    assert cal.node_of("http://www.berkeley.edu/") is not None
    epa = SimWeb.from_graph(f"{GRAPHS}/with_urls/kleinberg_epa/gr0.epa.nodes.gz")  # finds the edges file
    assert 4500 < epa.n_nodes <= 4772 and 8500 < epa.load_stats["edges"] <= 8965
    blogs = SimWeb.from_graph(f"{GRAPHS}/with_urls/polblogs/polblogs.gml.gz")
    assert blogs.format == "gml" and 1480 <= blogs.n_nodes <= 1490
    assert blogs.node_of("http://12thharmonic.com/wordpress") is not None
    check_links_resolve(blogs, range(0, blogs.n_nodes, 10))
    edu = SimWeb.from_graph(f"{GRAPHS}/with_urls/tsaparas_lar/Education")
    assert edu.format == "tsaparas" and edu.n_nodes == 742 and edu.load_stats["edges"] == 1205
    assert edu.title(0) == "15-852 RANDOMIZED ALGORITHMS"
    check_links_resolve(edu, range(edu.n_nodes))
    uk = SimWeb.from_graph(f"{GRAPHS}/with_urls/ukwa_1996_hostgraph/1996-uk-web-hosts.tsv.gz")
    assert uk.format == "hostgraph" and len(uk.hosts) == uk.n_nodes > 50000
    assert all(uk.url(v).endswith("/") and uk.url(v).count("/") == 3 for v in range(0, uk.n_nodes, 97))
    from scrapy import Request

    for web in (cal, epa, blogs, edu):
        for v in range(web.n_nodes):
            assert Request(web.url(v)).url == web.url(v) and web.node_of(web.url(v)) == v


@needs_data
def test_cnr_2000_loads_into_compact_arrays():
    t = time.monotonic()
    web = SimWeb.from_graph(f"{GRAPHS}/cnr-2000.edges.tsv.gz", nodes_per_host=1000)
    took = time.monotonic() - t
    offsets, targets = web.edges()
    assert web.n_nodes == 325557 and len(targets) == 3216152 and len(offsets) == 325558
    assert targets.itemsize == 4  # arrays, not Python lists
    assert list(targets[offsets[0]:offsets[1]])[:2] == [1, 4]
    assert len(web.hosts) == 326 and web.url(0) == "http://h0001.example/"
    assert web.url(1000) == "http://h0002.example/" and web.url(1001) == "http://h0002.example/n1001.html"
    assert web.node_of("http://h0002.example/n1001.html") == 1001
    assert web.node_of("http://h0001.example/n1001.html") is None
    assert took < 60  # sanity only


def test_edge_list_comments_gzip_unsorted(tmp_path):
    p = tmp_path / "g.tsv.gz"
    with gzip.open(p, "wt") as f:
        f.write("# a comment\n% another\n3\t0\n0 2\n0\t1\n\n2\t3\n")
    web = SimWeb.from_graph(str(p), nodes_per_host=2)
    assert web.format == "edges" and web.n_nodes == 4 and web.hosts == ["h0001.example", "h0002.example"]
    assert [web.out_links(v) for v in range(4)] == [[2, 1], [], [3], [0]]
    assert web.seeds(1) == ["http://h0001.example/"]
    assert web.reachable(web.seeds(1)) == {web.url(v) for v in range(4)}
    r = web.respond("h0002.example", "/n3.html")
    assert r.status == 200 and _extract("http://h0002.example/n3.html", r.body)[0] == ["http://h0001.example/"]


# ---------------------------------------------------------------------------
# The server, over real HTTP
# ---------------------------------------------------------------------------
SERVED = dict(SMALL, latency_ms=0, change_rate=0.0)


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    log = tmp_path_factory.mktemp("simweb") / "requests.jsonl"
    with SimWebServer(SERVED, log_path=str(log)) as server:
        yield server


def test_proxy_serves_pages_to_urllib(sw):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": sw.proxy_url}))
    web = sw.web
    url = web.seeds(1)[0]
    with opener.open(url, timeout=10) as r:
        body = r.read()
        assert r.status == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert int(r.headers["Content-Length"]) == len(body)
    assert body == web.render(web.node_of(url))
    # urllib follows a redirect through the proxy
    red = next(v for v in range(web.n_nodes) if web.status(v) in (301, 302))
    with opener.open(web.url(red), timeout=10) as r:
        assert r.geturl() == web.redirect_target(red) and r.status == 200


def test_statuses_over_http(sw):
    web = sw.web
    red = next(v for v in range(web.n_nodes) if web.status(v) in (301, 302))
    st, h, _ = sw.fetch(web.url(red))
    assert st == web.status(red) and h["location"] == web.redirect_target(red)
    err = next(v for v in range(web.n_nodes) if web.status(v) == 500)
    assert sw.fetch(web.url(err))[0] == 500
    assert sw.fetch(f"http://{web.hosts[0]}/gone/1.html")[0] == 404
    robots_host = next(h for h in web.hosts if web.robots_txt(h))
    st, h, body = sw.fetch(f"http://{robots_host}/robots.txt")
    assert st == 200 and body.decode() == web.robots_txt(robots_host) and h["content-type"].startswith("text/plain")
    plain = next(h for h in web.hosts if not web.robots_txt(h))
    assert sw.fetch(f"http://{plain}/robots.txt")[0] == 404
    png = next(u for u in web.resource_urls() if u.endswith(".png"))
    st, h, body = sw.fetch(png)
    assert st == 200 and h["content-type"] == "image/png" and int(h["content-length"]) == len(body) > 0
    st, h, body = sw.fetch(png, method="HEAD")
    assert st == 200 and body == b"" and int(h["content-length"]) > 0
    st, _, body = sw.fetch("http://unknown.example/")
    assert st == 502 and b"unknown host" in body
    assert sw.fetch(web.seeds(1)[0], method="POST")[0] == 405


def raw(port: int, data: bytes, wait: float = 0.3) -> bytes:
    """Send bytes, read until the server closes or `wait` passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.settimeout(wait)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def test_origin_form_pipelining_and_connect(sw):
    h = sw.web.hosts[0]
    out = raw(sw.port, f"GET / HTTP/1.1\r\nHost: {h}\r\n\r\nGET /robots.txt HTTP/1.1\r\nHost: {h}\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.count(b"HTTP/1.1 ") == 2
    assert raw(sw.port, b"CONNECT h0001.example:443 HTTP/1.1\r\nHost: h0001.example:443\r\n\r\n").startswith(
        b"HTTP/1.1 405 ")
    out = raw(sw.port, f"GET http://{h}/ HTTP/1.0\r\n\r\n".encode())
    assert b"Connection: close" in out.split(b"\r\n\r\n")[0]


def test_garbage_does_not_kill_the_server(sw):
    port = sw.port
    assert raw(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET / HTTP/1.1\r\nbad header line\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET / HTTP/1.1\r\nX: " + b"a" * 40000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
    assert raw(port, b"\x00\xff\x16\x03\x01" * 5000).startswith(b"HTTP/1.1 431 ")
    assert raw(port, b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    for partial in (b"GET http://h0001.example/ HT", b"GET / HTTP/1.1\r\nHost: h0001"):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(partial)
        s.close()  # disconnect mid-request
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {sw.web.seeds(1)[0]} HTTP/1.1\r\n\r\n".encode())
    s.close()  # disconnect before reading the answer
    assert sw.fetch(sw.web.seeds(1)[0])[0] == 200


def test_log_records_every_request(sw):
    web = sw.web
    marker = f"test-log-{time.time()}"
    urls = web.seeds(2) + [f"http://{web.hosts[1]}/robots.txt"]
    for u in urls:
        sw.fetch(u, headers={"User-Agent": marker})
    # two requests on one keep-alive connection
    h = web.hosts[0]
    raw(sw.port, f"GET / HTTP/1.1\r\nHost: {h}\r\nUser-Agent: {marker}-ka\r\n\r\n"
                 f"GET /robots.txt HTTP/1.1\r\nHost: {h}\r\nUser-Agent: {marker}-ka\r\n\r\n".encode())
    recs = sw.wait_log(lambda rs: sum(r["ua"].startswith(marker) for r in rs) >= 5)
    mine = [r for r in recs if r["ua"] == marker]
    assert [checks.url_of(r) for r in mine] == urls
    for r in mine:
        assert set(r) >= {"t0", "t1", "conn", "method", "host", "path", "status", "bytes", "ua"}
        assert r["t0"] <= r["t1"]
        host, path = urlsplit(checks.url_of(r))[1:3]
        resp = web.respond(host, path)
        assert r["status"] == resp.status and r["bytes"] == len(resp.body) and r["method"] == "GET"
    ka = [r for r in recs if r["ua"] == marker + "-ka"]
    assert len(ka) == 2 and ka[0]["conn"] == ka[1]["conn"]
    assert len({r["conn"] for r in mine}) == len(mine)
    assert read_log(sw.log_path) == sw.read_log()


def test_latency_delays_one_host_not_the_others(tmp_path):
    web = SimWeb.generate(seed=1, hosts=8, pages=40, latency_ms=200, page_bytes=1000)
    with SimWebServer(web, log_path=str(tmp_path / "log.jsonl")) as sw:
        assert sw.web is web
        assert sw.fetch(sw.web.seeds(1)[0])[0] == 200
        (first,) = sw.wait_log(1)
        delayed = first["t1"] - first["t0"]  # the server's own record of the latency
        assert delayed >= 0.2
        threads = [threading.Thread(target=sw.fetch, args=(f"http://{h}/",)) for h in sw.web.hosts[:4]]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        recs = sw.wait_log(5)
        # a client that leaves while the host is "thinking" is logged as aborted
        s = socket.create_connection(("127.0.0.1", sw.port))
        s.sendall(f"GET http://{web.hosts[5]}/ HTTP/1.1\r\n\r\n".encode())
        s.close()
        aborted = sw.wait_log(6)[5:]
    assert len(aborted) == 1 and aborted[0].get("aborted") is True and aborted[0]["host"] == web.hosts[5]
    assert all(r["t1"] - r["t0"] >= 0.19 for r in recs)
    # the four parallel requests were in flight at the same time
    par = sorted(recs[1:], key=lambda r: r["t0"])
    assert max(r["t0"] for r in par) < min(r["t1"] for r in par)
    # and the same holds with overlaps() when hosts are merged
    assert len(checks.overlaps([dict(r, host="x") for r in par])) == 3


def test_changing_pages_served_by_version(tmp_path):
    spec = {"seed": 4, "hosts": 3, "pages": 20, "change_rate": 1.0, "change_period": 1.0, "page_bytes": 1000}
    with SimWebServer(spec) as sw:
        url = sw.web.seeds(1)[0]
        v = sw.web.node_of(url)
        t0 = time.time()
        b1 = sw.fetch(url)[2]
        t1 = time.time()
        time.sleep(1.1)
        t2 = time.time()
        b2 = sw.fetch(url)[2]
        t3 = time.time()
    assert b1 != b2
    assert b1 in (sw.web.render(v, t0), sw.web.render(v, t1))
    assert b2 in (sw.web.render(v, t2), sw.web.render(v, t3))


def test_sigterm_flushes_the_log(tmp_path):
    log = tmp_path / "log.jsonl"
    server = SimWebServer({"seed": 1, "hosts": 2, "pages": 4}, log_path=str(log)).start()
    try:
        for _ in range(3):
            server.fetch("http://h0001.example/")
    finally:
        code = server.stop()
    assert code == 0
    assert len(read_log(str(log))) == 3


@pytest.mark.e2e
def test_unmodified_scrapy_crawls_the_reachable_set(tmp_path):
    """A stock Scrapy spider with http_proxy fetches exactly web.reachable()."""
    spider = tmp_path / "spider.py"
    spider.write_text(
        "import scrapy\n"
        "from scrapy.linkextractors import LinkExtractor\n"
        "class S(scrapy.Spider):\n"
        "    name = 's'\n"
        "    custom_settings = {'ROBOTSTXT_OBEY': True, 'RETRY_ENABLED': False, 'HTTPERROR_ALLOW_ALL': True,\n"
        "                       'CONCURRENT_REQUESTS_PER_DOMAIN': 1, 'TELNETCONSOLE_ENABLED': False,\n"
        "                       'LOG_LEVEL': 'WARNING'}\n"
        "    le = LinkExtractor(deny_extensions=[])\n"
        "    def __init__(self, seeds='', **kw):\n"
        "        super().__init__(**kw)\n"
        "        self.start_urls = seeds.split(',')\n"
        "    def parse(self, response):\n"
        "        if hasattr(response, 'text'):\n"
        "            for link in self.le.extract_links(response):\n"
        "                yield response.follow(link.url, self.parse)\n")
    spec = {"seed": 11, "hosts": 15, "pages": 150, "page_bytes": 1500, "crawl_delay_fraction": 0.0,
            "robots_fraction": 0.5, "p500": 0.03, "p_redirect": 0.03}
    with SimWebServer(spec, log_path=str(tmp_path / "log.jsonl")) as sw:
        seeds = sw.web.seeds(1)
        env = sw.env()
        env.pop("SCRAPY_SETTINGS_MODULE", None)  # a bare Scrapy, not this project's settings
        p = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", "seeds=" + seeds[0]],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
        recs = sw.wait_log(lambda rs: False, timeout=0.3)
    assert set(checks.fetch_counts(recs)) == sw.web.reachable(seeds)
    assert not checks.overlaps(recs, ignore_paths=("/robots.txt",))
    assert {r["host"] for r in recs if r["path"] == "/robots.txt"} == {r["host"] for r in recs}


# ---------------------------------------------------------------------------
# Log checks on hand-made records
# ---------------------------------------------------------------------------
def rec(host, path, t0, t1):
    return {"host": host, "path": path, "t0": t0, "t1": t1, "status": 200, "bytes": 1, "conn": 1}


def test_overlaps():
    rs = [rec("a", "/1", 0.0, 1.0), rec("a", "/2", 0.5, 0.7), rec("a", "/3", 0.9, 2.0),
          rec("a", "/4", 2.0, 2.5), rec("b", "/1", 0.1, 5.0), rec("a", "/robots.txt", 2.1, 2.2)]
    got = [(h, r1["path"], r2["path"]) for h, r1, r2 in checks.overlaps(rs)]
    assert got == [("a", "/1", "/2"), ("a", "/1", "/3"), ("a", "/4", "/robots.txt")]
    assert len(checks.overlaps(rs, ignore_paths=("/robots.txt",))) == 2


def test_max_in_flight():
    rs = [rec("a", "/1", 0.0, 1.0), rec("b", "/1", 0.5, 0.7), rec("c", "/1", 0.6, 2.0),
          rec("a", "/2", 1.0, 1.5), rec("b", "/2", 2.0, 2.5)]
    # three at 0.6-0.7; /2 of a starts as /1 of a ends: two, not three
    assert checks.max_in_flight(rs) == 3
    assert checks.max_in_flight(rs[3:]) == 1
    assert checks.max_in_flight([]) == 0


def test_politeness_violations():
    # durations 0.1 s; factor 10 -> 1 s gap needed
    rs = [rec("a", "/1", 0.0, 0.1), rec("a", "/2", 1.1, 1.2), rec("a", "/3", 1.8, 1.9),
          rec("a", "/robots.txt", 1.95, 1.96), rec("b", "/1", 0.0, 0.1), rec("b", "/2", 0.2, 0.3)]
    v = checks.politeness_violations(rs, factor=10, tolerance=0.05)
    assert [(x.host, x.prev["path"], x.next["path"]) for x in v] == [("a", "/2", "/3"), ("b", "/1", "/2")]
    assert v[0].required == pytest.approx(1.0) and v[0].gap == pytest.approx(0.6)
    assert checks.politeness_violations(rs, factor=0) == []
    assert len(checks.politeness_violations(rs, factor=0, min_delay=0.5)) == 1  # only b (gap 0.1)
    assert checks.politeness_violations(rs, factor=10, max_delay=0.05) == []  # clamped
    cd = checks.politeness_violations(rs, factor=0, crawl_delay_of={"a": 0.9})
    assert [(x.host, x.next["path"]) for x in cd] == [("a", "/3")]
    assert checks.politeness_violations(rs, factor=0, crawl_delay_of=lambda h: 0.5) != []
    assert checks.politeness_violations(rs, factor=10, tolerance=1.0) == []
    assert len(checks.politeness_violations(rs, factor=10, ignore_paths=())) == 3


def test_fetch_counts_and_ordering():
    rs = [rec("a", "/2", 2.0, 2.1), rec("a", "/1", 1.0, 1.1), rec("a", "/robots.txt", 0.5, 0.6),
          rec("b", "/", 1.5, 1.6), rec("a", "/1", 3.0, 3.1)]
    assert checks.fetch_counts(rs) == Counter({"http://a/1": 2, "http://a/2": 1, "http://b/": 1})
    assert checks.arrival_order(rs) == ["http://a/1", "http://b/", "http://a/2"]
    assert checks.arrival_positions(rs) == {"http://a/1": 0, "http://b/": 1, "http://a/2": 2}
    assert checks.read_log is read_log


# ---------------------------------------------------------------------------
# The scrapy command (run() called directly: the command module is found by
# Scrapy through COMMANDS_MODULE, which needs the whole project to import)
# ---------------------------------------------------------------------------
def test_scrapy_simweb_info(tmp_path):
    from scrapy.settings import Settings

    from crawlproj.commands.simweb import Command

    cmd = Command()
    cmd.settings = Settings()
    parser = argparse.ArgumentParser()
    cmd.add_options(parser)
    seeds = tmp_path / "seeds.txt"
    opts = parser.parse_args(["--hosts", "20", "--pages", "100", "--latency-ms", "5-10",
                              "--seeds-out", str(seeds), "--num-seeds", "3"])
    out = io.StringIO()
    with redirect_stdout(out):
        cmd.run(["info"], opts)
    text = out.getvalue()
    assert "20 hosts, 100 pages" in text and "reachable from the seeds" in text
    web = SimWeb.generate(hosts=20, pages=100, latency_ms=[5.0, 10.0])
    assert seeds.read_text().split() == web.seeds(3)
    from scrapy.exceptions import UsageError

    with pytest.raises(UsageError):
        cmd.run(["info"], parser.parse_args(["--graph", "x.tsv", "--p404", "0.1"]))
    with pytest.raises(UsageError):
        cmd.run(["dance"], opts)
