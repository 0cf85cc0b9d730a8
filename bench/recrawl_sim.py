"""The live recrawl loop replayed offline: the frontier's planner and each
page's estimate as the workers run them, on Poisson pages, in seconds of CPU
instead of minutes of crawling, for working out the estimator and the
defaults before a live run confirms them.

What is the live crawl's own code: the plan (crawlproj.recrawl.schedule.Recrawl:
set_plan, interval, steer and its boost, the bounds, bucket_for,
on_crawl_clock), each page's state (crawlproj.recrawl.state.update), the settings' defaults
(settings/base.py, unless given). What is modelled: the token bucket of
RECRAWL_BUDGET (one wall second deep), the lease hand-out of lua/sync.lua
(the never-crawled URLs against the due recrawls by their share of the
recent leases, the earliest due first), every page known from the start and never crawled (the
first pass), Poisson changes, and what a fetch shows: changed or not, and on
hosts that give it the true Last-Modified. Not modelled: politeness, the
link graph, download times, errors, sitemaps.

    .venv/bin/python bench/recrawl_sim.py [--dists loguniform,gamma --pages 2000
        --per-page-day 0.1,0.2,0.5 --days 96 --seeds 1,2,3 --lm 1.0
        --policies uniform,optimal,oracle -s RECRAWL_NEW_SHARE=0.5 ...]
    .venv/bin/python bench/recrawl_sim.py --bias
    .venv/bin/python bench/recrawl_sim.py --closed-form [--dists ... --pages ... --per-page-day ...]

Per web, budget and seed: time-averaged freshness over the run's second
half (the pages fetched before it, as bench/recrawl_bench.py measures the
live crawl), and where the fetches of that half went per true change rate,
against the oracle's allocation (Cho & Garcia-Molina's, for the true rates,
at the same spend).
"""

from __future__ import annotations

import argparse
import heapq
import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.recrawl import buckets  # noqa: E402
from crawlproj.recrawl import schedule as frontier_recrawl  # noqa: E402
from crawlproj.recrawl.freshness import freshness as closed_form  # noqa: E402
from crawlproj.recrawl.policies import optimal, plan, uniform  # noqa: E402
from crawlproj.recrawl.population import Population  # noqa: E402
from crawlproj.recrawl.state import Observation, RecrawlState, update  # noqa: E402

DAY = buckets.DAY
# crawlproj/recrawl/lua/sync_recrawl.lua's: the leases over which RECRAWL_NEW_SHARE is held
SHARE_WINDOW = 100
CLASSES = (0, 0.008, 0.03, 0.1, 0.37, 1.45, 5.2, 22, 96.01)


def rates_of(dist: str, n: int, rng) -> np.ndarray:
    """Per-page change rates per day: 'loguniform' (once a year to 96 a day,
    the benchmark's), 'gamma[:shape:scale]' (Cho & Garcia-Molina's fit is
    0.8, 0.25 per day), 'loguniform:lo:hi'."""
    kind, *p = dist.split(":")
    if kind == "loguniform":
        lo, hi = (float(p[0]), float(p[1])) if p else (1 / 365, 96.0)
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    if kind == "gamma":
        shape, scale = (float(p[0]), float(p[1])) if p else (0.8, 0.25)
        return rng.gamma(shape, scale, n)
    raise SystemExit(f"unknown distribution {dist!r}")


def settings_table(overrides: dict) -> SimpleNamespace:
    base = importlib.import_module("settings.base")
    names = [k for k in dir(base) if k.startswith("RECRAWL_")]
    return SimpleNamespace(**{k: getattr(base, k) for k in names} | overrides)


