"""A politeness-bound crawl: pages/s against the most the politeness rule allows.

    .venv/bin/python bench/politeness_bench.py [--hosts 500 --pages 10000 --latency-ms 100]
        [--concurrency 16] [--factor 2] [--workers 1] [--control] [--src HEAD]

One real `scrapy crawl web` (this project's frontier) of a simulated web whose
every host answers after --latency-ms (robots.txt too), with many more hosts
than CONCURRENT_REQUESTS, FRONTIER_DELAY_FACTOR=--factor, FRONTIER_MIN_DELAY=0,
RETRY_TIMES=0. Host sizes are equal by default (--host-zipf 0), so that most
of the crawl has many hosts with work.

The bound. Let d be a request's duration (the simulated web's t1 - t0: its
latency plus sending; the crawler's own measure is a little longer, so the
rule it applies is a little stricter and this bound a little generous), f the
factor, C = CONCURRENT_REQUESTS.
* Per host: one request at a time, and the next may start f x d after the end
  of the last, so a host with work serves at most one page per (1 + f) x L_h,
  L_h its mean duration.
* Concurrency: C requests at a time, each holding its slot for d, so at most
  C / mean(d) requests per second; robots.txt fetches take their share of the
  slots (the pages' share is pages / (pages + robots fetches)).
* Work: a host can only be served while it has a URL that is known and not
  yet done. A URL is known from the end of the first fetched response that
  links to it (from the page's links in the model, or a redirect's target);
  a seed from the start. That is what this crawl discovered when, so the bound
  is for the crawl that happened: with W(t) the hosts with a known, unfinished
  URL at time t,
      B(t) = min( C / mean(d) x pages share,  sum over h in W(t) of 1 / ((1 + f) L_h) )
  and the most pages the rule allows between the first request and the last
  response is the integral of B(t). achieved / bound = pages / integral.
* Also reported: the static bound max(sum(d) / C, longest host chain
  sum_i d_i + f sum_{i<last} d_i) against the crawl's duration, the mean number
  of requests in flight (sum(d) / duration, at most C), how late each request
  came after its host was allowed again (its "lateness"), and the politeness
  check of the request log (crawlproj.simweb.checks: no overlaps, no gap
  shorter than the rule). Lateness only means something when hosts, not
  slots, are the limit.
* --control: the same web crawled by stock Scrapy (its scheduler, no
  politeness rule, same CONCURRENT_REQUESTS): what the engine itself reaches
  against the concurrency cap.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crawl_bench import SRC_DESC, STORES_OFF, Bench, loadavg, machine, tree  # sets up the code under test

from crawlproj.simweb import checks


def bound(records: list[dict], web, seeds: list[str], concurrency: int, factor: float) -> dict:
    pages = [r for r in records if r["path"] != "/robots.txt"]
    robots = [r for r in records if r["path"] == "/robots.txt"]
    t_start = min(r["t0"] for r in records)
    t_end = max(r["t1"] for r in records)
    span = t_end - t_start
    dur = [r["t1"] - r["t0"] for r in records]
    mean_d = sum(dur) / len(dur)
    page_share = len(pages) / len(records)
    cap = concurrency / mean_d * page_share

    # per-host mean duration of page requests
    by_host = defaultdict(list)
    for r in pages:
        by_host[r["host"]].append(r)
    L = {h: sum(x["t1"] - x["t0"] for x in rs) / len(rs) for h, rs in by_host.items()}

    # discovery: end of the first fetched response that links to a URL
    first_end: dict[str, float] = {}
    for r in sorted(pages, key=lambda r: r["t1"]):
        url = checks.url_of(r)
        node = web.node_of(url)
        if node is None:
            continue
        if r["status"] in (301, 302):
            targets = [web.redirect_target(node)]
        elif r["status"] == 200:
            try:
                targets = [u for u, _ in web.links(node)]
            except Exception:
                targets = []
        else:
            targets = []
        for u in targets:
            if u and u not in first_end:
                first_end[u] = r["t1"]
    for s in seeds:
        first_end[s] = t_start
    # per URL (first fetch): known from disc, done at t1 of its first fetch
    events = []  # (time, host, +1/-1)
    first_fetch = {}
    for r in sorted(pages, key=lambda r: r["t0"]):
        first_fetch.setdefault(checks.url_of(r), r)
    unknown = 0
    for url, r in first_fetch.items():
        disc = first_end.get(url)
        if disc is None or disc > r["t0"]:
            unknown += disc is None
            disc = r["t0"]  # not known earlier than it was requested
        events.append((disc, r["host"], 1))
        events.append((r["t1"], r["host"], -1))
    events.sort(key=lambda e: (e[0], -e[2]))
    pending = defaultdict(int)
    rate_sum = 0.0
    integral = 0.0
    cap_bound_s = 0.0  # seconds during which concurrency was the binding limit
    last_t = t_start
    for t, h, delta in events:
        if t > last_t:
            b = min(cap, rate_sum)
            integral += b * (t - last_t)
            if cap <= rate_sum:
                cap_bound_s += t - last_t
            last_t = t
        before = pending[h] > 0
        pending[h] += delta
        after = pending[h] > 0
        if before != after:
            per = 1.0 / ((1 + factor) * L[h])
            rate_sum += per if after else -per
    if t_end > last_t:
        integral += min(cap, max(rate_sum, 0.0)) * (t_end - last_t)

    # hosts with work over time (sampled each 0.5 s): how many ready hosts vs C
    samples = []
    t = t_start
    intervals = defaultdict(list)
    for url, r in first_fetch.items():
        disc = min(first_end.get(url, r["t0"]), r["t0"])
        intervals[r["host"]].append((disc, r["t1"]))
    while t < t_end:
        n = sum(1 for iv in intervals.values() if any(a <= t < b for a, b in iv))
        samples.append(n)
        t += max(0.5, span / 400)

    # static bound and lateness
    chain = 0.0
    lateness = []
    for rs in by_host.values():
        rs.sort(key=lambda r: r["t0"])
        ds = [x["t1"] - x["t0"] for x in rs]
        chain = max(chain, sum(ds) + factor * sum(ds[:-1]))
        for prev, nxt in zip(rs, rs[1:]):
            allowed = prev["t1"] + factor * (prev["t1"] - prev["t0"])
            lateness.append(nxt["t0"] - allowed)
    t_conc = sum(dur) / concurrency
    lat = sorted(lateness)
    def q(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 4) if lat else None
    return {
        "pages": len(pages), "robots_fetches": len(robots), "crawl_s": round(span, 2),
        "pages_per_s": round(len(pages) / span, 1),
        "mean_request_s": round(mean_d, 4),
        "concurrency_cap_pages_per_s": round(cap, 1),
        "per_host_cap_pages_per_s": round(1 / ((1 + factor) * mean_d), 2),
        "bound_pages": round(integral),
        "bound_pages_per_s_mean": round(integral / span, 1),
        "achieved_over_bound": round(len(pages) / integral, 3),
        "seconds_concurrency_bound": round(cap_bound_s, 1),
        "seconds_host_bound": round(span - cap_bound_s, 1),
        "urls_with_unknown_discovery": unknown,
        "hosts_with_work": {"median": statistics.median(samples) if samples else 0,
                            "p10": sorted(samples)[len(samples) // 10] if samples else 0,
                            "max": max(samples) if samples else 0},
        "static_bound": {"concurrency_s": round(t_conc, 2), "longest_host_chain_s": round(chain, 2),
                         "min_crawl_s": round(max(t_conc, chain), 2),
                         "achieved_over_bound": round(max(t_conc, chain) / span, 3)},
        "mean_in_flight": round(sum(dur) / span, 2),
        "max_in_flight": checks.max_in_flight(records),
        "lateness_s": {"p10": q(0.1), "median": q(0.5), "p90": q(0.9), "p99": q(0.99)},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=500)
    p.add_argument("--pages", type=int, default=10000)
    p.add_argument("--host-zipf", type=float, default=0.0)
    p.add_argument("--page-bytes", type=int, default=2000)
    p.add_argument("--latency-ms", default="100", help="a number, or lo-hi drawn per host")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--factor", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--src", default="HEAD", help="git revision to benchmark, or 'worktree'")
    p.add_argument("--out", default=None)
    p.add_argument("--control", action="store_true",
                   help="also crawl the same web with stock Scrapy (no politeness): the engine's ceiling")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="extra Scrapy setting for every run")
    p.add_argument("--also", action="append", default=[], metavar="NAME=VALUE",
                   help="one more polite run with this setting, in the same invocation (A/B)")
    p.add_argument("--base", default=None, metavar="REV",
                   help="one more polite run on the code of git revision REV (before/after)")
    p.add_argument("--repeat", type=int, default=1, help="rounds of all the runs, interleaved")
    a = p.parse_args()
    lat = [float(x) for x in a.latency_ms.split("-")] if "-" in a.latency_ms else float(a.latency_ms)
    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "host_zipf": a.host_zipf,
            "page_bytes": a.page_bytes, "latency_ms": lat, "crawl_delay_fraction": 0.0}
    common = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": a.concurrency,
              "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": 0,
              "FRONTIER_DELAY_FACTOR": a.factor, "FRONTIER_MIN_DELAY": 0, "RETRY_TIMES": 0,
              **STORES_OFF}
    for kv in a.set:
        k, _, v = kv.partition("=")
        common[k] = v
    workdir = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="politeness-bench-"))
    head = {"machine": machine(), "code": SRC_DESC, "spec": spec, "settings": common,
            "workers": a.workers, "argv": sys.argv, "workdir": str(workdir)}
    print(json.dumps(head), flush=True)
    bench = Bench(spec, workdir, a.seeds, common)
    out = {}
    try:
        runs = [("polite", {}, a.factor, None)]
        for kv in a.also:
            k, _, v = kv.partition("=")
            runs.append((f"polite {kv}", {k: v}, a.factor, None))
        if a.base:
            runs.append((f"polite @{a.base}", {}, a.factor, tree(a.base)[0]))
        if a.control:
            # the engine's own ceiling on this web: stock Scrapy, same concurrency,
            # no politeness rule at all (its bound is the concurrency cap alone)
            runs.append(("stock-control", {"SCHEDULER": "scrapy.core.scheduler.Scheduler",
                                           "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"},
                         0.0, None))
        runs = [(f"{name} #{r + 1}" if a.repeat > 1 else name, *rest)
                for r in range(a.repeat) for name, *rest in runs]
        for name, settings, factor, src in runs:
            polite = name.startswith("polite")
            res = bench.run(name.replace(" ", "_").replace("=", "-").replace("@", "at-")
                            .replace("#", ""), a.workers if polite else 1, settings, src=src)
            records = bench.last_records
            b = bound(records, bench.web, bench.seeds, a.concurrency, factor)
            if polite:
                b["politeness_violations"] = len(checks.politeness_violations(
                    records, factor=a.factor, tolerance=0.005))
                b["overlaps"] = len(checks.overlaps(records, ignore_paths=("/robots.txt",)))
            run = {k: res[k] for k in ("pages", "missing", "extra", "refetched", "crawl_s", "wall_s",
                                       "pages_per_s", "cpu_s", "load_avg_before", "exit_codes",
                                       "scrapy_stats", "schedstat", "gc_seconds_by_generation")}
            run["redis"] = {k: v for k, v in res["redis"].items() if "by_command" not in k}
            out[name] = {"run": run, "bound": b, "load_avg_after": loadavg()}
            print(json.dumps({name: out[name]}), flush=True)
            print(name, json.dumps(b, indent=1), file=sys.stderr, flush=True)
        (workdir / "results.json").write_text(json.dumps({**head, **out}, indent=1))
    finally:
        bench.close()

if __name__ == "__main__":
    main()
