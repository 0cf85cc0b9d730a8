"""The virtual crawler (crawlproj.evaluate): each order on hand graphs, Cho's measures
on a hand example, graph files, and `scrapy evaluate` end to end."""

from __future__ import annotations

import csv
import gzip
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from crawlproj.evaluate import metrics
from crawlproj.evaluate.crawler import OPIC, virtual_crawl
from crawlproj.evaluate.graph import Graph, GraphFormatError, read_graph
from crawlproj.prioritizers import importance
from crawlproj.ranker.pagerank import build_adjacency

ROOT = Path(__file__).resolve().parents[1]


def graph(edges, n=None, urls=None):
    src, dst = zip(*edges) if edges else ((), ())
    g = Graph(build_adjacency(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), n))
    if urls:
        from crawlproj.evaluate.graph import _hosts
        g.urls = urls
        g.hosts, g.host_names = _hosts(urls)
    return g


def crawl(g, order, start=0, **kw):
    return virtual_crawl(g, order, start, **kw).tolist()


def is_valid_crawl(g, order, start):
    """Each crawled page but the start was linked from a page crawled before it,
    and every page reachable from the start is crawled once."""
    seen = {start}
    assert order[0] == start
    for p in order[1:]:
        parents = set(np.flatnonzero(g.adjacency[:, p].toarray().ravel()).tolist())
        assert parents & seen, p
        seen.add(p)
    assert len(order) == len(set(order)) == int(metrics.reachable(g, start).sum())


# -- Orders on hand graphs ----------------------------------------------------------------

# 0 -> 1, 2; 1 -> 3, 4, 5; 2 -> 6
TREE = [(0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6)]


def test_bfs_is_discovery_order():
    assert crawl(graph(TREE), "bfs") == [0, 1, 2, 3, 4, 5, 6]
    # Only what is reachable from the start is crawled.
    assert crawl(graph(TREE), "bfs", start=1) == [1, 3, 4, 5]


def test_backlinks_follows_links_seen_so_far():
    # 0 -> 1, 2, 3; 1 -> 3, 4; 3 -> 5; 2 -> 5.
    # After 0: 1, 2, 3 have IB' 1 (tie: discovery order) -> 1. After 1: 3 has 2 -> 3.
    # After 3: 2, 4, 5 have 1 -> 2 (discovered first). After 2: 5 has 2 -> 5, then 4.
    g = graph([(0, 1), (0, 2), (0, 3), (1, 3), (1, 4), (3, 5), (2, 5)])
    assert crawl(g, "backlinks") == [0, 1, 3, 2, 5, 4]
    assert crawl(g, "bfs") == [0, 1, 2, 3, 4, 5]


def test_pagerank_by_hand():
    # Cho's IR' on the graph seen so far, d = 0.9, written z = 0.1 + 0.9 sum z(T)/c(T)
    # (the dangling term is common to all pages and does not change the order).
    # After 0 and 1: z0 = 0.1, z1 = z2 = 0.1 + 0.9 * 0.1 / 2 = 0.145,
    # z3 = z4 = z5 = 0.1 + 0.9 * 0.145 / 3 = 0.1435 < z2 -> 2, and then
    # z6 = 0.1 + 0.9 * 0.145 = 0.2305 -> 6 before 3, 4, 5.
    g = graph(TREE)
    assert crawl(g, "pagerank", pagerank_every=1) == [0, 1, 2, 6, 3, 4, 5]
    # Solved only after 1, 2, 4 pages, with Cho's equation applied to new links
    # in between: same order here.
    assert crawl(g, "pagerank", pagerank_every=1000) == [0, 1, 2, 6, 3, 4, 5]
    assert crawl(g, "backlinks") == [0, 1, 2, 3, 4, 5, 6]


