"""Live recrawl benchmark: the recrawl policies side by side on the changing
simulated web, freshness measured from the web's request log alone.

    .venv/bin/python bench/recrawl_bench.py [--pages 500 --hosts 50 --day-seconds 2
        --per-page-day 0.2,0.1 --days 30 | --fetches-per-page 12 --dists loguniform,gamma
        --policies uniform,adaptive,optimal,webfountain,webfountain1,webfountain2]

"webfountain" runs RECRAWL_WEBFOUNTAIN_STRATEGY's default, "webfountainN"
strategy N.
    .venv/bin/python bench/recrawl_bench.py --budget-check     (1 and 2 workers)
    .venv/bin/python bench/recrawl_bench.py --sitemaps --policies optimal
        [--variants none,lastmod --sitemap-refresh 2]

With --sitemaps every host's robots.txt names a sitemap of its pages with
their <lastmod>, and each policy runs once per variant on the same web and
budget: "none" reads no sitemap (SITEMAP_ENABLED off), "sitemaps" reads them
without their lastmod (SITEMAP_LASTMOD off: their fetches' cost alone),
"lastmod" feeds each lastmod past a page's last fetch to its change-rate
estimate and makes it due (crawlproj/sitemaps/lastmod.py); a sitemap is
fetched again every --sitemap-refresh simulated days (SITEMAP_REFRESH).

For each change-rate distribution (log-uniform from once a year to every 15
minutes, the range WebFountain observed; Gamma(0.8, 0.25) per day, Cho &
Garcia-Molina's fit) and each policy: a fresh crawl (its own CRAWL_ID on one
embedded Redis server) of the simulated web by one `scrapy crawl web` worker
with RECRAWL_ENABLED, RECRAWL_BUDGET = per-page-day x pages per simulated day,
for --days simulated days; the first fetch of every page is its crawl's
start, the window of the measure is the run's second half, over the pages
fetched before it (the first pass). Measured from the web's log only (crawlproj/simweb/freshness.py):
time-averaged freshness of the HTML pages, fetches per page, spent budget
(fetches per second over the window / RECRAWL_BUDGET), bytes of unchanged
pages saved by conditional GET (304s: 1 - bytes sent / bytes of a full
answer). The oracle is computed, not crawled: the freshness-optimal
allocation (Cho & Garcia-Molina's Lagrange condition) of the spent budget
over the pages' true rates, and uniform at the same spend, from the closed
form F = (f/lam)(1 - e^(-lam/f)).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.recrawl import buckets  # noqa: E402
from crawlproj.recrawl.freshness import freshness as closed_form  # noqa: E402
from crawlproj.recrawl.policies import optimal, uniform  # noqa: E402
from crawlproj.recrawl.population import Population  # noqa: E402
from crawlproj.redis.embedded import free_port, spawn_server  # noqa: E402
from crawlproj.simweb import checks, freshness  # noqa: E402
from crawlproj.simweb.model import SITEMAP_PATH  # noqa: E402
from crawlproj.simweb.testing import SimWebServer  # noqa: E402

DISTS = {"loguniform": "loguniform:0.00274:96", "gamma": "gamma:0.8:0.25"}


VARIANTS = {"none": {"SITEMAP_ENABLED": False},
            "sitemaps": {"SITEMAP_ENABLED": True, "SITEMAP_LASTMOD": False},
            "lastmod": {"SITEMAP_ENABLED": True, "SITEMAP_LASTMOD": True}}


# true change rates per simulated day: the classes of the fetch table
CLASSES = (0, 0.008, 0.03, 0.1, 0.37, 1.45, 5.2, 22, 96.01)


def run_policy(sw, redis_url: str, tmp: Path, crawl_id: str, policy: str, budget: float,
               scale: float, seconds: float, workers: int = 1, extra: dict | None = None) -> dict:
    # "webfountain" alone runs RECRAWL_WEBFOUNTAIN_STRATEGY's default,
    # "webfountainN" strategy N
    strategy = {}
    if policy.startswith("webfountain"):
        policy, n = "webfountain", policy[len("webfountain"):]
        strategy = {"RECRAWL_WEBFOUNTAIN_STRATEGY": n} if n else {}
    env = sw.env()
    env.update(REDIS_URL=redis_url, CRAWL_ID=crawl_id, CRAWL_DATA_DIR=str(tmp / "data"),
               PYTHONUNBUFFERED="1")
    settings = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 16, "CRAWL_SCOPE": "any",
                "DEPTH_LIMIT": 0, "FRONTIER_DELAY_FACTOR": 2, "RETRY_TIMES": 0,
                "RECRAWL_ENABLED": True, "RECRAWL_POLICY": policy, **strategy,
                "RECRAWL_BUDGET": budget,
                "RECRAWL_TIME_SCALE": scale,
                "INDEX_ENABLED": False, "LINKSTORE_ENABLED": False, "WARC_ENABLED": False,
                **(extra or {})}
    procs = []
    for i in range(workers):
        cmd = [sys.executable, "-m", "scrapy", "crawl", "web"]
        if i == 0:
            cmd += ["-a", f"seeds={tmp / 'seeds.txt'}"]
        for k, v in settings.items():
            cmd += ["-s", f"{k}={v}"]
        log = open(tmp / f"{crawl_id}-{i}.log", "wb")
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    started = time.time()
    time.sleep(seconds)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(120)
    return {"started": started, "stopped": time.time()}


def measure(sw, records, started: float, stopped: float, budget: float) -> dict:
    web = sw.web
    mine = [r for r in records if started <= r["t0"] <= stopped]
    pages = [r for r in mine if r["path"] not in ("/robots.txt", SITEMAP_PATH)]
    # the HTML pages the crawl can reach from its seeds, robots.txt obeyed
    reach = web.reachable(web.seeds(5), obey_robots=True)
    html = [v for v in range(web.n_nodes) if web.is_html(v) and web.url(v) in reach]
    fetched_at: dict[str, float] = {}
    for r in sorted(pages, key=lambda r: r["t0"]):
        fetched_at.setdefault(checks.url_of(r), r["t0"])
    html_urls = {web.url(v) for v in html}
    # the window: the second half of the run, the same for every policy
    # (the first pass, every reachable page once, is over by then)
    window_start = started + (stopped - started) / 2
    html = [v for v in html if fetched_at.get(web.url(v), stopped) < window_start]
    html_urls = {web.url(v) for v in html}
    rep = freshness.measure(mine, web, start=web.clock.day(window_start),
                            end=web.clock.day(stopped), nodes=html)
    in_window = [r for r in mine if r["t0"] >= window_start]
    spent = len(in_window) / (stopped - window_start)
    # conditional GET: bytes of fetches that found the page unchanged
    full: dict[str, int] = {}
    for r in pages:
        if r["status"] == 200:
            full[checks.url_of(r)] = r["bytes"]
    last_v: dict[str, int] = {}
    sent = whole = 0
    for r in sorted(pages, key=lambda r: r["t0"]):
        u, v = checks.url_of(r), r.get("v")
        if v is None or r["status"] not in (200, 304):
            continue
        if last_v.get(u) == v and u in full:
            sent += r["bytes"] if r["status"] == 200 else 0
            whole += full[u]
        last_v[u] = v
    # the oracle: the optimal allocation of the spent budget for the true rates
    lam = np.array([web.true_rate(v) for v in html]) / 86400.0   # per simulated second
    html_rate = sum(1 for r in in_window if checks.url_of(r) in html_urls) / (stopped - window_start)
    per_sim_second = html_rate * web.clock.day_seconds / 86400.0
    pop = Population.from_rates(lam)
    f_opt = optimal(pop, per_sim_second, weighted=False)
    f_uni = uniform(pop, per_sim_second)
    oracle = float((pop.pages * closed_form(pop.rate, f_opt)).sum() / pop.total)
    uni = float((pop.pages * closed_form(pop.rate, f_uni)).sum() / pop.total)
    # where the fetches of the window went, per true change rate, against the
    # oracle's allocation of the same spend (fetches per page per simulated day)
    days = web.clock.day(stopped) - web.clock.day(window_start)
    got: dict[str, int] = {}
    for r in in_window:
        u = checks.url_of(r)
        if u in html_urls and r["status"] in (200, 304):
            got[u] = got.get(u, 0) + 1
    rate_of = np.array([web.true_rate(v) for v in html])
    # the oracle per page: its bucket's frequency
    oracle_f = dict(zip(pop.bucket, f_opt))
    per_page_oracle = np.array([oracle_f[k] for k in buckets.buckets_of(lam)]) * 86400.0
    classes = []
    for lo, hi in zip(CLASSES, CLASSES[1:]):
        m = (rate_of >= lo) & (rate_of < hi)
        if not m.any():
            continue
        live = np.array([got.get(web.url(v), 0) for v, on in zip(html, m) if on]) / days
        classes.append({"lo": lo, "hi": hi, "pages": int(m.sum()),
                        "fetches_per_day": float(live.mean()),
                        "oracle_per_day": float(per_page_oracle[m].mean())})
    fetches_html = sum(1 for r in pages if checks.url_of(r) in html_urls)
    sitemaps = sum(1 for r in in_window if r["path"] == SITEMAP_PATH)
    return {"freshness": rep.total.freshness, "age_days": rep.total.age,
            "sitemap_share": sitemaps / max(1, len(in_window)),
            "window_days": web.clock.day(stopped) - web.clock.day(window_start),
            "fetches_per_page": fetches_html / len(html),
            "spent_per_s": spent, "spent_ratio": spent / budget,
            "not_modified": sum(1 for r in pages if r["status"] == 304),
            "conditional_saved": 1 - sent / whole if whole else float("nan"),
            "oracle": oracle, "uniform_closed_form": uni, "classes": classes}


def states(sw, redis_url: str, crawl_id: str) -> list[dict]:
    """Per true-rate class, the estimator's state of the crawl's scheduled
    pages at the end: median of the scheduled bucket's rate over the true
    rate, pages whose
    Last-Modified was found unusable, visits and changes seen."""
    import redis as redis_lib

    from crawlproj.frontier.frontier import Frontier
    from crawlproj.recrawl.schedule import scheduled_bucket, scheduled_states
    from crawlproj.recrawl.state import LM_UNUSABLE
    from crawlproj.redis.keyspace import Keyspace
    r = redis_lib.Redis.from_url(redis_url)
    web = sw.web
    node_of = {web.url(v): v for v in range(web.n_nodes) if web.is_html(v)}
    rows = []
    for url, st in scheduled_states(Frontier(r, Keyspace.found(r, crawl_id))):
        v = node_of.get(url)
        if v is not None:
            rows.append((web.true_rate(v), st))
    out = []
    for lo, hi in zip(CLASSES, CLASSES[1:]):
        sel = [(t, st) for t, st in rows if lo <= t < hi]
        if not sel:
            continue
        ratio = [buckets.rate_of(scheduled_bucket(st)) * 86400 / t for t, st in sel
                 if t > 0 and scheduled_bucket(st) != buckets.UNKNOWN]
        out.append({"lo": lo, "hi": hi, "pages": len(sel),
                    "estimate_over_true_median": float(np.median(ratio)) if ratio else None,
                    "never_changed": sum(1 for _, st in sel if st.changes == 0) / len(sel),
                    "lm_unusable": sum(1 for _, st in sel if st.flags & LM_UNUSABLE) / len(sel),
                    "visits": float(np.mean([st.fetches for _, st in sel])),
                    "changes": float(np.mean([st.changes for _, st in sel]))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=500)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--day-seconds", type=float, default=2.0)
    ap.add_argument("--per-page-day", default="0.2",
                    help="budgets, fetches per page per simulated day, comma-separated")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--fetches-per-page", type=float, default=None,
                    help="instead of --days: run each budget for this many fetches per page")
    ap.add_argument("--dists", default="loguniform,gamma")
    ap.add_argument("--policies",
                    default="uniform,adaptive,optimal,webfountain1,webfountain2,webfountain3")
    ap.add_argument("--budget-check", action="store_true",
                    help="uniform with 1 and with 2 workers: the spent budget only")
    ap.add_argument("--sitemaps", action="store_true",
                    help="every host names a sitemap with lastmod; each policy per --variants")
    ap.add_argument("--variants", default="none,lastmod",
                    help="with --sitemaps: none, sitemaps, lastmod (comma-separated)")
    ap.add_argument("--sitemap-refresh", type=float, default=2.0,
                    help="with --sitemaps: simulated days between two fetches of a sitemap")
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for every worker (otherwise every recrawl setting but the "
                         "clock and the budget is the default)")
    ap.add_argument("--http-clock", default="simulated", choices=("simulated", "wall"),
                    help="what the web's Date and Last-Modified count (simweb's http_clock)")
    ap.add_argument("--seeds", default="5", help="web seeds (change processes), comma-separated")
    ap.add_argument("--states", action="store_true",
                    help="also the estimator's state per true-rate class at the end")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="recrawl-bench-"))
    port = free_port()
    (tmp / "redis").mkdir()
    server = spawn_server(port, tmp / "redis", appendonly=False)
    redis_url = f"redis://127.0.0.1:{port}/0"
    rows = []
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        for per_page_day in (float(x) for x in a.per_page_day.split(",")):
            days = a.days if a.fetches_per_page is None else a.fetches_per_page / per_page_day
            for dist, seed in ((d, int(x)) for d in a.dists.split(",")
                               for x in a.seeds.split(",")):
                spec = {"seed": seed, "hosts": a.hosts, "pages": a.pages, "page_bytes": 2000,
                        "latency_ms": [1, 3], "change_dist": DISTS[dist],
                        "day_seconds": a.day_seconds, "sitemaps": 1.0 if a.sitemaps else 0.0,
                        "http_clock": a.http_clock}
                runs = [("uniform", 1, "-"), ("uniform", 2, "-")] if a.budget_check else \
                    [(p, 1, v) for p in a.policies.split(",")
                     for v in (a.variants.split(",") if a.sitemaps else ["-"])]
                for policy, workers, variant in runs:
                    extra = dict(VARIANTS.get(variant, {}), SITEMAP_REFRESH=a.sitemap_refresh * 86400,
                                 **dict(x.split("=", 1) for x in a.settings))
                    name = f"{dist}-{seed}-{per_page_day:g}-{policy}-{workers}-{variant}"
                    with SimWebServer(spec, log_path=str(tmp / f"{name}.jsonl")) as sw:
                        (tmp / "seeds.txt").write_text("\n".join(sw.web.seeds(5)) + "\n")
                        budget = per_page_day * a.pages / a.day_seconds
                        scale = 86400.0 / a.day_seconds
                        t = run_policy(sw, redis_url, tmp, name, policy, budget, scale,
                                       days * a.day_seconds, workers, extra)
                        records = sw.settle_log()
                        row = {"dist": dist, "seed": seed, "per_page_day": per_page_day,
                               "days": days, "pages": a.pages, "hosts": a.hosts,
                               "day_seconds": a.day_seconds, "http_clock": a.http_clock,
                               "settings": a.settings,
                               "policy": policy, "workers": workers, "variant": variant,
                               "budget": budget,
                               **measure(sw, records, t["started"], t["stopped"], budget)}
                        if a.states:
                            row["states"] = states(sw, redis_url, name)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    finally:
        server.kill()
        server.wait()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    print()
    print("| web | seed | budget/page/day | days | policy | workers | sitemaps | freshness | oracle "
          "| uniform (closed form) | fetches/page | spent / budget | 304s | conditional GET saved |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dist']} | {r['seed']} | {r['per_page_day']:g} | {r['days']:g} | {r['policy']} | "
              f"{r['workers']} | {r['variant']} ({r['sitemap_share']:.1%} of fetches) | "
              f"{r['freshness']:.4f} | "
              f"{r['oracle']:.4f} | {r['uniform_closed_form']:.4f} | {r['fetches_per_page']:.1f} | "
              f"{r['spent_ratio']:.3f} | {r['not_modified']} | {r['conditional_saved']:.1%} |")
    print()
    print("fetches per page per simulated day by true change rate (oracle's in brackets):")
    for r in rows:
        cells = " | ".join(f"{c['lo']:g}-{c['hi']:g}: {c['fetches_per_day']:.3f} "
                           f"({c['oracle_per_day']:.3f})" for c in r["classes"])
        print(f"{r['dist']} {r['seed']} {r['per_page_day']:g} {r['policy']}: {cells}")
        for c in r.get("states", []):
            print(f"    state {c['lo']:g}-{c['hi']:g}: {c}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
