"""The ranker's PageRank (crawlproj.ranker.pagerank) against networkx and a dense solve."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from crawlproj.ranker.pagerank import (
    TransitionMatrix,
    build_adjacency,
    cross_host_edges,
    pagerank,
)


def random_graph(n, m, seed, dangling_frac=0.2, self_loops=False):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    dangling = rng.random(n) < dangling_frac
    keep = ~dangling[src]
    if not self_loops:
        keep &= src != dst
    return src[keep], dst[keep]


def nx_cho_scale(n, src, dst, alpha=0.9):
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    # networkx spreads dangling pages' rank uniformly (its default), as Cho does.
    pr = nx.pagerank(g, alpha=alpha, tol=1e-15, max_iter=100_000)
    return np.array([pr[i] for i in range(n)]) * n


def dense_cho(n, src, dst, d=0.9):
    """Cho's equations solved directly: IR = (1-d) + d * sum IR(T)/c(T), dangling -> all."""
    a = np.zeros((n, n))
    a[src, dst] = 1.0
    out = a.sum(1)
    p = np.where(out[:, None] > 0, a / np.maximum(out, 1)[:, None], 1.0 / n)
    # x = (1-d)/n + d P^T x, sum x = 1  ->  (I - d P^T) x = (1-d)/n
    x = np.linalg.solve(np.eye(n) - d * p.T, np.full(n, (1 - d) / n))
    return x * n


@pytest.mark.parametrize("n,m,seed", [(50, 200, 1), (300, 1500, 2), (1000, 3000, 3), (400, 4000, 4)])
def test_equals_networkx_with_dangling_pages(n, m, seed):
    src, dst = random_graph(n, m, seed)
    adj = build_adjacency(src, dst, n)
    assert (np.diff(adj.indptr) == 0).sum() > 0  # the case under test: dangling pages
    res = pagerank(adj, tol=1e-14, max_iter=10_000)
    assert res.converged
    np.testing.assert_allclose(res.scores, nx_cho_scale(n, src, dst), rtol=0, atol=1e-6)
    assert res.scores.sum() == pytest.approx(n)


def test_probability_scale_and_other_damping():
    n = 200
    src, dst = random_graph(n, 900, 5)
    res = pagerank(build_adjacency(src, dst, n), 0.85, tol=1e-14, max_iter=10_000,
                   scale="probability")
    np.testing.assert_allclose(res.scores, nx_cho_scale(n, src, dst, 0.85) / n, rtol=0, atol=1e-9)
    assert res.scores.sum() == pytest.approx(1.0)


def test_equals_dense_solution_of_chos_equations():
    n = 60
    src, dst = random_graph(n, 250, 6)
    res = pagerank(build_adjacency(src, dst, n), tol=1e-14, max_iter=10_000)
    np.testing.assert_allclose(res.scores, dense_cho(n, src, dst), rtol=0, atol=1e-9)


def test_self_loops_kept_match_networkx():
    n = 100
    src, dst = random_graph(n, 600, 7, self_loops=True)
    assert (src == dst).any()
    res = pagerank(build_adjacency(src, dst, n), tol=1e-14, max_iter=10_000)
    np.testing.assert_allclose(res.scores, nx_cho_scale(n, src, dst), rtol=0, atol=1e-6)


def test_hand_examples():
    # A 2-cycle: symmetric, both pages have IR = 1.
    res = pagerank(build_adjacency([0, 1], [1, 0], 2), tol=1e-14)
    np.testing.assert_allclose(res.scores, [1.0, 1.0], atol=1e-12)
    # 0 -> 1, 1 dangling: x0 = .05 + .45 x1, x1 = .05 + .9 x0 + .45 x1, x0 + x1 = 1
    # -> x1 = 0.95/1.45 * ... solved by hand: x0 = 0.05 + 0.45 (1 - x0) -> x0 = 0.5/1.45
    res = pagerank(build_adjacency([0], [1], 2), tol=1e-14)
    x0 = 0.5 / 1.45
    np.testing.assert_allclose(res.scores, [2 * x0, 2 * (1 - x0)], atol=1e-12)
    # No links at all: every page dangling, uniform.
    res = pagerank(build_adjacency([], [], 3), tol=1e-14)
    np.testing.assert_allclose(res.scores, [1.0, 1.0, 1.0])


