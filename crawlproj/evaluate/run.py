"""One ordering evaluation: importance over the whole graph, one virtual crawl per
order, the curves of Cho's Graphs 1-3 and Najork & Wiener's Fig. 1, as CSV and PNG."""

from __future__ import annotations

import csv
import os
import time
from dataclasses import dataclass, field

import numpy as np

from crawlproj.evaluate import metrics
from crawlproj.evaluate.crawler import ORDERS, virtual_crawl
from crawlproj.ranker.pagerank import CHO_DAMPING

CHO_G_IB = 100  # Cho §6, Graph 1: hot = 100 or more backlinks
CHO_G_IR = 13   # Cho §6, Graph 3: hot = PageRank 13 or more (average 1)


@dataclass
class Evaluation:
    graph_name: str
    n: int
    m: int
    start: int
    start_why: str
    universe: np.ndarray          # pages reachable from start
    ib: np.ndarray
    ir: np.ndarray
    ir_cross: np.ndarray | None   # cross-host PageRank, when hosts are known
    hot_ib: np.ndarray
    hot_ir: np.ndarray
    hot_rule: str
    damping: float
    crawls: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    crawl_stats: dict[str, dict] = field(default_factory=dict)

    @property
    def reach(self) -> int:
        return int(self.universe.sum())


def parse_orders(text: str, has_hosts: bool) -> list[str]:
    orders = [o.strip().lower() for o in text.split(",") if o.strip()]
    if not orders:
        raise ValueError("no orders given")
    for o in orders:
        if o not in ORDERS:
            raise ValueError(f"unknown order {o!r}; use some of {','.join(ORDERS)}")
        if o == "hostfirst" and not has_hosts:
            raise ValueError("order 'hostfirst' needs page URLs, and this graph has none")
    return list(dict.fromkeys(orders))


def evaluate(graph, orders, *, start: int | None = None, hot_g: float = CHO_G_IB,
             hot_g_ir: float = CHO_G_IR, hot_top: int | None = None,
             damping: float = CHO_DAMPING, pagerank_every: int | None = None,
             cross_host: bool = False, seed: int = 0, progress_factory=None,
             log=lambda msg: None) -> Evaluation:
    """Run the virtual crawler once per order and gather what the report needs.

    ``progress_factory(order, total)`` returns a callable taking a count of
    pages (a tqdm bar's ``update``) and optionally a ``close``.
    """
    t = time.perf_counter()
    if start is None:
        start, why = metrics.choose_start(graph)
    else:
        if not 0 <= start < graph.n:
            raise ValueError(f"start page {start} is not in the graph (ids 0..{graph.n - 1})")
        why = f"page {start}, given with --start"
    universe = metrics.reachable(graph, start)
    ib = metrics.backlinks(graph)
    ir = metrics.pagerank_importance(graph, damping)
    ir_cross = (metrics.pagerank_importance(graph, damping, cross_host=True)
                if graph.hosts is not None else None)
    if hot_top:
        hot_ib = metrics.hot_top(ib, hot_top, universe)
        hot_ir = metrics.hot_top(ir, hot_top, universe)
        rule = f"top {hot_top:,} by IB and by IR"
    else:
        hot_ib = metrics.hot_threshold(ib, hot_g, universe)
        hot_ir = metrics.hot_threshold(ir, hot_g_ir, universe)
        rule = f"IB >= {hot_g:g}; IR >= {hot_g_ir:g}"
    ev = Evaluation(graph.name, graph.n, graph.m, start, why, universe, ib, ir, ir_cross,
                    hot_ib, hot_ir, rule, damping)
    ev.seconds["importance"] = time.perf_counter() - t
    log(f"importance computed in {ev.seconds['importance']:.1f} s; start {why}; "
        f"{ev.reach:,} of {graph.n:,} pages reachable; hot pages: {int(hot_ib.sum()):,} by IB, "
        f"{int(hot_ir.sum()):,} by IR ({rule})")
    for order in orders:
        bar = progress_factory(order, ev.reach) if progress_factory else None
        t = time.perf_counter()
        stats: dict = {}
        ev.crawls[order] = virtual_crawl(
            graph, order, start, seed=seed, damping=damping, pagerank_every=pagerank_every,
            cross_host=cross_host and order == "pagerank", stats=stats,
            progress=bar.update if bar is not None else None)
        ev.seconds[order] = time.perf_counter() - t
        ev.crawl_stats[order] = stats
        if bar is not None and hasattr(bar, "close"):
            bar.close()
    return ev


