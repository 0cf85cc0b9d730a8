"""A politeness-bound crawl: pages/s against the most the politeness rule allows.

    .venv/bin/python bench/politeness_bench.py [--hosts 500 --pages 10000 --latency-ms 100]
        [--concurrency 16] [--factor 2] [--workers 1|1,2,8,16] [--control] [--src HEAD]

One real `scrapy crawl web` (this project's frontier) of a simulated web whose
every host answers after --latency-ms (robots.txt too), with many more hosts
than CONCURRENT_REQUESTS, FRONTIER_DELAY_FACTOR=--factor, FRONTIER_MIN_DELAY=0,
RETRY_TIMES=0. Host sizes are equal by default (--host-zipf 0), so that most
of the crawl has many hosts with work. --workers N runs N worker processes
sharing the frontier; a list (--workers 1,2,8,16) runs each count in turn on
the same web and Redis server (the many-workers benchmark).

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
  With N workers, C is N x CONCURRENT_REQUESTS.
* The politeness bound of the web: sum over its hosts of 1 / ((1 + f) L_h),
  every host with work. The crawl offers it only while every host has work;
  "steady" is the crawl's 5-s windows in which the hosts with work offered at
  least 90 % of it: pages/s there against the mean B(t) there.
* Also reported: the static bound max(sum(d) / C, longest host chain
  sum_i d_i + f sum_{i<last} d_i) against the crawl's duration, the mean number
  of requests in flight (sum(d) / duration, at most C), how late each request
  came after its host was allowed again (its "lateness"), and the politeness
  check of the request log (crawlproj.simweb.checks: no overlaps, no gap
  shorter than the rule). Lateness only means something when hosts, not
  slots, are the limit.
* Per run, what the workers and the server spent (within the crawl's span,
  first request to last response, so that the workers' start-up is left
  out): worker CPU ms per page (all workers, and each worker's per response),
  Redis CPU as % of a core and µs per page, the simulated web's CPU, the
  cores all of them used against the machine's, how long the workers'
  reactor threads waited for a CPU against how long they ran (schedstat: a
  CPU-starved run waits), each worker's peak RSS and RSS (and its anonymous,
  own part) at exit, Redis round trips per page (all workers, and each
  worker's per response), and which bound limited the run: the slots or the
  hosts (the seconds each was the lower term of B(t)).
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
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crawl_bench import SRC_DESC, STORES_OFF, Bench, cpu_between, loadavg, machine, tree  # sets up the code under test

from crawlproj.simweb import checks

WINDOW = 5.0  # seconds: the steady stretch is found window by window

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
    # per window of the crawl: integral of the hosts' bound (uncapped) and of B(t)
    n_win = int(span // WINDOW) + 1
    win_hosts = [0.0] * n_win
    win_bound = [0.0] * n_win

    def into_windows(a: float, b: float, host_rate: float) -> None:
        w = min(int((a - t_start) // WINDOW), n_win - 1)
        while a < b:
            end = b if w == n_win - 1 else min(b, t_start + (w + 1) * WINDOW)
            if end > a:
                win_hosts[w] += host_rate * (end - a)
                win_bound[w] += min(cap, host_rate) * (end - a)
                a = end
            w += 1

    last_t = t_start
    for t, h, delta in events:
        if t > last_t:
            b = min(cap, rate_sum)
            integral += b * (t - last_t)
            into_windows(last_t, t, max(rate_sum, 0.0))
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
        into_windows(last_t, t_end, max(rate_sum, 0.0))

    # The politeness bound of the whole web: every host with work, each at
    # one page per (1 + f) x L_h (Mercator's rule, docs/frontier.md), and the
    # windows in which at least 90 % of it was on offer (the steady crawl,
    # before the hosts run dry one by one)
    nominal = sum(1.0 / ((1 + factor) * x) for x in L.values())
    per_win = Counter(min(int((r["t0"] - t_start) // WINDOW), n_win - 1) for r in pages)
    lengths = [min(WINDOW, span - w * WINDOW) for w in range(n_win)]
    steady = [w for w in range(n_win)
              if lengths[w] > 0 and win_hosts[w] / lengths[w] >= 0.9 * nominal]
    steady_s = sum(lengths[w] for w in steady)

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
        "politeness_bound_pages_per_s": round(nominal, 1),
        "steady": {"seconds": round(steady_s, 1),
                   "pages_per_s": round(sum(per_win[w] for w in steady) / steady_s, 1)
                   if steady_s else None,
                   "bound_pages_per_s": round(sum(win_bound[w] for w in steady) / steady_s, 1)
                   if steady_s else None},
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


def worker_figures(res: dict, bench, b: dict, workers: int, first: float, last: float) -> dict:
    """What each worker and the Redis server spent on the crawl: CPU within
    the crawl's span (first request to last response, so that the workers'
    start-up is left out) per page and as cores, memory, Redis round trips
    per page, how long the reactors waited for a CPU, and which bound
    limited the run."""
    span = max(last - first, 1e-9)
    pages = max(b["pages"], 1)
    samples = bench.last_cpu_samples
    w_cpu = [cpu_between(samples["workers"][i], first, last) for i in range(workers)]
    r_cpu = cpu_between(samples["redis"], first, last)
    web_cpu = cpu_between(samples["simweb"], first, last)
    responses = [st.get("downloader/response_count", 0) for st in res["scrapy_stats"]]
    sends = []
    for i in range(workers):
        f = Path(res["dir"]) / f"redis-counts-{i}.json"
        sends.append(json.loads(f.read_text())["sends"] if f.exists() else 0)
    mem = res["workers_memory_kib"]
    sched = [w or {} for w in res["schedstat"]["workers_main_thread"]]
    run_s = sum(w.get("run_s", 0) for w in sched)
    wait_s = sum(w.get("runqueue_wait_s", 0) for w in sched)

    def spread(xs):
        xs = sorted(x for x in xs if x is not None)
        return {"min": xs[0], "median": xs[len(xs) // 2], "max": xs[-1]} if xs else None

    cores = (sum(w_cpu) + r_cpu + web_cpu) / span
    if b["seconds_concurrency_bound"] > b["seconds_host_bound"]:
        limit = "concurrency (workers x CONCURRENT_REQUESTS slots)"
    else:
        limit = "politeness (hosts with work)"
    if run_s and wait_s >= run_s:
        limit += "; CPU-contended (the reactors waited for a core longer than they ran)"
    return {
        "limit": limit,
        "cores_used_in_crawl": round(cores, 2),
        "reactor_runqueue_wait_over_run": round(wait_s / run_s, 3) if run_s else None,
        "workers_cpu_s_in_crawl": round(sum(w_cpu), 2),
        "workers_cpu_s_total": round(sum(res["cpu_s"]["workers"]), 2),
        "worker_cpu_ms_per_page_in_crawl": round(1000 * sum(w_cpu) / pages, 2),
        "worker_cpu_ms_per_page_total": round(1000 * sum(res["cpu_s"]["workers"]) / pages, 2),
        "each_worker_cpu_ms_per_response": spread(
            [round(1000 * c / n, 2) if n else None for c, n in zip(w_cpu, responses)]),
        "each_worker_responses": spread(responses),
        "rss_peak_mib": spread([round(m.get("rss_peak_kib", 0) / 1024, 1) for m in mem]),
        "rss_end_mib": spread([round(m.get("rss_end_kib", 0) / 1024, 1) for m in mem]),
        "anon_end_mib": spread([round(m.get("anon_end_kib", 0) / 1024, 1) for m in mem]),
        "rss_end_mib_sum": round(sum(m.get("rss_end_kib", 0) for m in mem) / 1024, 1),
        "anon_end_mib_sum": round(sum(m.get("anon_end_kib", 0) for m in mem) / 1024, 1),
        "redis_cpu_s_in_crawl": round(r_cpu, 2),
        "redis_core_pct": round(100 * r_cpu / span, 2),
        "redis_us_per_page": round(1e6 * r_cpu / pages, 1),
        "redis_used_memory_peak_mib": round(res["redis"]["used_memory_peak_sampled"] / 2**20, 1),
        "simweb_core_pct": round(100 * web_cpu / span, 2),
        "redis_round_trips_per_page": round(sum(sends) / pages, 3),
        # the whole run's (start-up and idle polls too) server CPU per round trip
        "redis_us_per_round_trip": round(1e6 * res["cpu_s"]["redis"] / sum(sends), 1)
        if sum(sends) else None,
        "each_worker_round_trips_per_response": spread(
            [round(s / n, 3) if n else None for s, n in zip(sends, responses)]),
        "redis_client_commands_per_page": res["redis"]["client_commands_per_page"],
        # EVALSHA: the frontier's syncs; EVAL: heartbeats and the indexer's and
        # ranker's lock ticks (every worker, each tick); GET/PTTL/SET: robots.txt
        "redis_client_commands_per_page_by_command": {
            k: round(v / pages, 3) for k, v in list(res["redis"]["client_by_command"].items())[:6]},
    }


def summary_line(name: str, r: dict) -> str:
    b, w = r["bound"], r["workers"]

    def spread(x):
        return f"{x['median']} ({x['min']}-{x['max']})" if x else "-"
    return (f"{name:<14} {b['pages']:>6} pages (missing {r['run']['missing']})"
            f" {b['pages_per_s']:>6.1f} p/s | bound {b['politeness_bound_pages_per_s']}"
            f" steady {b['steady']['pages_per_s']}/{b['steady']['bound_pages_per_s']}"
            f" ({b['steady']['seconds']} s) | of work-bound {b['achieved_over_bound']}"
            f" | viol {b.get('politeness_violations')} ovl {b.get('overlaps')}"
            f" | redis {w['redis_core_pct']}% {w['redis_us_per_page']} us/p"
            f" rt/p {w['redis_round_trips_per_page']} | cpu {w['worker_cpu_ms_per_page_in_crawl']}"
            f" ms/p, {w['cores_used_in_crawl']} cores, wait/run {w['reactor_runqueue_wait_over_run']}"
            f" | MiB rss peak {spread(w['rss_peak_mib'])} end {spread(w['rss_end_mib'])}"
            f" anon {spread(w['anon_end_mib'])} | {w['limit']}"
            f" | load {r['run']['load_avg_before']} -> {r['load_avg_after']}")


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
    p.add_argument("--workers", default="1",
                   help="worker processes sharing the frontier; a list (1,2,8,16) runs each "
                        "count in turn, interleaved within each --repeat round")
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
              "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0,  # the whole simulated web (one domain a host)
              **STORES_OFF}
    for kv in a.set:
        k, _, v = kv.partition("=")
        common[k] = v
    workdir = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="politeness-bench-"))
    counts = [int(x) for x in a.workers.split(",") if x]
    head = {"machine": machine(), "code": SRC_DESC, "spec": spec, "settings": common,
            "workers": counts, "argv": sys.argv, "workdir": str(workdir)}
    print(json.dumps(head), flush=True)
    bench = Bench(spec, workdir, a.seeds, common)
    out = {}
    try:
        runs = []
        for n in counts:
            tag = f" x{n}" if len(counts) > 1 else ""
            runs.append((f"polite{tag}", {}, a.factor, None, n))
            for kv in a.also:
                k, _, v = kv.partition("=")
                runs.append((f"polite{tag} {kv}", {k: v}, a.factor, None, n))
            if a.base:
                runs.append((f"polite{tag} @{a.base}", {}, a.factor, tree(a.base)[0], n))
        if a.control:
            # the engine's own ceiling on this web: stock Scrapy, same concurrency,
            # no politeness rule at all (its bound is the concurrency cap alone)
            runs.append(("stock-control", {"SCHEDULER": "scrapy.core.scheduler.Scheduler",
                                           "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"},
                         0.0, None, 1))
        runs = [(f"{name} #{r + 1}" if a.repeat > 1 else name, *rest)
                for r in range(a.repeat) for name, *rest in runs]
        for name, settings, factor, src, workers in runs:
            polite = name.startswith("polite")
            res = bench.run(name.replace(" ", "_").replace("=", "-").replace("@", "at-")
                            .replace("#", ""), workers, settings, src=src)
            records = bench.last_records
            # every worker has its own CONCURRENT_REQUESTS slots
            b = bound(records, bench.web, bench.seeds, a.concurrency * workers, factor)
            if polite:
                b["politeness_violations"] = len(checks.politeness_violations(
                    records, factor=a.factor, tolerance=0.005))
                b["overlaps"] = len(checks.overlaps(records, ignore_paths=("/robots.txt",)))
            run = {k: res[k] for k in ("pages", "missing", "extra", "refetched", "crawl_s", "wall_s",
                                       "pages_per_s", "cpu_s", "load_avg_before", "exit_codes",
                                       "scrapy_stats", "schedstat", "gc_seconds_by_generation")}
            run["redis"] = {k: v for k, v in res["redis"].items() if "by_command" not in k}
            first = min(r["t0"] for r in records)
            last = max(r["t1"] for r in records)
            out[name] = {"run": run, "bound": b, "load_avg_after": loadavg(),
                         "workers": worker_figures(res, bench, b, workers, first, last)}
            print(json.dumps({name: out[name]}), flush=True)
            print(name, json.dumps({**b, "workers": out[name]["workers"]}, indent=1),
                  file=sys.stderr, flush=True)
        (workdir / "results.json").write_text(json.dumps({**head, **out}, indent=1))
        for name, r in out.items():
            print(summary_line(name, r), file=sys.stderr)
    finally:
        bench.close()

if __name__ == "__main__":
    main()