def test_pagerank_order_takes_the_best_page_by_a_fresh_solve_at_every_step():
    """With a solve after every page, each choice is the queue's maximum of IR' computed
    from scratch by networkx on the graph seen so far (Cho Fig. 1 and 2, literally)."""
    rng = np.random.default_rng(3)
    n = 70
    edges = {(int(a), int(b)) for a, b in zip(rng.integers(0, n, 260), rng.integers(0, n, 260)) if a != b}
    edges |= {(0, i) for i in range(1, 4)}
    g = graph(sorted(edges), n)
    order = crawl(g, "pagerank", pagerank_every=1)
    is_valid_crawl(g, order, 0)
    crawled = []
    for page in order:
        if crawled:
            seen = nx.DiGraph()
            known = set(crawled)
            for p in crawled:
                known.update(g.successors(p).tolist())
            seen.add_nodes_from(known)
            seen.add_edges_from((p, int(q)) for p in crawled for q in g.successors(p))
            ir = nx.pagerank(seen, alpha=0.9, tol=1e-14, max_iter=100_000)
            queue = known - set(crawled)
            best = max(ir[q] for q in queue)
            assert ir[page] >= best - 1e-9 * best, (len(crawled), page)
        crawled.append(page)


def test_every_order_is_a_valid_crawl_of_a_random_graph():
    rng = np.random.default_rng(11)
    n = 400
    src, dst = rng.integers(0, n, 2400), rng.integers(0, n, 2400)
    urls = [f"http://h{i % 23}.example/p{i}" for i in range(n)]
    g = graph(list(zip(src.tolist(), dst.tolist())), n, urls=urls)
    start = metrics.choose_start(g)[0]
    for order in ("bfs", "random", "backlinks", "pagerank", "opic", "hostfirst"):
        is_valid_crawl(g, crawl(g, order, start, pagerank_every=7), start)
    is_valid_crawl(g, crawl(g, "pagerank", start, cross_host=True), start)


def test_random_is_seeded():
    g = graph(TREE)
    a = crawl(g, "random", seed=1)
    assert a == crawl(g, "random", seed=1)
    assert sorted(a) == list(range(7))
    assert len({tuple(crawl(g, "random", seed=s)) for s in range(20)}) > 1


def test_opic_by_hand():
    # 0 -> 1, 2, 3; 1 -> 5; 2 -> 4, 5; 3 and 4 and 5 have no links.
    # Cash: 0 has 1 -> 1, 2, 3 get 1/3 each (tie -> 1). 1 gives 1/3 to 5.
    # Queue 2, 3, 5 at 1/3 (tie -> 2). 2 gives 1/6 to 4 and to 5: 5 has 1/2 -> 5,
    # and 5, dangling, spreads its 1/2 over the 6 known pages: 3 = 1/3 + 1/12 > 4 -> 3, 4.
    g = graph([(0, 1), (0, 2), (0, 3), (1, 5), (2, 4), (2, 5)])
    assert crawl(g, "opic") == [0, 1, 2, 5, 3, 4]
    assert crawl(g, "bfs") == [0, 1, 2, 3, 5, 4]


def test_opic_conserves_cash():
    rng = np.random.default_rng(5)
    n = 200
    g = graph(list(zip(rng.integers(0, n, 700).tolist(), rng.integers(0, n, 700).tolist())), n)
    crawled, discovered = np.zeros(n, bool), np.zeros(n, bool)
    o = OPIC(g, crawled, discovered)
    discovered[0] = True
    o.add(np.array([0]), None)
    while (p := o.pop()) is not None:
        crawled[p] = True
        succ = g.successors(p)
        new = succ[~discovered[succ]]
        discovered[new] = True
        o.visited(p, succ, new)
    cash = np.where(discovered, o.prio + o.bonus, 0.0)
    # OPIC §3: the total cash never changes (1, all at the start page at first);
    # histories grow with every read, and the estimates (H + C) / (|H| + 1) sum to 1.
    assert cash.sum() == pytest.approx(1.0)
    assert (cash >= -1e-12).all()
    est = importance.opic_importance(o.history, cash, o.history.sum())
    assert est.sum() == pytest.approx(1.0)


