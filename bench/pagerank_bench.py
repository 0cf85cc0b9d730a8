"""Benchmark: one ranker recompute, PageRank on a 1M-node / 10M-edge web-like graph.

Issue #5 part 2 asks for one recompute on 1 million nodes and 10 million edges in
<= 10 s and <= 2 GB. The graph is synthetic: out- and in-degrees drawn from power
laws with the exponents Broder et al. (2000) measured on the web (in 2.1, out
2.72), so some pages have tens of thousands of in-links and ~20% have none out
(dangling, handled as in Cho §2).

Phases, each timed:
  generate   make the edge list (not part of a recompute) and save it as .npz
  load       a fresh process reads the edge list: the graph a ranker holds
  build      CSR adjacency + transposed transition matrix (int32 indices)
  cold       power iteration from the uniform vector to tol
  warm       the graph grows by 1% (new pages and links), the matrix is rebuilt
             and PageRank is warm-started from the previous vector, as the
             ranker does between two recomputes
Peak RSS is the measuring process's high-water mark (ru_maxrss), so it counts
the loaded edge list as well as the matrix and vectors.

    .venv/bin/python bench/pagerank_bench.py [--nodes 1000000] [--edges 10000000]
    .venv/bin/python bench/pagerank_bench.py --graph ../shared/data/graphs/cnr-2000.edges.tsv.gz
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def generate(n: int, m: int, seed: int, path: str) -> None:
    rng = np.random.default_rng(seed)
    # Pareto weights give power-law degree distributions; P(k) ~ k^-(a+1).
    w_out = rng.pareto(1.72, n) + 1.0
    w_out[rng.random(n) < 0.2] = 0.0  # dangling pages
    w_in = rng.pareto(1.1, n) + 1.0
    extra = int(m * 1.05)
    src = rng.choice(n, extra, p=w_out / w_out.sum()).astype(np.int64)
    dst = rng.choice(n, extra, p=w_in / w_in.sum()).astype(np.int64)
    keys = np.unique(src * n + dst)
    keys = keys[(keys // n) != (keys % n)]  # no self-links
    keys = rng.permutation(keys)[:m]
    np.savez(path, src=(keys // n).astype(np.int32), dst=(keys % n).astype(np.int32),
             n=np.int64(n))


def measure(path: str, tol: float) -> dict:
    from crawlproj.ranker.pagerank import TransitionMatrix, build_adjacency, pagerank

    out = {}
    t = time.perf_counter()
    if path.endswith(".npz"):
        z = np.load(path)
        src, dst, n = z["src"], z["dst"], int(z["n"])
    else:  # a real edge list, e.g. cnr-2000 (self-links dropped, as `scrapy evaluate` does)
        from crawlproj.evaluate.graph import read_graph
        adj = read_graph(path).adjacency
        n = adj.shape[0]
        src = np.repeat(np.arange(n, dtype=np.int32), np.diff(adj.indptr))
        dst = adj.indices.copy()
        del adj
    out["load_s"] = time.perf_counter() - t
    out["nodes"], out["edges"] = n, int(len(src))

    t0 = time.perf_counter()
    adj = build_adjacency(src, dst, n)
    tm = TransitionMatrix(adj)
    out["build_s"] = time.perf_counter() - t0
    out["dangling"] = int(len(tm.dangling))
    t = time.perf_counter()
    res = pagerank(tm, tol=tol)
    out["cold_iter_s"] = time.perf_counter() - t
    out["cold_recompute_s"] = time.perf_counter() - t0
    out["cold_iterations"], out["cold_delta"] = res.iterations, res.delta
    out["max_score"] = float(res.scores.max())

    # The crawl goes on: 1% more pages and links, then the ranker recomputes
    # from its previous vector.
    rng = np.random.default_rng(7)
    grow_n, grow_m = n // 100, len(src) // 100
    n2 = n + grow_n
    src2 = np.concatenate([src, rng.integers(0, n2, grow_m, dtype=np.int32)])
    dst2 = np.concatenate([dst, rng.integers(0, n2, grow_m, dtype=np.int32)])
    del adj, tm
    t0 = time.perf_counter()
    tm2 = TransitionMatrix(build_adjacency(src2, dst2, n2, drop_self_loops=True))
    res2 = pagerank(tm2, x0=res.scores, tol=tol)
    out["warm_recompute_s"] = time.perf_counter() - t0
    out["warm_iterations"], out["warm_delta"] = res2.iterations, res2.delta
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--graph", help="measure on this edge-list file instead of a synthetic graph")
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # child mode: path of the graph
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.tol)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = args.graph or os.path.join(tmp, "graph.npz")
        t = time.perf_counter()
        if not args.graph:
            generate(args.nodes, args.edges, args.seed, path)
        gen_s = time.perf_counter() - t
        # A fresh process, so that its peak RSS is the ranker's, not the generator's.
        proc = subprocess.run([sys.executable, __file__, "--measure", path, "--tol", str(args.tol)],
                              check=True, capture_output=True, text=True)
        r = json.loads(proc.stdout)
    print(f"graph: {r['nodes']:,} nodes, {r['edges']:,} edges, {r['dangling']:,} dangling "
          f"(generated in {gen_s:.1f} s, loaded in {r['load_s']:.1f} s)")
    print(f"cold recompute: {r['cold_recompute_s']:.2f} s (build {r['build_s']:.2f} s + "
          f"{r['cold_iterations']} iterations {r['cold_iter_s']:.2f} s, L1 delta {r['cold_delta']:.1e})")
    print(f"warm recompute after +1% pages and links: {r['warm_recompute_s']:.2f} s "
          f"({r['warm_iterations']} iterations, L1 delta {r['warm_delta']:.1e})")
    print(f"peak RSS: {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
