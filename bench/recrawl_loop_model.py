"""The live recrawl loop as a model, for finding where freshness goes: the
frontier's planner (crawlproj.frontier.recrawl.Recrawl: plan, bounds,
boost), the per-URL state and its estimator (state.update, live_bucket),
an earliest-due-first queue drained at RECRAWL_BUDGET, Poisson pages. No
Last-Modified: a fetch tells changed or not (the changed/unchanged
estimator alone). Times in simulated days; the crawl starts with every page
due (the first pass), freshness is time-averaged over the second half.

    .venv/bin/python bench/recrawl_loop_model.py [--pages 500 --per-page-day 0.2
        --days 40,100 --boosts 1,4,16]

Per web, run length and boost: uniform, the plan on the true rates
(oracle), the plan on the estimates (live); then, for the first run length
at boost 1, fetches and freshness per true-rate class.
"""
import argparse
import heapq
from types import SimpleNamespace

import numpy as np

from crawlproj.frontier.recrawl import Recrawl, live_bucket
from crawlproj.recrawl import buckets
from crawlproj.recrawl.population import simulate_rates
from crawlproj.recrawl.state import Observation, RecrawlState, update

DAY = 86400.0


def run(dist, n=500, per_page_day=0.2, days=40, mode="live", boost=None, seed=5,
        plan_every=1.0, max_interval=30, detail=False):
    """(time-averaged freshness over the run's second half, fetches per
    page). mode: uniform; oracle (every page planned in its true rate's
    bucket); live (in the bucket of its estimate, crawlproj's state.update
    and live_bucket). boost: the intervals' divisor, held fixed."""
    rng = np.random.default_rng(seed)
    lam = simulate_rates(dist, n, seed) * DAY          # per day
    budget = per_page_day * n                           # fetches per day
    rc = Recrawl(SimpleNamespace(new_share=0.0), "optimal" if mode != "uniform" else "uniform",
                 budget / DAY, 0.0, 1.0, 60.0, max_interval * DAY)
    if boost is not None:
        rc.boost = boost
    states = [RecrawlState() for _ in range(n)]
    true_b = [buckets.bucket_of(x / DAY) for x in lam]
    # the first change after the copy's fetch (Poisson: t + Exp(lam))
    stale_at = np.array([rng.exponential(1 / x) for x in lam])  # first change after fetch at 0
    heap = [(0.0 + i * 1e-6, i) for i in range(n)]     # all due at start (first pass)
    t, dt = 0.0, 1.0 / budget
    next_plan = 0.0
    half = days / 2
    fresh_time = np.zeros(n)
    fetched = np.zeros(n, int)
    copy_at = np.full(n, -1.0)  # when our copy was fetched
    while t < days:
        if t >= next_plan:
            counts = {}
            for i in range(n):
                if fetched[i] == 0:
                    continue
                k = true_b[i] if mode == "oracle" else live_bucket(states[i])
                counts[k] = counts.get(k, 0) + 1
            rc.set_plan(counts, 0)
            next_plan += plan_every
        if heap and heap[0][0] <= t:
            _, i = heapq.heappop(heap)
            # freshness accounting: copy fresh from copy_at until stale_at
            if copy_at[i] >= 0:
                a, b = max(copy_at[i], half), min(t, stale_at[i])
                if b > a:
                    fresh_time[i] += b - a
            changed = copy_at[i] >= 0 and stale_at[i] <= t
            if copy_at[i] >= 0:
                states[i] = update(states[i], Observation(t * DAY, changed))
            else:
                states[i] = update(states[i], Observation(t * DAY, False))
            fetched[i] += 1
            copy_at[i] = t
            stale_at[i] = t + rng.exponential(1 / lam[i])
            k = true_b[i] if mode == "oracle" else live_bucket(states[i])
            if mode == "uniform":
                k = buckets.UNKNOWN
            interval = rc.interval(k) / rc.boost / DAY
            heapq.heappush(heap, (t + interval, i))
        t += dt
    for i in range(n):
        if copy_at[i] >= 0:
            a, b = max(copy_at[i], half), min(days, stale_at[i])
            if b > a:
                fresh_time[i] += b - a
    if detail:
        edges = [0, 0.01, 0.1, 0.3, 1, 3, 10, 100]
        for a, b in zip(edges, edges[1:]):
            m = (lam >= a) & (lam < b)
            if m.any():
                est = np.array([states[i].rate * DAY for i in np.where(m)[0]])
                fresh = fresh_time[m].sum() / (m.sum() * (days - half))
                print(f"    true rate {a}-{b}/day: pages {m.sum()}, fetches/page "
                      f"{fetched[m].mean():.1f}, freshness {fresh:.3f}, estimate median "
                      f"{np.median(est):.3g} (true {np.median(lam[m]):.3g})")
    return fresh_time.sum() / (n * (days - half)), fetched.mean()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=500)
    ap.add_argument("--per-page-day", type=float, default=0.2)
    ap.add_argument("--days", default="40,100")
    ap.add_argument("--boosts", default="1,4,16")
    a = ap.parse_args()
    days = [float(x) for x in a.days.split(",")]
    print("| web | days | boost | uniform | oracle | live | fetches/page |")
    print("|---|---|---|---|---|---|---|")
    for dist in ("loguniform", "gamma"):
        for d in days:
            for b in (float(x) for x in a.boosts.split(",")):
                got = {m: run(dist, a.pages, a.per_page_day, d, m, b)
                       for m in ("uniform", "oracle", "live")}
                print(f"| {dist} | {d:g} | {b:g} | {got['uniform'][0]:.4f} | "
                      f"{got['oracle'][0]:.4f} | {got['live'][0]:.4f} | {got['live'][1]:.1f} |",
                      flush=True)
    for dist in ("loguniform", "gamma"):
        for mode in ("oracle", "live"):
            print(f"{dist}, {days[0]:g} days, boost 1, {mode}:")
            run(dist, a.pages, a.per_page_day, days[0], mode, 1.0, detail=True)


if __name__ == "__main__":
    main()
