"""When a bounded crawl will end: an estimate a person can check.

Two things end a crawl of a finite web, and the estimate is the later:

* the work left drains: URLs queued or leased fall at the rate the crawl's
  history shows over its recent past (fetches minus new discoveries), so an
  estimate made while each page still brings more new links than it takes
  says so ("still growing") instead of dividing the queue by the fetch rate;
* the busiest hosts finish: a host is fetched one download at a time, one
  politeness delay apart (Mercator §3.1), so no number of workers ends the
  crawl before its longest host queue is drained at that host's own pace.
  Late in a crawl of a web whose hosts' sizes follow a Zipf law this is what
  holds the end back (docs/benchmarks.md, "When will it end"); once one host
  holds half the work left or more, its pace is the estimate.

The answer names its basis, so that the figure can be judged.
"""

from __future__ import annotations

# The window the drain rate is measured over: a quarter of the time the
# crawl has run, at most WINDOW_MAX_S seconds, and at least MIN_SAMPLES
# samples.
WINDOW_SHARE = 0.25
WINDOW_MAX_S = 600.0
MIN_SAMPLES = 3


def _left(sample: dict) -> int | None:
    parts = [sample.get(k) for k in ("queued", "leased", "pending")]
    return None if any(v is None for v in parts) else sum(parts)


def drain(samples: list[dict], run_s: float) -> dict | None:
    """The recent rates: {"window_s", "fetch_s" (pages/s), "drain_s" (work
    left falling per s, < 0 when it grows)}, or None with too little history."""
    usable = [s for s in samples if _left(s) is not None]
    if len(usable) < MIN_SAMPLES:
        return None
    window = min(WINDOW_MAX_S, WINDOW_SHARE * run_s) * 1000
    last = usable[-1]
    recent = [s for s in usable if s["t"] >= last["t"] - window]
    if len(recent) < MIN_SAMPLES:
        recent = usable[-MIN_SAMPLES:]
    first = recent[0]
    dt = (last["t"] - first["t"]) / 1000.0
    if dt <= 0:
        return None
    return {"window_s": round(dt, 1), "fetch_s": (last["fetched"] - first["fetched"]) / dt,
            "drain_s": (_left(first) - _left(last)) / dt}


def _paces(rows: list[dict], now_ms: int) -> list[dict]:
    """Each host's time to drain its queue at its own pace: its queue times
    its mean time between downloads so far (its last politeness delay when it
    has fetched fewer than two), plus what it still waits now; longest first."""
    out = []
    for r in rows:
        step = r.get("interval_s")
        if step is None and r.get("record"):
            step = r["record"]["delay_ms"] / 1000.0
        if not step or not r["queue"]:
            continue
        wait = max(0.0, ((r.get("until_ms") or now_ms) - now_ms) / 1000.0) \
            if r["state"] == "waiting" else 0.0
        out.append({"host": r["host"], "queue": r["queue"], "state": r["state"],
                    "until_ms": r.get("until_ms"), "step_s": round(step, 3),
                    "seconds": wait + r["queue"] * step})
    out.sort(key=lambda x: -x["seconds"])
    return out


def host_bound(rows: list[dict], now_ms: int) -> dict | None:
    """The host whose queue takes longest at its own pace, or None."""
    paces = _paces(rows, now_ms)
    return paces[0] if paces else None


def holding(rows: list[dict], now_ms: int, n: int) -> list[dict]:
    """The n hosts that hold the crawl's end back most, with their pace."""
    return [{**p, "seconds": round(p["seconds"], 1)} for p in _paces(rows, now_ms)[:n]]


def estimate(left: int, rates: dict | None, bound: dict | None, pages_now: float) -> dict:
    """{"eta_s" (None: no estimate), "lower_bound" (True: at least this),
    "basis" (a sentence)}."""
    if left <= 0:
        return {"eta_s": 0 if rates else None, "lower_bound": False,
                "basis": "nothing queued or leased"}
    parts, eta, lower = [], None, False
    if rates and rates["drain_s"] > 0:
        eta = left / rates["drain_s"]
        parts.append(f"{left:,} URLs left, falling by {rates['drain_s']:.1f}/s over the last "
                     f"{rates['window_s']:.0f} s")
    else:
        fetch = rates["fetch_s"] if rates else pages_now
        if fetch > 0:
            eta, lower = left / fetch, True
            parts.append(f"{left:,} URLs left and still growing "
                         f"({-rates['drain_s']:.1f}/s)" if rates else f"{left:,} URLs left")
            parts.append(f"at least {left:,} at {fetch:.1f} pages/s")
    if bound is not None:
        if bound["queue"] * 2 >= left:
            # most of the work left is one host's: the others finish beside it,
            # and its pace is the crawl's; the drain measured before holds the
            # discoveries of pages that are no longer fetched (overestimated
            # by 66 % on a 20-host web, docs/benchmarks.md)
            return {"eta_s": round(bound["seconds"]), "lower_bound": False,
                    "basis": f"host {bound['host']} holds the end: {bound['queue']:,} of the "
                             f"{left:,} URLs left, at one per {bound['step_s']:g} s"}
        if eta is None or bound["seconds"] > eta:
            eta = bound["seconds"]
            parts.append(f"host {bound['host']} holds the end: {bound['queue']:,} URLs at one "
                         f"per {bound['step_s']:g} s")
        else:
            parts.append(f"longest host: {bound['host']}, {bound['seconds']:.0f} s")
    if eta is None:
        return {"eta_s": None, "lower_bound": False,
                "basis": "nothing fetched lately: no rate to go by"}
    return {"eta_s": round(eta), "lower_bound": lower, "basis": "; ".join(parts)}