def test_hostfirst_fetches_a_new_hosts_first_page_first():
    # 0, 1, 2 on host a; 3 on b; 4 on c. 0 -> 1, 2; 1 -> 3; 2 -> 4.
    urls = ["http://a/", "http://a/1", "http://a/2", "http://b/", "http://c/"]
    g = graph([(0, 1), (0, 2), (1, 3), (2, 4)], urls=urls)
    assert crawl(g, "bfs") == [0, 1, 2, 3, 4]
    assert crawl(g, "hostfirst") == [0, 1, 3, 2, 4]
    with pytest.raises(ValueError, match="needs page URLs"):
        crawl(graph(TREE), "hostfirst")


def test_importance_formulas():
    assert importance.frontier_score(3.0) == -3.0
    assert importance.pagerank_base() == pytest.approx(0.1)
    assert importance.pagerank_contribution(0.145, 3) == pytest.approx(0.9 * 0.145 / 3)
    assert importance.pagerank_contribution(1.0, 0) == 0.0
    np.testing.assert_allclose(importance.pagerank_contribution(np.array([1.0, 2.0]), np.array([2, 0])),
                               [0.45, 0.0])
    assert importance.opic_share(0.5, 4) == 0.125 and importance.opic_share(0.5, 0) == 0.0
    assert importance.backlink_increment() == 1
    assert importance.backlink_increment("a", "a", cross_host_only=True) == 0
    assert importance.backlink_increment("a", "b", cross_host_only=True) == 1
    assert importance.hostfirst_class(False) == 0 and importance.hostfirst_class(True) == 1


# -- Cho's measures by hand -----------------------------------------------------------------

def test_pst_and_pcs_by_hand():
    order = np.array([0, 1, 2, 3, 4])
    hot = np.zeros(5, bool)
    hot[[1, 3]] = True
    np.testing.assert_allclose(metrics.pst_curve(order, hot), [0, 50, 50, 100, 100])
    imp = np.array([5, 1, 4, 3, 2])
    universe = np.ones(5, bool)
    # K=1: R1 = 5, {5} -> 1/1. K=2: R2 = 4, {5, 1} -> 1/2. K=3: R3 = 3, {5, 1, 4} -> 2/3.
    # K=4: R4 = 2, {5, 1, 4, 3} -> 3/4. K=5: all.
    np.testing.assert_allclose(metrics.pcs_at(order, imp, universe, [1, 2, 3, 4, 5]),
                               [100, 50, 200 / 3, 75, 100])
    # Ties count: "rank higher than or equal to I(R_K)".
    np.testing.assert_allclose(metrics.pcs_at(np.array([1, 0, 2]), np.array([2, 2, 1]),
                                              np.ones(3, bool), [1, 2]), [100, 100])


def test_hot_pages_and_tenths():
    imp = np.array([9, 1, 5, 5, 0, 7])
    universe = np.array([True, True, True, True, True, False])
    assert metrics.hot_threshold(imp, 5, universe).tolist() == [True, False, True, True, False, False]
    # Top 2 of the universe: 9 and the tie at 5, both kept.
    assert metrics.hot_top(imp, 2, universe).tolist() == [True, False, True, True, False, False]
    assert metrics.hot_top(imp, 1, universe).tolist() == [True, False, False, False, False, False]
    vals = np.arange(20, dtype=float)
    np.testing.assert_allclose(metrics.tenth_averages(np.arange(20), vals), np.arange(10) * 2 + 0.5)


def test_importance_over_the_whole_graph():
    g = graph([(0, 1), (2, 1), (1, 0)], 4)
    assert metrics.backlinks(g).tolist() == [1, 2, 0, 0]
    ir = metrics.pagerank_importance(g)
    assert ir.mean() == pytest.approx(1.0) and ir.argmax() == 1
    assert metrics.reachable(g, 0).tolist() == [True, True, False, False]


def test_choose_start_is_the_most_linked_page_of_the_largest_scc():
    # SCC {0, 1, 2} with 2 most linked; 5 has more links but only from outside.
    g = graph([(0, 1), (1, 2), (2, 0), (0, 2), (3, 5), (4, 5), (6, 5), (2, 3)])
    start, why = metrics.choose_start(g)
    assert start == 2 and "largest strongly connected component" in why


# -- Graph files ------------------------------------------------------------------------------

