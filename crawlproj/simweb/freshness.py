"""How fresh a crawler kept its copy of a changing simulated web, measured
from the server's request log and the true change times alone.

Cho & Garcia-Molina's measures (WebFountain §2): the copy of page p is fresh
at time t when it is p's current version, and its age is 0 while fresh, else
the time since the first change the copy missed:

    F(p, t) = 1 if held(p, t) == version(p, t) else 0
    A(p, t) = 0 if fresh, else t - T(p, held(p, t) + 1)

where T(p, k) is when version k began.  held(p, t) is the version of the
crawler's latest fetch of p before t: a GET answered 200 or 304, whose record
has the version served ("v"); the crawler holds it from the request's arrival
t0, when the server chose the version.  Nothing from the crawler is needed.

Over a window [start, end] of simulated days, per page, held time H(p) is the
part of the window after p's first fetch; the averages are over held time:

    freshness = sum_p integral F / sum_p H(p)
    age       = sum_p integral A / sum_p H(p)      (simulated days)
    coverage  = sum_p H(p) / (pages x (end - start))

A page not yet fetched has no copy: it counts in `coverage`, not in the two
averages.  The integrals are exact (piecewise constant and linear), so small
cases can be checked by hand (tests/test_simweb_change.py).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .model import SimWeb
from .server import read_log

__all__ = ["PageTally", "Bucket", "Report", "tally", "fetches_of", "measure", "bucket_of"]


class PageTally(NamedTuple):
    held: float    # days the crawler held a copy, within the window
    fresh: float   # of which days the copy was current
    age: float     # integral of the age over the window (days x days)


def tally(fetches: Iterable[tuple[float, int]], changes: Sequence[float],
          start: float, end: float) -> PageTally:
    """Freshness integrals of one page.  fetches: (day, version held) pairs;
    changes: [T1, T2, ...], the days versions 1, 2, ... began (version v is
    current until changes[v]); the window is [start, end]."""
    fs = sorted(fetches)
    held = fresh = age = 0.0
    for i, (a, v) in enumerate(fs):
        b = fs[i + 1][0] if i + 1 < len(fs) else end
        a, b = max(a, start), min(b, end)
        if b <= a:
            continue
        obsolete = changes[v] if v < len(changes) else math.inf
        held += b - a
        fresh += max(0.0, min(b, obsolete) - a)
        if b > obsolete:
            lo = max(a, obsolete)
            age += ((b - obsolete) ** 2 - (lo - obsolete) ** 2) / 2
    return PageTally(held, fresh, age)


class Bucket(NamedTuple):
    lo: float           # true change rates per simulated day in [lo, hi)
    hi: float
    pages: int          # pages with a rate in the bucket
    fetched: int        # of which held a copy during the window
    fetches: int        # GETs of them answered 200 or 304 (all times)
    freshness: float    # time-averaged over held time (nan when none held)
    age: float          # simulated days, time-averaged over held time
    coverage: float     # held time / (pages x window)


class Report(NamedTuple):
    start: float        # window, simulated days
    end: float
    buckets: list[Bucket]
    total: Bucket

    def format(self) -> str:
        """A plain-text table."""
        rows = [f"window: simulated days {self.start:.3f} .. {self.end:.3f}",
                f"{'rate/day':>19} {'pages':>6} {'fetched':>7} {'fetches':>7} "
                f"{'freshness':>9} {'age(days)':>9} {'coverage':>8}"]
        for b in [*self.buckets, self.total]:
            label = ("all" if b is self.total else "0" if b.hi == 0 else f"{b.lo:.3g}-{b.hi:.3g}")
            rows.append(f"{label:>19} {b.pages:>6} {b.fetched:>7} {b.fetches:>7} "
                        f"{b.freshness:>9.4f} {b.age:>9.4f} {b.coverage:>8.4f}")
        return "\n".join(rows)


def bucket_of(rate: float, per_decade: int = 1) -> int | None:
    """Log-scale bucket of a rate: i with 10^(i/per_decade) <= rate <
    10^((i+1)/per_decade); None for rate 0."""
    if rate <= 0:
        return None
    i = math.floor(math.log10(rate) * per_decade)
    # log10 rounding: keep the documented bounds exact at bucket edges
    if 10 ** ((i + 1) / per_decade) <= rate:
        i += 1
    elif 10 ** (i / per_decade) > rate:
        i -= 1
    return i


def fetches_of(records: Iterable[Mapping[str, Any]], web: SimWeb) -> dict[int, list[tuple[float, int]]]:
    """node -> [(simulated day of arrival, version held)] for the GETs of
    pages answered 200 or 304 and not aborted."""
    out: dict[int, list[tuple[float, int]]] = defaultdict(list)
    day = web.clock.day
    for r in records:
        if "v" not in r or r.get("method") != "GET" or r.get("aborted") or r["status"] not in (200, 304):
            continue
        node = web.node_of(f"http://{r['host']}{r['path']}")
        if node is not None:
            out[node].append((day(r["t0"]), r["v"]))
    return dict(out)


def measure(records: Iterable[Mapping[str, Any]], web: SimWeb, start: float | None = None,
            end: float | None = None, per_decade: int = 1, nodes: Iterable[int] | None = None) -> Report:
    """Freshness and age per rate bucket over the window [start, end]
    (simulated days; default: first to last page fetch in the log).  nodes:
    the pages measured (default: every HTML page not disallowed by robots.txt,
    i.e. what a polite crawler can hold)."""
    if not web.changing:
        raise ValueError("freshness needs a web with change processes (change_dist)")
    fetches = fetches_of(records, web)
    if start is None or end is None:
        days = [d for fs in fetches.values() for d, _ in fs]
        if not days:
            raise ValueError("no page fetches in the log: give start and end")
        start = min(days) if start is None else start
        end = max(days) if end is None else end
    if nodes is None:
        nodes = [v for v in range(web.n_nodes)
                 if web.is_html(v) and not web.is_disallowed(web.url(v))]
    acc: dict[int | None, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0.0, 0.0])
    for v in nodes:
        rate = web.true_rate(v)
        fs = fetches.get(v, [])
        last = max((ver for _, ver in fs), default=0)
        changes = [web.changed(v, k) for k in range(1, last + 2)] if fs else []
        t = tally(fs, changes, start, end) if fs else PageTally(0.0, 0.0, 0.0)
        for key in (bucket_of(rate, per_decade), "all"):
            a = acc[key]
            a[0] += 1
            a[1] += t.held > 0
            a[2] += len(fs)
            a[3] += t.held
            a[4] += t.fresh
            a[5] += t.age
    width = end - start

    def row(lo: float, hi: float, a: list[float]) -> Bucket:
        pages, fetched, n, held, fresh, age = a
        return Bucket(lo, hi, int(pages), int(fetched), int(n),
                      fresh / held if held else math.nan, age / held if held else math.nan,
                      held / (pages * width) if pages and width > 0 else math.nan)

    buckets = []
    for key in sorted((k for k in acc if k != "all"), key=lambda k: -math.inf if k is None else k):
        lo, hi = (0.0, 0.0) if key is None else (10 ** (key / per_decade), 10 ** ((key + 1) / per_decade))
        buckets.append(row(lo, hi, acc[key]))
    total = row(0.0, math.inf, acc["all"]) if "all" in acc else row(0.0, math.inf, [0, 0, 0, 0.0, 0.0, 0.0])
    return Report(start, end, buckets, total)


def main(argv: list[str] | None = None) -> None:
    """``python -m crawlproj.simweb.freshness --spec JSON|@file --log FILE
    [--start DAY] [--end DAY] [--per-decade 1]``: print the table.  The spec
    must carry the change_epoch the server used."""
    p = argparse.ArgumentParser(prog="python -m crawlproj.simweb.freshness", description=main.__doc__)
    p.add_argument("--spec", required=True, help="spec as JSON text, or @file.json")
    p.add_argument("--log", required=True, help="the server's request log")
    p.add_argument("--start", type=float, help="window start, simulated days")
    p.add_argument("--end", type=float, help="window end, simulated days")
    p.add_argument("--per-decade", type=int, default=1, help="rate buckets per factor of 10")
    a = p.parse_args(argv)
    spec = a.spec
    if spec.startswith("@"):
        with open(spec[1:], encoding="utf-8") as f:
            spec = f.read()
    spec = json.loads(spec)
    if not spec.get("change_epoch"):
        p.error("the spec has no change_epoch: give the one the server printed")
    web = SimWeb.from_spec(spec)
    print(measure(read_log(a.log), web, a.start, a.end, a.per_decade).format())


if __name__ == "__main__":
    main()
