"""Crawling toward a query on the topical simulated web (issue 13, item 4):
the similarity order and the real-time search mode against breadth-first and
backlink count, side by side.

    .venv/bin/python bench/similarity_bench.py [--hosts 50] [--pages 2000] [--topics 8]
        [--seed 1] [--orders bfs,backlinks,similarity,similarity-hot,realtime,...]
        [--timeout 900] [--out docs/img/similarity] [--keep DIR]

The web: SimWeb.generate(topics=N) (docs/simweb.md, "Topical webs"). The
query is the name of the biggest topic other than the start page's (so the
crawl must find it), and its hot pages are SimWeb.hot_pages(query): the pages
whose title or own text holds it, known from the web itself (Cho et al. §3:
Crawl & Stop with Threshold, IS(P) hot).

Per order, a live crawl as bench/live_orders.py runs one: a fresh
Redis-protocol server, a fresh simulated web with its request log, one real
`scrapy crawl web` worker with CONCURRENT_REQUESTS=1, FRONTIER_PREFETCH=1 and
no politeness wait, so each request is the frontier's best URL at that
moment. The order is the request log's order of arrival (robots.txt left
out). Orders: bfs, backlinks (IB'), similarity (hot queue, then within
SIMILARITY_HOT_HOPS=3 links of a hot page, then IS'; Cho Fig. 5) and
similarity-hot (SIMILARITY_HOT_HOPS=0: the hot queue and IS' alone, Cho Fig. 4),
and the real-time search mode (`-a query=...` from the same start page, the
index empty; crawlproj/search/realtime.py), which stops by itself when no new
page entered the query's first result page over the last W indexed pages:
realtime (W = REALTIME_STABLE_PAGES = 50), realtime-W10, -W25, -W100, -W200.

Measured per order: the fetches needed to reach 50/80/100 % of the hot
pages, Cho's PST curve (share of hot pages fetched) at each tenth of the
crawl, and the harvest rate (share of the fetches that were hot pages) over
the first H fetches (H = number of hot pages) and over the whole crawl, and
how the crawl ended (Scrapy's finish reason: the real-time mode's
results_stable, or finished when the frontier ran out). A crawl that stopped
before it reached a share shows "-" there; its PST tenths are of its own,
shorter crawl.
Target (issue 13): 80 % of the hot pages with <= 0.6 x the fetches bfs needs.

Writes OUT/similarity.csv, OUT/summary.txt (what is printed) and
OUT/pst.png. Exit status 0 when every crawl finished, 1 if one failed.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from live_orders import _crawl, git_state, loadavg  # noqa: E402

from crawlproj.simweb import checks  # noqa: E402
from crawlproj.simweb.model import SimWeb  # noqa: E402

ORDERS = {
    "bfs": {"FRONTIER_PRIORITIZER": "bfs"},
    "backlinks": {"FRONTIER_PRIORITIZER": "backlinks"},
    "similarity": {"FRONTIER_PRIORITIZER": "similarity", "SIMILARITY_HOT_HOPS": 3},
    "similarity-hot": {"FRONTIER_PRIORITIZER": "similarity", "SIMILARITY_HOT_HOPS": 0},
    # the real-time search mode (`-a query=`, from the same start page: the
    # index is empty), which stops by itself; REALTIME_STABLE_PAGES = W
    "realtime": {"REALTIME_STABLE_PAGES": 50},
    "realtime-W10": {"REALTIME_STABLE_PAGES": 10},
    "realtime-W25": {"REALTIME_STABLE_PAGES": 25},
    "realtime-W100": {"REALTIME_STABLE_PAGES": 100},
    "realtime-W200": {"REALTIME_STABLE_PAGES": 200},
}
SHARES = (0.5, 0.8, 1.0)


def finish_reason(log: Path) -> str:
    """The worker's finish reason, from the stats Scrapy logs at its end."""
    found = re.findall(r"'finish_reason': '([^']*)'", log.read_text(errors="replace")) \
        if log.exists() else []
    return found[-1] if found else "-"


def pst_at_tenths(order: list[str], hot: set[str]) -> list[float]:
    """Cho's PST: % of the hot pages fetched, after each tenth of the crawl."""
    out = []
    for k in range(1, 11):
        n = round(len(order) * k / 10)
        out.append(100.0 * sum(1 for u in order[:n] if u in hot) / len(hot))
    return out


def harvest(order: list[str], hot: set[str], n: int | None = None) -> float:
    """Share of the first n fetches (all when None) that were hot pages."""
    part = order if n is None else order[:n]
    return sum(1 for u in part if u in hot) / max(1, len(part))


