"""The races of bench/live_orders.py on several webs, side by side in one PNG.

    .venv/bin/python bench/live_races_plot.py OUT.png NAME=DIR [NAME=DIR ...]

Each DIR is a live_orders.py --out directory (its races.csv). One row of panels
per web, one column per set-up (workers x CONCURRENT_REQUESTS x delay factor):
`pagerank` live (solid) against `bfs` live (dashed) on the top pages by PageRank,
`backlinks` likewise on the top pages by in-degree, and each order's virtual
curve (dotted), % of the hot pages fetched after each tenth of the crawl. A
panel's title says PASS or FAIL for each race (docs/ordering.md, "Live, polite
crawls").
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

COLORS = {"pagerank": "tab:red", "backlinks": "tab:blue"}


def read_races(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print("usage: live_races_plot.py OUT.png NAME=DIR [NAME=DIR ...]", file=sys.stderr)
        return 2
    webs = []
    for arg in argv[1:]:
        name, _, d = arg.partition("=")
        f = Path(d) / "races.csv"
        if not f.exists():
            print(f"live_races_plot: no races.csv in {d}", file=sys.stderr)
            return 2
        webs.append((name, read_races(f)))
    configs = list(dict.fromkeys(r["config"] for _, rows in webs for r in rows))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tenths = range(1, 11)
    fig, axes = plt.subplots(len(webs), len(configs), figsize=(3.2 * len(configs), 2.6 * len(webs)),
                             squeeze=False, sharex=True)
    for i, (name, rows) in enumerate(webs):
        for j, cfg in enumerate(configs):
            ax = axes[i][j]
            verdicts = []
            for r in (r for r in rows if r["config"] == cfg and "+" not in r["order"]):
                c = COLORS.get(r["order"], "k")
                ax.plot(tenths, [float(r[f"live_{t}"]) for t in tenths], color=c, lw=1.6,
                        label=f"{r['order']} live")
                ax.plot(tenths, [float(r[f"bfs_{t}"]) for t in tenths], color=c, ls="--", lw=1,
                        label=f"bfs live ({'IR' if r['measure'] == 'pst_ir' else 'IB'})")
                if "virtual_1" in r:
                    ax.plot(tenths, [float(r[f"virtual_{t}"]) for t in tenths], color=c, ls=":",
                            lw=1, label=f"{r['order']} virtual")
                verdicts.append(f"{r['order'][:2]} {r['verdict']}")
            if not verdicts:
                ax.set_axis_off()
                continue
            ax.set_title(f"{name}, {cfg}\n{'; '.join(verdicts)}", fontsize=8)
            ax.set_ylim(0, 102)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            if j == 0:
                ax.set_ylabel("% of hot pages", fontsize=8)
            if i == len(webs) - 1:
                ax.set_xlabel("tenth of the crawl", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle("Live races against bfs: pagerank on the top 1% by PageRank, "
                 "backlinks on the top 1% by in-degree", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(argv[0], dpi=90)
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
