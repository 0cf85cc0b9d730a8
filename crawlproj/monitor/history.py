"""The crawl's history: what the dashboard draws as pictures over time.

The heartbeats keep it (lua/heartbeat.lua), in the crawl's Redis, so that it
is shared by every worker and outlives any of them and the web app: per ring
of MONITOR_HISTORY (seconds per sample, samples kept) one HASH, slot mod
samples kept -> one msgpack sample, which every heartbeat falling in the
slot rewrites. A ring is bounded by construction (a slot's field is reused
a ring later), and a heartbeat writes one field per ring, whatever the
crawl's size: the history costs the workers nothing per page
(docs/benchmarks.md, "The crawl's history").

A sample holds the crawl's counters as they were at its time (cumulative,
so that rates are differences and a lost heartbeat loses no count), the
frontier as the writing worker last saw it, and each worker's own pages and
bytes. ``cp:{crawl}:hist`` keeps the crawl's first and last heartbeat and the
time it has run (gaps with no worker left out), the average rates' base.
"""

from __future__ import annotations

import json

import msgpack

from crawlproj.errors import CrawlprojError
from crawlproj.redis.keyspace import Keyspace

# The crawl-wide counters a sample keeps (the heartbeat's totals), by the name
# it keeps them under: pages and bytes, and errors by kind (figures.py).
COUNTERS = {
    "fetched": "figures/attempts",
    "bytes": "figures/document_bytes",
    "dns": "figures/errors/dns",
    "tcp": "figures/errors/tcp",
    "timeout": "figures/errors/timeout",
    "4xx": "figures/errors/4xx",
    "5xx": "figures/errors/5xx",
    "robots": "figures/errors/robots",
}
# The frontier as a worker's last syncs saw it (crawlproj/frontier/sync.py).
GAUGES = ("queued", "ready", "waiting", "leased", "pending", "backed_off")


def rings(settings) -> list[tuple[int, int]]:
    """MONITOR_HISTORY, checked: [(slot_ms, samples kept), ...], finest first."""
    value = settings.get("MONITOR_HISTORY")
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            value = None
    problem = CrawlprojError(
        "MONITOR_HISTORY must be a list of [seconds per sample, samples kept] pairs of "
        f"whole numbers, 1 or more (e.g. [[10, 360], [60, 10080]]; [] for none), not {value!r}")
    if not isinstance(value, (list, tuple)):
        raise problem
    out = []
    for ring in value:
        if not (isinstance(ring, (list, tuple)) and len(ring) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in ring)):
            raise problem
        out.append((int(ring[0]) * 1000, int(ring[1])))
    return sorted(set(out))


def spec(slots: list[tuple[int, int]], gap_ms: int, gauges: dict[str, int]) -> bytes:
    """heartbeat.lua's history argument."""
    flat = [x for name, value in gauges.items() for x in (name, int(value))]
    return msgpack.packb([gap_ms, [list(r) for r in slots], list(COUNTERS.values()), flat],
                         use_bin_type=False)


def _sample(raw: bytes) -> dict | None:
    try:
        s = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception:  # a sample no heartbeat wrote: not drawn
        return None
    if not isinstance(s, dict) or not isinstance(s.get("t"), int) or not isinstance(s.get("s"), int):
        return None
    out = {"t": s["t"], "s": s["s"]}
    for name, counter in COUNTERS.items():
        out[name] = s.get(counter, 0)
    for name in GAUGES:
        out[name] = s.get(name)
    w = s.get("w")
    out["workers"] = {str(k): list(v)[:2] for k, v in w.items()} if isinstance(w, dict) else {}
    return out


def times(redis, keyspace: Keyspace) -> dict:
    """The crawl's first and last heartbeat (server ms) and the time it ran
    (ms), and its rings {slot_ms: kept}; zeros and {} for a crawl with none."""
    h = {k.decode(): v.decode() for k, v in redis.hgetall(keyspace.history).items()}
    return {"first_ms": int(h.get("first", 0)), "last_ms": int(h.get("last", 0)),
            "run_ms": int(h.get("run_ms", 0)),
            "rings": {int(k[5:]): int(v) for k, v in h.items() if k.startswith("ring:")}}


def read(redis, keyspace: Keyspace, now_ms: int, span_s: float | None = None,
         since_ms: int = 0, known: dict | None = None) -> dict:
    """The samples of the last span_s seconds (None: the whole crawl), newer
    than since_ms, from the finest ring that covers that span (else the
    longest): {"step_s", "first_ms", "last_ms", "run_s", "samples": [...]}
    sorted by time, each sample {"t", "s" (its slot), the COUNTERS' and
    GAUGES' names, "workers": {id: [pages, bytes]}}."""
    known = known if known is not None else times(redis, keyspace)
    out = {"step_s": None, "first_ms": known["first_ms"] or None,
           "last_ms": known["last_ms"] or None, "run_s": known["run_ms"] / 1000.0,
           "samples": []}
    if not known["rings"]:
        return out
    wanted_ms = int(now_ms - known["first_ms"] if span_s is None else span_s * 1000)
    slots = sorted(known["rings"].items())
    slot_ms, kept = next(((s, k) for s, k in slots if s * k >= wanted_ms), slots[-1])
    out["step_s"] = slot_ms / 1000
    now_slot = now_ms // slot_ms
    oldest = max(now_slot - kept + 1, (now_ms - wanted_ms) // slot_ms, since_ms // slot_ms)
    key = keyspace.history_ring(slot_ms)
    if now_slot - oldest + 1 < kept:
        fields = [s % kept for s in range(oldest, now_slot + 1)]
        raws = redis.hmget(key, fields) if fields else []
    else:
        raws = list(redis.hgetall(key).values())
    samples = [s for raw in raws if raw is not None
               for s in [_sample(raw)] if s is not None
               and oldest <= s["s"] <= now_slot and s["t"] > since_ms]
    samples.sort(key=lambda s: s["t"])
    out["samples"] = samples
    return out