# -- Summaries and files ----------------------------------------------------------------

def _at(curve: np.ndarray, frac: float) -> float:
    k = max(1, int(round(frac * len(curve))))
    return float(curve[min(k, len(curve)) - 1])


def summary_rows(ev: Evaluation) -> list[dict]:
    """Per order: PST at 10/20/50% of the crawl and over the whole crawl, PCS at 10%,
    average IR in the first and last tenth."""
    rows = []
    for order, crawl in ev.crawls.items():
        pst_ib = metrics.pst_curve(crawl, ev.hot_ib)
        pst_ir = metrics.pst_curve(crawl, ev.hot_ir)
        k10 = max(1, int(round(0.1 * len(crawl))))
        pcs = metrics.pcs_at(crawl, ev.ib, ev.universe, [k10])[0]
        pcs_ir = metrics.pcs_at(crawl, ev.ir, ev.universe, [k10])[0]
        tenths = metrics.tenth_averages(crawl, ev.ir)
        rows.append({
            "order": order, "crawled": len(crawl), "seconds": round(ev.seconds[order], 1),
            "pst_ib_10": _at(pst_ib, .1), "pst_ib_20": _at(pst_ib, .2), "pst_ib_50": _at(pst_ib, .5),
            "pst_ib_mean": metrics.area(pst_ib),
            "pst_ir_10": _at(pst_ir, .1), "pst_ir_20": _at(pst_ir, .2), "pst_ir_50": _at(pst_ir, .5),
            "pst_ir_mean": metrics.area(pst_ir),
            "pcs_ib_10": pcs, "pcs_ir_10": pcs_ir,
            "avg_ir_first_tenth": float(tenths[0]), "avg_ir_last_tenth": float(tenths[-1]),
        })
    return rows


def format_summary(ev: Evaluation) -> str:
    lines = [f"{ev.graph_name}: {ev.n:,} pages, {ev.m:,} links; start {ev.start_why}",
             f"reachable from start: {ev.reach:,}; hot: {int(ev.hot_ib.sum()):,} by IB, "
             f"{int(ev.hot_ir.sum()):,} by IR ({ev.hot_rule}); d = {ev.damping:g}",
             "",
             f"{'order':<10} {'PST-IB @10%':>11} {'@20%':>6} {'@50%':>6} {'mean':>6} "
             f"{'PST-IR @10%':>11} {'@20%':>6} {'@50%':>6} {'mean':>6} {'PCS-IB @10%':>11} "
             f"{'avgIR 1st':>9} {'last':>6} {'time s':>7}"]
    for r in summary_rows(ev):
        lines.append(
            f"{r['order']:<10} {r['pst_ib_10']:>11.1f} {r['pst_ib_20']:>6.1f} {r['pst_ib_50']:>6.1f} "
            f"{r['pst_ib_mean']:>6.1f} {r['pst_ir_10']:>11.1f} {r['pst_ir_20']:>6.1f} "
            f"{r['pst_ir_50']:>6.1f} {r['pst_ir_mean']:>6.1f} {r['pcs_ib_10']:>11.1f} "
            f"{r['avg_ir_first_tenth']:>9.2f} {r['avg_ir_last_tenth']:>6.2f} {r['seconds']:>7.1f}")
    return "\n".join(lines)