def test_read_edge_list_tsv_gz_with_header(tmp_path):
    p = tmp_path / "g.edges.tsv.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("# a graph\n# nodes: 6 arcs: 4\n# FromNodeId\tToNodeId\n0\t1\n0\t2\n2\t2\n3\t0\n")
    g = read_graph(str(p))
    assert g.n == 6 and g.m == 3 and g.self_loops_dropped == 1 and g.hosts is None
    assert read_graph(str(p), keep_self_loops=True).m == 4


def test_a_pages_links_are_discovered_in_the_order_the_page_has_them(tmp_path):
    # Page 0 lists 3 before 1 and 2 (3 twice, and itself): the simulated web serves
    # them so, a live crawl discovers them so, and ties go by discovery in every
    # order; a graph sorted by page id would crawl 1 first.
    from crawlproj.simweb import SimWeb
    p = tmp_path / "g.tsv"
    p.write_text("0\t3\n0\t1\n0\t3\n0\t0\n0\t2\n1\t4\n")
    g = read_graph(str(p))
    assert g.successors(0).tolist() == [3, 1, 2] and g.m == 4
    offsets, targets = SimWeb.from_graph(str(p)).edges()
    served = list(dict.fromkeys(t for t in targets[offsets[0]:offsets[1]] if t != 0))
    assert g.successors(0).tolist() == served
    assert crawl(g, "bfs") == [0, 3, 1, 2, 4]
    assert crawl(g, "backlinks") == [0, 3, 1, 2, 4]
    assert metrics.backlinks(g).tolist() == [0, 1, 1, 1, 1]


def test_read_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("# header\n0\t1\n1\tx\n")
    with pytest.raises(GraphFormatError, match=r"bad.tsv:3: expected"):
        read_graph(str(p))
    p.write_text("0 1\n1 2 3\n")
    with pytest.raises(GraphFormatError, match=r":2: expected"):
        read_graph(str(p))
    p.write_text("0 1\n-1 2\n")
    with pytest.raises(GraphFormatError, match=r":2: expected"):
        read_graph(str(p))
    with pytest.raises(GraphFormatError, match="no such file"):
        read_graph(str(tmp_path / "missing.tsv"))
    p.write_text("# nothing\n")
    with pytest.raises(GraphFormatError, match="no links"):
        read_graph(str(p))


def test_read_ne_and_hollins_formats_with_urls(tmp_path):
    ne = tmp_path / "gr0.test"
    ne.write_text("n 0 http://a.example/\nn 1 http://a.example/x\nn 2 http://b.example/\n"
                  "e 0 1\ne 1 2\ne 2 0\n")
    g = read_graph(str(ne))
    assert g.n == 3 and g.m == 3 and g.hosts.tolist() == [0, 0, 1]
    hol = tmp_path / "hollins.dat"
    hol.write_text("3 2\n1 http://www.h.edu/ \n2 http://www1.h.edu/a \n3 http://www1.h.edu/b \n1 2\n2 3\n")
    g = read_graph(str(hol))
    assert g.n == 3 and sorted(zip(*g.adjacency.nonzero())) == [(0, 1), (1, 2)]
    assert g.host_names == ["www.h.edu", "www1.h.edu"]
    edges = tmp_path / "e.tsv"
    edges.write_text("0\t1\n1\t2\n")
    urls = tmp_path / "urls.txt"
    urls.write_text("3\nn 0 http://x/\nn 1 http://y/\nn 2 http://y/z\n")
    assert read_graph(str(edges), urls=str(urls)).hosts.tolist() == [0, 1, 1]


# -- `scrapy evaluate` end to end ---------------------------------------------------------------

