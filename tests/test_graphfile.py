"""The one reader of link-graph files (crawlproj.graphfile): the virtual
crawler and the simulated web see the same pages, links and URLs; the URL rule
is the frontier's; bad lines are named; no import circle around it."""

from __future__ import annotations

import ast
import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Request

from crawlproj import graphfile
from crawlproj.evaluate.graph import read_graph
from crawlproj.graphfile import GraphFormatError, page_url
from crawlproj.seeds import MAX_URL_LENGTH
from crawlproj.simweb import SimWeb
from crawlproj.urls import refusal, server_key
from tests.data import SHARED_DATA, require

ROOT = Path(__file__).resolve().parents[1]
WITH_URLS = SHARED_DATA / "graphs" / "with_urls"
DATASETS = ["hollins/hollins.dat.gz", "kleinberg_california/gr0.California.gz",
            "kleinberg_epa/gr0.epa.nodes.gz", "polblogs/polblogs.gml.gz",
            "ukwa_1996_hostgraph/1996-uk-web-hosts.tsv.gz"] + [
            f"tsaparas_lar/{d}" for d in ("Cars", "Education", "Movies", "Parks", "cheese")]


# -- Both paths, every dataset with URLs -------------------------------------------

@pytest.mark.parametrize("name", DATASETS)
def test_virtual_crawler_and_simulated_web_read_the_same_graph(name):
    path = str(require(WITH_URLS / name))
    g = read_graph(path, keep_self_loops=True)
    web = SimWeb.from_graph(path)
    assert g.n == web.n_nodes
    assert g.urls == [web.url(v) for v in range(web.n_nodes)]
    offsets, targets = web.edges()
    web_links = {(v, int(t)) for v in range(web.n_nodes) for t in targets[offsets[v]:offsets[v + 1]]}
    rows, cols = g.adjacency.nonzero()
    assert set(zip(rows.tolist(), cols.tolist())) == web_links
    # the hosts: the evaluator's politeness key is the server the simulated web
    # serves (a fully qualified name, "host.", is the server "host")
    assert [g.host_names[h] for h in g.hosts] == \
        [server_key(web.hosts[web.host_of(v)]) for v in range(web.n_nodes)]


def test_hollins_keeps_its_two_misspelt_hosts_as_a_crawler_would_fetch_them():
    g = graphfile.read(f"{WITH_URLS}/hollins/hollins.dat.gz")
    assert g.n == 6012 and g.stats == {"edges": 23875}
    assert "http://www1.hollins/edu/classes/dance/website/home.htm" in g.urls
    assert "http://www1/hollins.edu/classes/dance/website/vanessaweb/gallerydirectory.html" in g.urls


# -- The URL rule ------------------------------------------------------------------------

@pytest.mark.parametrize("raw, url", [
    ("http://Example.COM", "http://example.com/"),
    ("  http://user:pw@www.example.com:80/a b?q=1#frag ", "http://www.example.com/a%20b?q=1"),
    ("http://example.com:8080/x?", "http://example.com:8080/x"),
    ("http://bücher.de/ä", "http://xn--bcher-kva.de/%C3%A4"),
    ("http://www1/hollins.edu/x.html", "http://www1/hollins.edu/x.html"),
    ("http://194.131.191/", "http://194.131.0.191/"),  # IPv4 as browsers (and host_of) read it
    ("http://a.example/[x]?q={y}", "http://a.example/%5Bx%5D?q=%7By%7D"),
])
def test_a_url_is_kept_as_scrapy_requests_it(raw, url):
    assert page_url(raw) == url
    assert Request(url).url == url and page_url(url) == url


URLS = ["http://example.com/a", "https://example.com/", "ftp://example.com/",
        "http://my host.example/", "http://-bad-.example/", "http://my_host.example/",
        "http://159.121.249.002/x", "http://10.0.0.1/", "http://example.com:port/",
        "http:/cacb/docs", "http://www.netscape.com\\", "http://example.com/" + "x" * 2100]


def test_a_page_is_a_url_the_frontier_admits_and_the_simulated_web_serves():
    kept = [u for u in URLS if page_url(u) is not None]
    assert kept == [u for u in URLS if u.startswith("http://") and refusal(u, MAX_URL_LENGTH) is None]
    assert "http://example.com/a" in kept and len(kept) < len(URLS) - 3


def test_refused_urls_go_with_their_links_and_equal_urls_are_one_page(tmp_path):
    p = tmp_path / "gr0.small"
    p.write_text("3\nn 0 http://a.example/\nn 1 http://A.example\nn 2 http://bad host/\n"
                 "n 3 http://b.example/x#top\ne 0 1\ne 0 2\ne 2 3\ne 3 1\ne 3 0\n")
    g = graphfile.read(str(p))
    assert g.format == "kleinberg" and g.urls == ["http://a.example/", "http://b.example/x"]
    assert g.stats == {"merged_urls": 1, "skipped_urls": 1, "dropped_edges": 2, "edges": 3}
    links = [list(g.targets[g.offsets[v]:g.offsets[v + 1]]) for v in range(g.n)]
    assert links == [[0], [0, 0]]  # the file's links in order: a->a (was a->A), b->A, b->a