def write_csv(ev: Evaluation, out_dir: str, points: int = 200) -> list[str]:
    """curves.csv: PST and PCS per order at ``points`` crawl sizes; tenths.csv:
    average PageRank (and cross-host PageRank) per tenth of each crawl."""
    os.makedirs(out_dir, exist_ok=True)
    curves = os.path.join(out_dir, "curves.csv")
    with open(curves, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["order", "pages_crawled", "fraction_crawled", "pst_ib", "pst_ir",
                    "pcs_ib", "pcs_ir"])
        for order, crawl in ev.crawls.items():
            ks = metrics.checkpoints(len(crawl), points)
            pst_ib = metrics.pst_curve(crawl, ev.hot_ib)
            pst_ir = metrics.pst_curve(crawl, ev.hot_ir)
            pcs_ib = metrics.pcs_at(crawl, ev.ib, ev.universe, ks)
            pcs_ir = metrics.pcs_at(crawl, ev.ir, ev.universe, ks)
            for i, k in enumerate(ks):
                w.writerow([order, int(k), f"{k / ev.reach:.5f}", f"{pst_ib[k - 1]:.3f}",
                            f"{pst_ir[k - 1]:.3f}", f"{pcs_ib[i]:.3f}", f"{pcs_ir[i]:.3f}"])
    tenths = os.path.join(out_dir, "tenths.csv")
    with open(tenths, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["order", "tenth", "avg_pagerank", "avg_pagerank_cross_host"])
        for order, crawl in ev.crawls.items():
            avg = metrics.tenth_averages(crawl, ev.ir)
            avgx = (metrics.tenth_averages(crawl, ev.ir_cross) if ev.ir_cross is not None
                    else [None] * len(avg))
            for i, (a, b) in enumerate(zip(avg, avgx), 1):
                w.writerow([order, i, f"{a:.4f}", "" if b is None else f"{b:.4f}"])
    return [curves, tenths]


STYLE = {"pagerank": ("tab:red", "-"), "backlinks": ("tab:blue", "-"), "bfs": ("tab:green", "-"),
         "random": ("tab:gray", "-"), "opic": ("tab:purple", "--"), "hostfirst": ("tab:orange", "--")}


def plot(ev: Evaluation, path: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 9.5))
    reach = ev.reach
    h_ib, h_ir = int(ev.hot_ib.sum()), int(ev.hot_ir.sum())

    def reference(ax, h):
        x = np.linspace(0, 100, 201)
        ax.plot(x, x, color="black", lw=0.8, ls=":", label="random (expected)")
        if h:
            ax.plot(x, np.minimum(100, x * reach / h), color="black", lw=0.8, ls="--", label="ideal")

    panels = [(axes[0, 0], "PST", "hot_ib", f"PST, I(P) = IB(P), hot: {h_ib:,} pages (Cho Graph 1)"),
              (axes[0, 1], "PCS", "ib", "PCS, I(P) = IB(P) (Cho Graph 2)"),
              (axes[0, 2], "PST", "hot_ir", f"PST, I(P) = IR(P), hot: {h_ir:,} pages (Cho Graph 3)"),
              (axes[1, 0], "PCS", "ir", "PCS, I(P) = IR(P)")]
    for ax, kind, attr, title in panels:
        if kind == "PST":
            reference(ax, int(getattr(ev, attr).sum()))
        for order, crawl in ev.crawls.items():
            color, ls = STYLE.get(order, (None, "-"))
            if kind == "PST":
                curve = metrics.pst_curve(crawl, getattr(ev, attr))
                ks = metrics.checkpoints(len(crawl), 400)
                y = curve[ks - 1]
            else:
                ks = metrics.checkpoints(len(crawl), 200)
                y = metrics.pcs_at(crawl, getattr(ev, attr), ev.universe, ks)
            ax.plot(100.0 * ks / reach, y, color=color, ls=ls, label=order)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("pages crawled (% of the pages reachable from the start)")
        ax.set_ylabel(f"{kind} (%)")
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 101)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")

    panels = [(axes[1, 1], ev.ir, "Average PageRank per tenth of the crawl (Najork & Wiener Fig. 1)"),
              (axes[1, 2], ev.ir_cross, "Average cross-host PageRank per tenth (Najork & Wiener Fig. 4)")]
    for ax, values, title in panels:
        if values is None:
            ax.text(0.5, 0.5, "no URLs in this graph file:\ncross-host PageRank needs hosts",
                    ha="center", va="center", transform=ax.transAxes)
            ax.set_title(title, fontsize=10)
            ax.set_axis_off()
            continue
        for order, crawl in ev.crawls.items():
            color, ls = STYLE.get(order, (None, "-"))
            ax.plot(range(1, 11), metrics.tenth_averages(crawl, values), marker="o", color=color,
                    ls=ls, label=order)
        ax.axhline(values[ev.universe].mean(), color="black", lw=0.8, ls=":",
                   label="average over reachable pages")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("tenth of the crawl")
        ax.set_ylabel("average PageRank (graph average = 1)")
        ax.set_xticks(range(1, 11))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{ev.graph_name}: {ev.n:,} pages, {ev.m:,} links; crawl from {ev.start_why}; "
                 f"{reach:,} reachable; d = {ev.damping:g}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