def plot(path: Path, results: dict, hot: int, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, r in results.items():
        order, hotset = r["order"], r["hot"]
        xs, ys, got = [0], [0.0], 0
        for i, url in enumerate(order, 1):
            got += url in hotset
            xs.append(i)
            ys.append(100.0 * got / hot)
        ax.plot(xs, ys, label=name)
    ax.axhline(80, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("fetches")
    ax.set_ylabel("hot pages fetched (PST, %)")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--topics", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--orders", default=",".join(ORDERS))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default=str(ROOT / "docs" / "img" / "similarity"))
    ap.add_argument("--keep", default=None, help="keep the crawls' files in this directory")
    a = ap.parse_args(argv)
    orders = [o for o in a.orders.split(",") if o]
    bad = [o for o in orders if o not in ORDERS]
    if bad:
        print(f"similarity_bench: unknown order(s) {', '.join(bad)}; use {', '.join(ORDERS)}",
              file=sys.stderr)
        return 2
    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "topics": a.topics,
            "page_bytes": 3000, "crawl_delay_fraction": 0.0, "latency_ms": 0}
    web = SimWeb.generate(**spec)
    start_url = web.seeds(1)[0]
    start_topic = web.topic(web.node_of(start_url))
    size = {t: len(web.hot_pages(web.topic_query(t))) for t in range(a.topics)}
    target = max((t for t in range(a.topics) if t != start_topic), key=lambda t: size[t])
    query = web.topic_query(target)
    hot = {web.url(v) for v in web.hot_pages(query)}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="simbench-"))
    work.mkdir(parents=True, exist_ok=True)

    lines = [f"similarity_bench: {' '.join(sys.argv[1:]) or '(defaults)'}; {git_state()}",
             f"web: {spec}",
             f"query {query!r} (topic {target}; start page's topic {start_topic}); "
             f"{len(hot)} hot pages of {web.n_nodes}; topic sizes {size}",
             f"load before: {loadavg()}"]
    results, failed = {}, False
    for name in orders:
        run = work / name
        run.mkdir(parents=True, exist_ok=True)
        settings = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1,
                    "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0, "CRAWL_SCOPE": "any",
                    "DEPTH_LIMIT": 0, **ORDERS[name]}
        realtime = name.startswith("realtime")
        if realtime:
            settings["FRONTIER_PRIORITIZER"] = "similarity"  # the session's; named for the crawl id
        else:
            settings["SIMILARITY_QUERY"] = query
        info: dict = {}
        t0 = time.monotonic()
        records = _crawl(spec, start_url, run, settings, info, a.timeout,
                         {"query": query} if realtime else None)
        order = checks.arrival_order(records)
        if info.get("rc") != 0:
            failed = True
            lines.append(f"{name}: worker exit status {info.get('rc')}; log in {run}")
        results[name] = {"order": order, "hot": hot, "seconds": time.monotonic() - t0,
                         "end": finish_reason(run / "worker.log")}
    lines.append(f"load after: {loadavg()}")

    lines.append("")
    lines.append(f"{'order':<16}{'fetches':>8}{'hot got':>8}"
                 + "".join(f"{'to ' + format(s, '.0%'):>9}" for s in SHARES)
                 + f"{'harvest@H':>11}{'harvest':>9}{'x bfs@80%':>10}  end")
    bfs80 = checks.fetches_to_reach(results["bfs"]["order"], hot, 0.8) if "bfs" in results else None
    rows = []
    for name, r in results.items():
        order = r["order"]
        need = [checks.fetches_to_reach(order, hot, s) for s in SHARES]
        ratio = (need[1] / bfs80) if (bfs80 and need[1]) else None
        got = sum(1 for u in order if u in hot)
        lines.append(f"{name:<16}{len(order):>8}{got:>8}"
                     + "".join(f"{'-' if n is None else n:>9}" for n in need)
                     + f"{harvest(order, hot, len(hot)):>11.2f}{harvest(order, hot):>9.2f}"
                     + f"{'-' if ratio is None else format(ratio, '.2f'):>10}  {r['end']}")
        rows.append({"order": name, "fetches": len(order), "hot_fetched": got,
                     **{f"fetches_to_{int(s * 100)}": n for s, n in zip(SHARES, need)},
                     "harvest_first_H": round(harvest(order, hot, len(hot)), 4),
                     "harvest_all": round(harvest(order, hot), 4),
                     "ratio_to_bfs_at_80": None if ratio is None else round(ratio, 4),
                     "finish_reason": r["end"],
                     **{f"pst_{k * 10}": round(p, 2)
                        for k, p in enumerate(pst_at_tenths(order, hot), 1)}})
    lines.append("")
    lines.append("PST (% of hot pages fetched) after each tenth of the crawl:")
    for name, r in results.items():
        lines.append(f"  {name:<16}" + "".join(f"{p:>6.0f}" for p in pst_at_tenths(r["order"], hot)))
    for name in results:
        if name.startswith(("similarity", "realtime")) and bfs80:
            need = checks.fetches_to_reach(results[name]["order"], hot, 0.8)
            met = need is not None and need <= 0.6 * bfs80
            lines.append(f"target ({name}): 80% of the hot pages in {need} fetches, bfs "
                         f"{bfs80}: {'-' if need is None else format(need / bfs80, '.2f')} x "
                         f"-> {'met' if met else 'NOT met'} (<= 0.6 x)")
    with open(out / "similarity.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(out / "pst.png", results, len(hot),
         f"topical web {a.hosts} hosts, {a.pages} pages, {a.topics} topics; "
         f"query {query!r}, {len(hot)} hot pages")
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