# -- Formats and their errors ----------------------------------------------------------

def test_edge_lists_plain_weighted_and_with_a_node_count(tmp_path):
    p = tmp_path / "g.tsv.gz"
    with gzip.open(p, "wt") as f:
        f.write("# nodes: 5\n% weights follow\n3 0 0.5\n0 2 1\n0 1 7\n")
    g = graphfile.read(str(p))
    assert g.format == "edges" and g.n == 5 and g.urls is None
    assert [list(g.targets[g.offsets[v]:g.offsets[v + 1]]) for v in range(5)] == [[2, 1], [], [], [0], []]
    p.write_bytes(b"0 1 0.5\n1 2\n")
    with pytest.raises(GraphFormatError, match=r"g.tsv.gz:2: expected 3 columns"):
        graphfile.read(str(p))
    p.write_bytes(b"0 1 2\n3\n")  # as many fields as two rows of two, in other rows
    with pytest.raises(GraphFormatError, match=r"g.tsv.gz:2: expected 3 columns"):
        graphfile.read(str(p))
    p.write_bytes(b"0\t1\n2\t0\n1\t2\n")  # the block path and the line path agree
    fast = graphfile.read(str(p))
    p.write_bytes(b"0   1\n\n2 0\r\n 1\t2\n")
    slow = graphfile.read(str(p))
    assert (fast.offsets, fast.targets) == (slow.offsets, slow.targets) and fast.n == 3
    p.write_bytes(b"# nodes: 2\n0 1\n1 2\n")
    with pytest.raises(GraphFormatError, match="header says 2 nodes but id 2 occurs"):
        graphfile.read(str(p))


def test_every_format_names_its_first_bad_line(tmp_path):
    cases = {
        "h.dat": ("2 1\n1 http://a.example/\n2 http://b.example/\n1 x\n", r"h.dat:4: expected 'SRC DST'"),
        "gr0.k": ("n 0 http://a.example/\ne 0 1\nx 1 2\n", r"gr0.k:3: expected 'n ID URL' or 'e SRC DST'"),
        "hosts.tsv": ("1996|a.example|b.example\t1\n1996|a.example\t2\n",
                      r"hosts.tsv:2: expected 'YEAR\|SRC_HOST\|DST_HOST<TAB>COUNT'"),
    }
    for name, (text, error) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(GraphFormatError, match=error):
            graphfile.read(str(tmp_path / name))
    (tmp_path / "short.dat").write_text("2 3\n1 http://a.example/\n2 http://b.example/\n1 2\n")
    with pytest.raises(GraphFormatError, match="header promises 3 links, file has 1"):
        graphfile.read(str(tmp_path / "short.dat"))
    with pytest.raises(GraphFormatError, match="unknown graph format"):
        graphfile.read(str(tmp_path / "h.dat"), format="csv")


def test_two_file_kleinberg_graph_found_from_the_nodes_file(tmp_path):
    (tmp_path / "g.nodes").write_text("2\nn 0 http://a.example/\nn 1 http://b.example/\n")
    (tmp_path / "g.edges").write_text("e 0 1\ne 1 0\n")
    g = graphfile.read(str(tmp_path / "g.nodes"))
    assert g.format == "kleinberg" and g.n == 2 and list(g.targets) == [1, 0]


def test_simweb_command_reports_a_bad_graph_file_in_one_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("0 1\n1 x\n")
    run = subprocess.run([sys.executable, "-m", "scrapy", "simweb", "info", "--graph", str(bad)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "bad.tsv:2: expected" in run.stderr and "Traceback" not in run.stderr


# -- No import circle ---------------------------------------------------------------------

def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """crawlproj modules that module imports anywhere in its body (functions too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return (found & known) - {module}


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "crawlproj").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def test_no_crawlproj_module_imports_one_that_imports_it_back():
    mods = _modules()
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    cycles = []
    for start in graph:  # a path from start back to start is a circle
        stack, seen = [(start, (start,))], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join(trail + (start,)))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, trail + (nxt,)))
    assert cycles == []


@pytest.mark.parametrize("module", ["crawlproj.graphfile", "crawlproj.simweb.model",
                                    "crawlproj.simweb.server", "crawlproj.simweb.testing",
                                    "crawlproj.simweb.checks", "crawlproj.evaluate.graph",
                                    "crawlproj.evaluate.run", "crawlproj.commands.simweb",
                                    "crawlproj.commands.evaluate"])
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    run = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
