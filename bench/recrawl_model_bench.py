"""The recrawl model's benchmarks (docs/recrawl.md): the WebFountain model at the
paper's size and its three strategies, and the closed forms at a budget.

    .venv/bin/python bench/recrawl_model_bench.py [--pages 200000] [--seed 1]

1. WebFountain, equations 1-6, B = 255 buckets x T = 14 periods (Edwards et al.
   §5): 2M pages per bucket (the paper's version 1, 510M pages), rates
   log-uniform per bucket from once a year to every 4 days, periods of 2 days,
   new pages at the paper's growth (doubling in 400 days), bandwidth for one
   crawl of every page and every new page per cycle. Per strategy: solve time,
   objective, pages and obsolete pages at the end (Table 3's columns), and the
   share of buckets crawled 0 times, once, more than once per cycle (Figure 3).
   Wall and CPU seconds (CPU: this process's, all threads; on a shared
   machine the wall time is mostly waiting for a core).
2. Closed forms at 0.2 fetches per page per day, on log-uniform rates from once
   a year to every 15 minutes and on Gamma(0.8, 0.25) per day: mean freshness
   of uniform, adaptive (Nutch, scaled to the budget), the oracle (optimal for
   the true rates) and webfountain 1-3 (their cycle's crawls as steady rates).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from crawlproj.recrawl import webfountain as wf
from crawlproj.recrawl.buckets import DAY
from crawlproj.recrawl.policies import plan
from crawlproj.recrawl.population import simulate


def paper_model(strategy: int, B: int = 255, T: int = 14) -> wf.Model:
    period = 2 * DAY
    lam = np.exp(np.linspace(np.log(1 / 365), np.log(1 / 4), B)) / DAY
    pages = np.full(B, 2e6)
    growth = pages.sum() * (2 ** (2 / 400) - 1)        # new pages per period
    cap = (pages.sum() + growth * T) / T
    return wf.Model(pages=pages, change=-np.expm1(-lam * period), capacity=np.full(T, cap),
                    weights=wf.strategy_weights(strategy, T), new_pages=growth,
                    new_per_period=growth)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=1)
    opts = ap.parse_args()
    print("WebFountain model, 255 buckets x 14 periods")
    print(f"{'strategy':>8} {'wall s':>7} {'CPU s':>6} {'LPs':>4} {'objective':>10} {'pages end':>10} "
          f"{'obsolete end':>12} {'uncrawled':>9} {'once':>5} {'more':>5}")
    for s in wf.STRATEGIES:
        m = paper_model(s)
        t0, c0 = time.perf_counter(), time.process_time()
        sol = wf.solve(m)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        c = sol.crawls_per_cycle()
        total = sol.pages[:, -1].sum() + sol.new_pages[-1]
        print(f"{s:>8} {dt:>7.2f} {cpu:>6.2f} {sol.lps:>4} {sol.objective:>10.4g} {total:>10.4g} "
              f"{sol.obsolete[:, -1].sum():>12.4g} {np.mean(c < 0.05):>9.2f} "
              f"{np.mean(np.abs(c - 1) <= 0.05):>5.2f} {np.mean(c > 1.05):>5.2f}")
        deciles = ", ".join(f"{v:.2f}" for v in c[::25])
        print(f"{'':>8} crawls per cycle, slowest to fastest bucket (every 25th): {deciles}")
    print("\nclosed forms, 0.2 fetches per page per day, mean freshness")
    for web in ("loguniform", "gamma"):
        pop = simulate(web, opts.pages, seed=opts.seed)
        budget = 0.2 * pop.total / DAY
        fresh = {p: plan(p, pop, budget).mean_freshness() for p in ("uniform", "adaptive", "optimal")}
        for s in wf.STRATEGIES:
            fresh[f"webfountain{s}"] = plan("webfountain", pop, budget, strategy=s).mean_freshness()
        u = fresh["uniform"]
        print(f"{web}: " + ", ".join(f"{k} {v:.4f}" for k, v in fresh.items())
              + f"; oracle/uniform {fresh['optimal'] / u:.4f}, adaptive/uniform {fresh['adaptive'] / u:.4f}")


if __name__ == "__main__":
    main()