def run(dist: str, pages: int = 2000, per_page_day: float = 0.2, days: float = 96.0,
        policy: str = "optimal", seed: int = 1, lm_share: float = 1.0,
        day_seconds: float = 5.0, settings: dict | None = None, server_clock: str = "crawl",
        clock_ratio: bool = True, boost: float | None = None) -> dict:
    """One run; policy: uniform, optimal, webfountain (the live plan on the
    estimates) or oracle (optimal's plan, every page in its true rate's
    bucket). server_clock: what the servers' Date and Last-Modified count,
    whole seconds of the simulated calendar ("crawl", as crawlproj.simweb
    dates its pages) or of the machine's clock ("wall"); clock_ratio False:
    their seconds taken as the crawl clock's, as the crawl did before
    Recrawl.on_crawl_clock; boost: the intervals' divisor held at this
    instead of steered by the spend."""
    s = settings_table(settings or {})
    rng = np.random.default_rng(seed)
    lam = rates_of(dist, pages, rng)                     # per day
    has_lm = rng.uniform(size=pages) < lm_share
    scale = DAY / day_seconds                           # crawl seconds per wall second
    budget_day = per_page_day * pages                   # fetches per simulated day
    frontier = SimpleNamespace(new_share=s.RECRAWL_NEW_SHARE)
    planner = "optimal" if policy == "oracle" else policy
    rc = frontier_recrawl.Recrawl(frontier, planner, budget_day / day_seconds,
                                  s.RECRAWL_NEW_SHARE, scale, s.RECRAWL_MIN_INTERVAL,
                                  s.RECRAWL_MAX_INTERVAL, s.RECRAWL_WEBFOUNTAIN_STRATEGY,
                                  s.RECRAWL_WEBFOUNTAIN_PERIOD, s.RECRAWL_WEBFOUNTAIN_PERIODS)
    true_bucket = buckets.buckets_of(lam / DAY)
    states = [RecrawlState() for _ in range(pages)]
    bucket = np.zeros(pages, int)                       # the page's bucket in the schedule
    counts: dict[int, int] = {}
    # the last change before day 0 (a stationary process run backwards)
    last_change = -rng.exponential(1 / lam)
    next_change = rng.exponential(1 / lam)
    held_lm = np.zeros(pages)                           # the record's Last-Modified
    if server_clock == "crawl":
        def server_seconds(day: float) -> float:
            return float(np.floor(978307200 + day * DAY))
    else:
        def server_seconds(day: float) -> float:
            return float(np.floor(1.79e9 + day * day_seconds))
    new = list(range(pages))
    rng.shuffle(new)
    due: list[tuple[float, int]] = []
    leased_new = leased_old = 0
    window = [0, 0]                                     # recent leases: new, recrawl
    burst = budget_day / day_seconds                    # tokens: one wall second's worth
    tokens, tick = burst, 1.0 / budget_day
    plan_every = s.RECRAWL_PLAN_INTERVAL / day_seconds  # days
    half = days / 2
    copy_at = np.full(pages, -1.0)
    stale_at = np.zeros(pages)
    fresh = np.zeros(pages)
    window_fetches = np.zeros(pages)
    fetched_before_half = np.zeros(pages, bool)
    t, next_plan, first_pass = 0.0, 0.0, float("nan")
    while t < days:
        if t >= next_plan:
            oldest = due[0][0] if due and due[0][0] <= t else t
            rc.steer(leased_new + leased_old, t * day_seconds, (t - oldest) * day_seconds)
            if boost is not None:
                rc.boost = boost
            # the live crawl's first plan is made before its seeds are queued
            rc.set_plan({k: n for k, n in counts.items() if n}, len(new) if t > 0 else 0)
            next_plan = t + plan_every
        tokens = min(burst, tokens + 1.0)
        while tokens >= 1.0:
            ready_old = bool(due) and due[0][0] <= t
            if not new and not ready_old:
                break
            take_old = ready_old and (not new or window[0] >= frontier.new_share
                                      * (window[0] + window[1] + 1))
            if take_old:
                _, i = heapq.heappop(due)
                leased_old += 1
            else:
                i = new.pop()
                leased_new += 1
                if not new:
                    first_pass = t
            window[1 if take_old else 0] += 1
            if sum(window) > SHARE_WINDOW:
                window = [w // 2 for w in window]
            tokens -= 1.0
            # the page's changes up to now
            while next_change[i] <= t:
                last_change[i] = next_change[i]
                next_change[i] += rng.exponential(1 / lam[i])
            if copy_at[i] >= 0:
                a, b = max(copy_at[i], half), min(t, stale_at[i])
                if b > a:
                    fresh[i] += b - a
                changed = last_change[i] > copy_at[i]
            else:
                changed = False
            if t >= half:
                window_fetches[i] += 1
            elif copy_at[i] < 0:
                fetched_before_half[i] = True
            date = server_seconds(t)
            lm, prev, ratio = rc.on_crawl_clock(
                states[i], held_lm[i] if clock_ratio else 0.0, t * DAY, date,
                server_seconds(last_change[i]) if has_lm[i] else None)
            held_lm[i] = server_seconds(last_change[i]) if has_lm[i] else 0.0
            old = bucket[i] if copy_at[i] >= 0 else None
            states[i] = update(prev, Observation(t * DAY, changed, lm, resolution=ratio))
            copy_at[i], stale_at[i] = t, next_change[i]
            k = rc.place(states[i], old is None)
            if policy == "oracle" and states[i].fetches:
                k = int(true_bucket[i])
            if old is not None:
                counts[old] -= 1
            counts[k] = counts.get(k, 0) + 1
            bucket[i] = k
            if policy == "uniform":
                k = buckets.UNKNOWN
            heapq.heappush(due, (t + rc.interval(k) / rc.boost / DAY, i))
        t += tick
    for i in range(pages):
        if copy_at[i] >= 0:
            a, b = max(copy_at[i], half), min(days, stale_at[i])
            if b > a:
                fresh[i] += b - a
    m = fetched_before_half
    span = days - half
    spend = window_fetches[m].sum() / span / DAY        # per second, the pages measured
    pop = Population.from_rates(lam[m] / DAY)
    f_opt, f_uni = optimal(pop, spend, weighted=False), uniform(pop, spend)
    by_bucket = dict(zip(pop.bucket, f_opt))
    oracle_page = np.array([by_bucket[k] for k in buckets.buckets_of(lam[m] / DAY)]) * DAY
    classes = []
    for lo, hi in zip(CLASSES, CLASSES[1:]):
        c = (lam[m] >= lo) & (lam[m] < hi)
        if c.any():
            est = np.array([states[i].rate * DAY for i in np.where(m)[0][c]])
            classes.append({"lo": lo, "hi": hi, "pages": int(c.sum()),
                            "fetches_per_day": float(window_fetches[m][c].mean() / span),
                            "oracle_per_day": float(oracle_page[c].mean()),
                            "estimate_over_true": float(np.median(est / lam[m][c]))})
    return {"dist": dist, "pages": pages, "per_page_day": per_page_day, "days": days,
            "policy": policy, "seed": seed, "lm_share": lm_share,
            "freshness": float(fresh[m].sum() / (m.sum() * span)),
            "oracle": float((pop.pages * closed_form(pop.rate, f_opt)).sum() / pop.total),
            "uniform_closed_form": float((pop.pages * closed_form(pop.rate, f_uni)).sum()
                                         / pop.total),
            "spent": float(spend * DAY / m.sum() / per_page_day), "boost": rc.boost,
            "first_pass_days": first_pass,
            "classes": classes}


def bias(lm: bool, visits=(2, 5, 10, 30), ratios=(0.2, 1.0, 5.0, 20.0), pages: int = 400,
         seed: int = 1) -> list[dict]:
    """The estimator's bias: pages of rate 1 a day visited every I days
    (rate x I in ``ratios``; at 5 and 20 nearly every visit sees a change),
    with or without a true Last-Modified; per number of visits the median
    of estimate / true rate over ``pages`` pages and its 10-90 % range, the
    estimate being the rate of the bucket the page is planned in
    (live_bucket), as the plan sees it."""
    rng = np.random.default_rng(seed)
    rows = []
    for ratio in ratios:
        interval = ratio * DAY
        est = np.zeros((len(visits), pages))
        for p in range(pages):
            st = RecrawlState()
            last = -rng.exponential(DAY)                # the last change before the first visit
            nxt = rng.exponential(DAY)
            for v in range(max(visits) + 1):
                t = v * interval
                while nxt <= t:
                    last, nxt = nxt, nxt + rng.exponential(DAY)
                changed = v > 0 and last > (v - 1) * interval
                st = update(st, Observation(t, changed, last if lm else None))
                if v in visits:
                    est[visits.index(v), p] = buckets.rate_of(
                        frontier_recrawl.live_bucket(st)) * DAY
        for v, e in zip(visits, est):
            rows.append({"lm": lm, "rate_x_interval": ratio, "visits": v,
                         "median": float(np.median(e)), "p10": float(np.percentile(e, 10)),
                         "p90": float(np.percentile(e, 90))})
    return rows


def closed_forms(dist: str, pages: int, per_page_day: float, seed: int,
                 settings: dict | None = None) -> dict:
    """Each policy's plan for the web's true rates, as a steady crawl:
    mean freshness from the closed form, no estimate, no loop (webfountain's
    crawls per cycle turned into rates as the live crawl turns them)."""
    s = settings_table(settings or {})
    lam = rates_of(dist, pages, np.random.default_rng(seed)) / DAY
    pop = Population.from_rates(lam)
    budget = per_page_day * pages / DAY
    out = {}
    for p in ("uniform", "optimal", "webfountain"):
        got = plan(p, pop, budget, strategy=int(s.RECRAWL_WEBFOUNTAIN_STRATEGY),
                   period=s.RECRAWL_WEBFOUNTAIN_PERIOD, periods=int(s.RECRAWL_WEBFOUNTAIN_PERIODS),
                   weighted=False)
        out[p] = got.mean_freshness()
        if p == "webfountain":
            out["webfountain_uncrawled"] = float(pop.pages[~(got.frequency > 0)].sum() / pop.total)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dists", default="loguniform")
    ap.add_argument("--pages", default="2000")
    ap.add_argument("--per-page-day", default="0.2")
    ap.add_argument("--days", default="96")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--lm", type=float, default=1.0,
                    help="share of pages whose server gives a true Last-Modified")
    ap.add_argument("--day-seconds", type=float, default=5.0)
    ap.add_argument("--server-clock", default="crawl", choices=("crawl", "wall"),
                    help="the servers' dates in seconds of the simulated calendar or the machine's")
    ap.add_argument("--no-clock-ratio", action="store_true",
                    help="take the servers' seconds as the crawl clock's whatever they count")
    ap.add_argument("--policies", default="uniform,optimal,oracle")
    ap.add_argument("-s", action="append", default=[], metavar="NAME=VALUE",
                    help="a RECRAWL_ setting other than its default")
    ap.add_argument("--classes", action="store_true", help="fetches per true-rate class")
    ap.add_argument("--boost", type=float, default=None,
                    help="hold the intervals' divisor at this instead of steering it")
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("--bias", action="store_true",
                    help="only the estimator's bias by visits, with and without Last-Modified")
    ap.add_argument("--closed-form", action="store_true",
                    help="only each policy's plan for the true rates, its closed-form freshness")
    a = ap.parse_args()
    defaults = settings_table({})
    overrides = {}
    for k, v in (x.split("=", 1) for x in a.s):
        if not hasattr(defaults, k):
            ap.error(f"-s {k}: not a RECRAWL_ setting")
        kind = type(getattr(defaults, k))  # an int setting stays an int
        try:
            overrides[k] = kind(float(v)) if kind in (int, float) else kind(v)
        except ValueError:
            ap.error(f"-s {k}={v}: not a {kind.__name__}")
    webs = [(dist, n, b) for dist in a.dists.split(",") for n in map(int, a.pages.split(","))
            for b in map(float, a.per_page_day.split(","))]
    seeds = [int(x) for x in a.seeds.split(",")]
    if a.closed_form:
        print("| web | pages | budget/page/day | seed | uniform | optimal | webfountain "
              "| webfountain's share of optimal's lead | pages webfountain leaves uncrawled |")
        print("|---|---|---|---|---|---|---|---|---|")
        for (dist, n, b), sd in ((w, sd) for w in webs for sd in seeds):
            c = closed_forms(dist, n, b, sd, overrides)
            lead = (c["webfountain"] - c["uniform"]) / (c["optimal"] - c["uniform"])
            print(f"| {dist} | {n} | {b:g} | {sd} | {c['uniform']:.4f} | "
                  f"{c['optimal']:.4f} | {c['webfountain']:.4f} | {lead:.0%} | "
                  f"{c['webfountain_uncrawled']:.0%} |", flush=True)
        return
    if a.bias:
        print("| Last-Modified | rate x interval | visits | estimate / true: median (10-90 %) |")
        print("|---|---|---|---|")
        for lm in (True, False):
            for r in bias(lm):
                print(f"| {'yes' if lm else 'no'} | {r['rate_x_interval']:g} | {r['visits']} | "
                      f"{r['median']:.2f} ({r['p10']:.2f}-{r['p90']:.2f}) |")
        return
    rows = []
    print("| web | pages | budget/page/day | days | seeds | policy | freshness (mean, min-max) "
          "| oracle | share of the oracle's lead over uniform | first pass, days |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (dist, n, b), d in ((w, d) for w in webs for d in map(float, a.days.split(","))):
        got: dict[str, list[dict]] = {}
        for p in a.policies.split(","):
            for sd in seeds:
                r = run(dist, n, b, d, p, sd, a.lm, a.day_seconds, overrides,
                        a.server_clock, not a.no_clock_ratio, a.boost)
                got.setdefault(p, []).append(r)
                rows.append(r)
        uni = got.get("uniform")
        for p, rs in got.items():
            f = np.array([r["freshness"] for r in rs])
            o = np.array([r["oracle"] for r in rs])
            lead = ""
            if uni and p != "uniform":
                u = np.array([r["freshness"] for r in uni])
                lead = f"{np.mean((f - u) / (o - u)):.0%} " \
                       f"({', '.join(f'{x:.0%}' for x in (f - u) / (o - u))})"
            fp = np.mean([r["first_pass_days"] for r in rs])
            print(f"| {dist} | {n} | {b:g} | {d:g} | {a.seeds} | {p} | "
                  f"{f.mean():.4f} ({f.min():.4f}-{f.max():.4f}) | {o.mean():.4f} | "
                  f"{lead} | {fp:.1f} |", flush=True)
            if a.classes:
                r = rs[0]
                print("    " + " | ".join(
                    f"{c['lo']:g}-{c['hi']:g}: {c['fetches_per_day']:.3f} "
                    f"({c['oracle_per_day']:.3f}) est/true {c['estimate_over_true']:.2g}"
                    for c in r["classes"]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