def test_duplicate_links_count_once_by_default():
    a = build_adjacency([0, 0, 0, 1], [1, 1, 2, 0], 3)
    assert a.nnz == 3 and a[0, 1] == 1
    b = build_adjacency([0, 0, 0, 1], [1, 1, 2, 0], 3, dedupe=False)
    assert b[0, 1] == 2
    # Counted twice, page 1 gets two thirds of page 0's rank.
    tm = TransitionMatrix(b)
    assert tm.inlinks[1, 0] == pytest.approx(2 / 3)


def test_warm_start_converges_to_the_same_vector_in_fewer_steps():
    n = 2000
    src, dst = random_graph(n, 12000, 8)
    adj = build_adjacency(src, dst, n)
    cold = pagerank(adj, tol=1e-12, max_iter=10_000)
    # The same graph from a perturbed start vector.
    rng = np.random.default_rng(0)
    again = pagerank(adj, tol=1e-12, max_iter=10_000, x0=cold.scores * rng.uniform(0.5, 1.5, n))
    np.testing.assert_allclose(again.scores, cold.scores, atol=1e-8)
    # The graph grows a little (new pages at the end, new links): warm start from
    # the previous vector, shorter than the new graph.
    n2 = n + 20
    src2 = np.concatenate([src, rng.integers(0, n2, 100)])
    dst2 = np.concatenate([dst, rng.integers(n, n2, 100)])
    adj2 = build_adjacency(src2, dst2, n2)
    fresh = pagerank(adj2, tol=1e-12, max_iter=10_000)
    warm = pagerank(adj2, tol=1e-12, max_iter=10_000, x0=cold.scores)
    np.testing.assert_allclose(warm.scores, fresh.scores, atol=1e-8)
    assert warm.iterations < fresh.iterations
    np.testing.assert_allclose(warm.scores, nx_cho_scale(n2, src2, dst2), atol=1e-6)


def test_bad_arguments():
    adj = build_adjacency([0], [1], 2)
    with pytest.raises(ValueError):
        pagerank(adj, damping=1.0)
    with pytest.raises(ValueError):
        pagerank(adj, x0=[1, 1, 1])
    with pytest.raises(ValueError):
        pagerank(adj, x0=[0, 0])
    with pytest.raises(ValueError):
        pagerank(adj, scale="percent")
    with pytest.raises(ValueError):
        build_adjacency([0], [5], 2)


def test_cross_host_only_equals_networkx_on_the_remote_link_graph():
    n = 300
    src, dst = random_graph(n, 2000, 9, dangling_frac=0.1)
    hosts = np.random.default_rng(9).integers(0, 12, n)  # 12 hosts: many local links
    res = pagerank(build_adjacency(src, dst, n), hosts=hosts, tol=1e-14, max_iter=10_000)
    remote = hosts[src] != hosts[dst]
    assert (~remote).sum() > 50 and remote.sum() > 50
    # Pages whose links are all local become dangling and spread rank evenly
    # (Najork & Wiener's www.yahoo.com case), which networkx does too.
    np.testing.assert_allclose(res.scores, nx_cho_scale(n, src[remote], dst[remote]), atol=1e-6)


def test_cross_host_hand_example():
    # Host A: pages 0, 1, 2; host B: page 3. 1 and 2 link within A, 0 -> 3 is remote.
    adj = build_adjacency([1, 2, 0, 1], [0, 0, 3, 2], 4)
    hosts = [0, 0, 0, 1]
    only = cross_host_edges(adj, hosts)
    assert sorted(zip(*only.nonzero())) == [(0, 3)]
    res = pagerank(adj, hosts=hosts, tol=1e-14)
    ref = dense_cho(4, np.array([0]), np.array([3]))
    np.testing.assert_allclose(res.scores, ref, atol=1e-10)
    # 1, 2 (local links only) and 3 are dangling; 1 and 2 are symmetric.
    assert res.scores[1] == pytest.approx(res.scores[2])
    assert res.scores[3] > res.scores[0]


def test_restricted_to_sources_equals_rebuilding_the_graph():
    n = 500
    src, dst = random_graph(n, 3000, 10)
    full = TransitionMatrix(build_adjacency(src, dst, n))
    keep = np.random.default_rng(1).random(n) < 0.4
    sub = full.restricted_to_sources(keep)
    ref = TransitionMatrix(build_adjacency(src[keep[src]], dst[keep[src]], n))
    assert (sub.inlinks != ref.inlinks).nnz == 0
    assert np.array_equal(sub.dangling, ref.dangling)
    np.testing.assert_allclose(pagerank(sub, tol=1e-13).scores, pagerank(ref, tol=1e-13).scores)