def run_evaluate(*args, cwd=ROOT):
    """The command as a user runs it: `scrapy evaluate ...` in the project."""
    return subprocess.run([sys.executable, "-m", "scrapy", "evaluate", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def call_evaluate(args, capsys):
    """The command's run() in this process (quicker; same code path after Scrapy's
    own start-up). Returns (exit code, stdout, stderr)."""
    import argparse

    from scrapy.settings import Settings

    from crawlproj.commands.evaluate import Command

    cmd = Command()
    cmd.settings = Settings()
    parser = argparse.ArgumentParser()
    cmd.add_options(parser)
    opts, rest = parser.parse_known_args([str(a) for a in args])
    cmd.run(rest, opts)
    out = capsys.readouterr()
    return cmd.exitcode, out.out, out.err


@pytest.fixture(scope="module")
def web_file(tmp_path_factory):
    """A small web-like graph: 600 pages on 30 hosts, power-law in-links."""
    rng = np.random.default_rng(2)
    n = 600
    w = rng.pareto(1.2, n) + 1
    src = rng.integers(0, n, 4000)
    dst = rng.choice(n, 4000, p=w / w.sum())
    path = tmp_path_factory.mktemp("graphs") / "web.edges.tsv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(f"# nodes: {n}\n")
        fh.writelines(f"{a}\t{b}\n" for a, b in zip(src, dst))
    urls = path.parent / "web.urls"
    urls.write_text("".join(f"{i} http://host{i % 30}.example/page{i}\n" for i in range(n)))
    return path, urls


@pytest.mark.slow
def test_scrapy_evaluate_end_to_end(web_file, tmp_path):
    path, urls = web_file
    out = tmp_path / "out"
    p = run_evaluate(path, "--orders", "pagerank,backlinks,bfs,random,opic,hostfirst",
                     "--urls", urls, "--hot-g", "15", "--hot-g-ir", "3", "--out", out,
                     "--pagerank-every", "20")
    assert p.returncode == 0, p.stderr
    for name in ("curves.csv", "tenths.csv", "summary.txt", "evaluate.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "evaluate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((out / "curves.csv").open()))
    assert {r["order"] for r in rows} == {"pagerank", "backlinks", "bfs", "random", "opic", "hostfirst"}
    last = [r for r in rows if r["order"] == "bfs"][-1]
    assert float(last["fraction_crawled"]) == pytest.approx(1.0) and float(last["pst_ib"]) == pytest.approx(100)
    tenths = list(csv.DictReader((out / "tenths.csv").open()))
    assert len(tenths) == 60 and all(r["avg_pagerank_cross_host"] for r in tenths)
    assert "PST-IB" in p.stdout and "pagerank order:" in p.stdout
    assert "pagerank" in p.stderr  # the progress bars
    # A missing file, through the real command line: one line, exit status 2.
    p = run_evaluate(tmp_path / "nope.tsv", "--out", out)
    assert p.returncode == 2 and p.stderr.strip().endswith("no such file")
    assert len(p.stderr.strip().splitlines()) == 1


def test_command_top_k_and_start(web_file, tmp_path, capsys):
    path, _ = web_file
    code, out, err = call_evaluate([path, "--orders", "bfs,random", "--hot-top", "20", "--start", "0",
                                    "--out", tmp_path, "--no-progress"], capsys)
    assert code == 0, err
    assert "top 20" in out and "page 0, given with --start" in out
    assert err == ""
    assert (tmp_path / "evaluate.png").exists()


@pytest.mark.parametrize("args,message", [
    (["{missing}"], "no such file"),
    (["{bad}"], "bad.tsv:3: expected"),
    (["{web}", "--orders", "bfs,depthfirst"], "unknown order 'depthfirst'"),
    (["{web}", "--orders", "hostfirst"], "needs page URLs"),
    (["{web}", "--cross-host"], "needs page URLs"),
    (["{web}", "--start", "600"], "start page 600 is not in the graph"),
    (["{web}", "--start", "home"], "--start must be a page id"),
    (["{web}", "--hot-top", "0"], "--hot-top must be"),
    (["{web}", "--urls", "{missing}"], "no such file"),
    (["{web}", "{web}"], "expected one GRAPH file"),
])
def test_command_bad_input_is_one_line_and_exit_2(web_file, tmp_path, capsys, args, message):
    bad = tmp_path / "bad.tsv"
    bad.write_text("0\t1\n1\t2\nthree\t4\n")
    subst = {"{missing}": tmp_path / "nope.tsv", "{bad}": bad, "{web}": web_file[0]}
    code, out, err = call_evaluate([subst.get(a, a) for a in args] + ["--out", tmp_path / "o", "--no-progress"],
                                   capsys)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()
