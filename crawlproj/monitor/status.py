"""The crawl's status as one document, read from Redis only (no writes):
what `scrapy crawlctl status`, the dashboard, /api/status and /metrics show.

Rates: "now" is the sum of the live workers' rates over their last heartbeat
interval; "average" is the crawl's totals over the time it has run (its
history's run time: stretches with no worker left out, and nothing after its
last worker closed). The history (history.py) is what the dashboard draws;
the ETA (eta.py) is read from its recent samples and the busiest hosts.
Mercator §4's figures (outcome, content types, sizes) come from the
figures/ counters (figures.py); pages per host from the frontier's
per-host lease counts (the trap guard's page budget, hostpages).
"""

from __future__ import annotations

import os

from crawlproj.frontier.frontier import Frontier
from crawlproj.monitor import control, eta, history, hosts
from crawlproj.monitor.figures import ERROR_KINDS
from crawlproj.monitor.heartbeat import GONE_AFTER
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.report import OUTCOMES, SIZE_BINS

# Hosts whose queue length is read for the deepest queue (of the heap's and
# the ready set's first ones): a crawl of millions of hosts is not walked.
QUEUE_SAMPLE = 1000
# Pages per host is drawn from at most this many hosts' counts.
HOSTS_SAMPLE = 100_000
LOG_TAIL = 20
# The hosts of the longest queues sampled whose pace bounds the ETA (eta.py).
ETA_HOSTS = 20
# Of those, the dashboard names this many.
HOLDING = 5


def _decode(h: dict) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in h.items()}


def _workers(redis, keyspace: Keyspace, now_ms: int) -> list[dict]:
    ids = [w.decode() for w in redis.zrange(keyspace.workers, 0, -1)]
    pipe = redis.pipeline(transaction=False)
    for w in ids:
        pipe.hgetall(keyspace.worker(w))
    out = []
    for w, record in zip(ids, pipe.execute()):
        r = _decode(record)
        if not r:
            continue
        seen = int(r.get("seen", 0))
        interval = float(r.get("interval", 5))
        ttl = float(r.get("lease_ttl", 30))
        age = max(0.0, (now_ms - seen) / 1000.0)
        state = r.get("state", "running")
        gone = state != "closed" and age > GONE_AFTER * interval
        leases = int(r.get("leases", 0))
        if gone:
            left = ttl - age
            fate = (f"{leases} lease(s) held at its last heartbeat go back to their queues "
                    f"within {left:.0f} s" if left > 0 else
                    f"{leases} lease(s) held at its last heartbeat have expired and gone "
                    "back to their queues")
        elif state == "closed":
            fate = "closed, every lease given back"
        else:
            fate = ""
        counters = {k[2:]: int(v) for k, v in r.items() if k.startswith("c:")}
        out.append({
            "id": w, "state": "gone" if gone else state, "host": r.get("host", ""),
            "pid": r.get("pid", ""), "last_heartbeat_ms": seen, "age_s": round(age, 1),
            "since_ms": int(r.get("since", seen)),
            "pages_s": 0.0 if gone else float(r.get("pages_s", 0)),
            "bytes_s": 0.0 if gone else float(r.get("bytes_s", 0)),
            "leases": leases, "fetching": int(r.get("fetching", 0)), "leases_fate": fate,
            "pages": counters.get("figures/attempts", 0),
            "finish_reason": r.get("finish_reason", ""), "log": r.get("log", ""),
            "counters": counters,
            "ranker_last_run": r.get("ranker_last_run", ""),
            "index_last_batch": r.get("index_last_batch", ""),
        })
    return out


def _frontier(redis, keyspace: Keyspace, now_ms: int) -> dict:
    frontier = Frontier(redis, keyspace)
    counts = frontier.counters()
    o = frontier.overview(now_ms, QUEUE_SAMPLE)
    heap, due, ready, leased = o.waiting, o.due, o.ready, o.leased
    pending, backed_off = o.pending, o.backed_off
    # a leased host keeps the rest of its queue: a one-site crawl's one
    # host is leased nearly all the time
    sample, leased_sample = o.sample, o.leased_sample
    deepest = 0
    with_queue = heap + ready
    lengths = []
    if sample or leased_sample:
        lengths = frontier.queue_sizes(sample + leased_sample)
        deepest = max(lengths)
        if leased_sample:
            # the leased hosts with a queue, of those read, in proportion
            queues = sum(1 for n in lengths[len(sample):] if n)
            with_queue += round(leased * queues / len(leased_sample))
    queued = counts.get("queued", 0)
    return {
        "queued": queued, "hosts_ready": ready + due, "hosts_waiting": heap - due,
        "hosts_leased": leased, "hosts_backed_off": backed_off, "pages_pending": pending,
        "deepest_queue": deepest, "deepest_of_hosts": len(sample) + len(leased_sample),
        "average_queue": round(queued / with_queue, 2) if with_queue else 0.0,
        "enqueued": counts.get("enqueued", 0), "duplicates": counts.get("duplicates", 0),
        "leased": counts.get("leased", 0), "expired_leases": counts.get("expired", 0),
        "live_leases": counts.get("live_leases", 0),
        "_sampled": sorted(((n, p, h) for n, (p, h) in
                            zip(lengths, sample + leased_sample) if n), reverse=True),
    }


def _pages_per_host(redis, keyspace: Keyspace) -> list[list[int]]:
    """Mercator Figure 9a: [y, x] = x hosts had at least y pages (leased)."""
    values = Frontier(redis, keyspace).pages_leased(HOSTS_SAMPLE)
    if values is None:
        return []
    out, y = [], 1
    while values and y <= max(values):
        out.append([y, sum(1 for v in values if v >= y)])
        y *= 10
    return out


def _figures(totals: dict[str, int]) -> dict:
    def under(prefix):
        return {k[len(prefix):]: v for k, v in totals.items() if k.startswith(prefix) and v}

    outcomes = under("figures/outcome/")
    sizes = under("figures/size/")
    return {
        "attempts": totals.get("figures/attempts", 0),
        "robots_fetches": totals.get("figures/robots_fetches", 0),
        "documents": totals.get("figures/documents", 0),
        "document_bytes": totals.get("figures/document_bytes", 0),
        "outcomes": {name: outcomes.get(name, 0) for name in OUTCOMES},
        "statuses": {k: v for k, v in sorted(under("figures/status/").items(),
                                              key=lambda kv: int(kv[0]))},
        "content_types": dict(sorted(under("figures/type/").items(), key=lambda kv: -kv[1])),
        "sizes": [[b, sizes.get(str(i), 0)] for i, b in enumerate(SIZE_BINS)],
        "robots_excluded": totals.get("robotstxt/forbidden", 0),
        "network_errors": outcomes.get("TCP error", 0),
        "dns_errors": outcomes.get("DNS error", 0),
    }


def _log_tail(workers: list[dict], n: int = LOG_TAIL) -> list[str]:
    """The last lines of the crawl logs of this machine's workers, merged by time."""
    lines = []
    for w in workers:
        path = w.get("log")
        if not path or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as f:
                f.seek(max(0, os.path.getsize(path) - 200 * n))
                lines += f.read().decode("utf-8", "replace").splitlines()[-n:]
        except OSError:
            continue
    lines = [line for line in lines if line[:4].isdigit()]
    return sorted(lines)[-n:]


def _run_s(times: dict, workers: list[dict], live: list[dict], record: dict,
           now_ms: int) -> float:
    """The time the crawl has run (seconds): the history's run time, gaps
    with no worker left out, and the time since its last heartbeat while
    workers are live. A crawl with no history: from its first worker's start
    to now, or to its last heartbeat once no worker is live."""
    if times["run_ms"]:
        extra = now_ms - times["last_ms"] if live else 0
        return max(0.001, (times["run_ms"] + max(0, extra)) / 1000.0)
    starts = [w["since_ms"] for w in workers]
    began = min(starts) if starts else int(float(record.get("created", now_ms / 1000)) * 1000)
    ended = now_ms if live or not workers else max(w["last_heartbeat_ms"] for w in workers)
    return max(0.001, (ended - began) / 1000.0)


def crawl_status(redis, keyspace: Keyspace, pages_per_host: bool = True,
                 history_span: float | None = None, history_since: int = 0,
                 with_history: bool = True) -> dict:
    """The crawl's status; pages_per_host=False leaves that figure empty
    (it reads every host's count: a caller refreshing often caches it).
    Its history (history.py) covers the last history_span seconds (None:
    the whole crawl) from history_since (server ms) on; with_history=False
    leaves it out (the ETA still reads the recent samples it needs)."""
    t = redis.time()
    now_ms = int(t[0]) * 1000 + int(t[1]) // 1000
    totals = {k: int(v) for k, v in _decode(redis.hgetall(keyspace.totals)).items()}
    workers = _workers(redis, keyspace, now_ms)
    live = [w for w in workers if w["state"] not in ("gone", "closed")]
    record = Keyspace.record(redis, keyspace.crawl_id) or {}
    ctl = control.state(redis, keyspace)
    # a stop holds until a worker starts after it (`scrapy crawl web` again)
    stopped = ctl["stopped_at"] and not any(w["since_ms"] > ctl["stopped_at"] for w in workers)
    if ctl["paused_at"]:
        state = "paused"
    elif stopped:
        state = "stopping" if live else "stopped"
    else:
        state = "running" if live else "idle"
    figures = _figures(totals)
    frontier = _frontier(redis, keyspace, now_ms)
    sampled = frontier.pop("_sampled")
    times = history.times(redis, keyspace)
    run_s = _run_s(times, workers, live, record, now_ms)
    pages_now = sum(w["pages_s"] for w in live)
    fetched = figures["attempts"]
    left = frontier["queued"] + frontier["live_leases"]
    past = history.read(redis, keyspace, now_ms, history_span, history_since, times) \
        if with_history else None
    recent = past if past is not None and history_since == 0 and history_span is None \
        else history.read(redis, keyspace, now_ms, eta.WINDOW_MAX_S, now_ms - int(
            eta.WINDOW_MAX_S * 1000), times)
    busiest = hosts.rows(redis, keyspace, [(p, h, n) for n, p, h in sampled[:ETA_HOSTS]])
    if state in ("running", "paused", "stopping") or left == 0:
        bound = eta.host_bound(busiest, now_ms) if left else None
        ends = eta.estimate(left, eta.drain(recent["samples"], run_s), bound, pages_now)
    else:
        ends = {"eta_s": None, "lower_bound": False, "basis": f"the crawl is {state}"}
    out = {
        "crawl_id": keyspace.crawl_id, "partitions": keyspace.partitions, "now_ms": now_ms,
        "state": state, "control": ctl,
        "rates": {"pages_s_now": round(pages_now, 3),
                  "mb_s_now": round(sum(w["bytes_s"] for w in live) / 1e6, 4),
                  "pages_s_avg": round(fetched / run_s, 3),
                  "mb_s_avg": round(figures["document_bytes"] / 1e6 / run_s, 4),
                  "run_s": round(run_s, 1)},
        "fetched": fetched, "queued": frontier["queued"],
        "discovered": fetched + left,
        "eta_s": ends["eta_s"], "eta": ends,
        "frontier": frontier,
        # the hosts whose queues take longest at their own pace (eta.py)
        "holding": eta.holding(busiest, now_ms, HOLDING),
        "workers": workers,
        "politeness": {"hosts_crawl_delay": totals.get("robotstxt/crawl_delay", 0),
                       "hosts_backed_off": frontier["hosts_backed_off"],
                       # what pages asked of the crawler and it obeyed (crawlproj/robots/meta.py)
                       "pages_noindex": totals.get("robotsmeta/pages/noindex", 0),
                       "pages_nofollow": totals.get("robotsmeta/pages/nofollow", 0),
                       "pages_noarchive": totals.get("robotsmeta/pages/noarchive", 0),
                       "links_nofollow": totals.get("robotsmeta/links/nofollow", 0)},
        "errors": {kind: totals.get(f"figures/errors/{kind}", 0) for kind in ERROR_KINDS},
        "figures": {**figures, "pages_per_host":
                    _pages_per_host(redis, keyspace) if pages_per_host else []},
        "ranker": {"runs": totals.get("ranker/runs", 0), "rescored": totals.get("ranker/rescored", 0),
                   "last_run": max((w["ranker_last_run"] for w in workers), default="") or None,
                   "holder": (redis.get(keyspace.ranker_lock) or b"").decode("utf-8", "replace")},
        "indexer": {"written": totals.get("index/written", 0),
                    "last_batch": max((w["index_last_batch"] for w in workers), default="") or None,
                    "holder": (redis.get(keyspace.indexer_lock) or b"").decode("utf-8", "replace")},
        # crawlproj/sitemaps/worker.py's counters
        "sitemaps": {"fetched": totals.get("sitemaps/fetched", 0),
                     "urls_found": totals.get("sitemaps/urls/found", 0),
                     "urls_admitted": totals.get("sitemaps/urls/admitted", 0),
                     "invalid": sum(v for k, v in totals.items() if k.startswith("sitemaps/invalid/"))},
        "totals": totals,
        "log_tail": _log_tail(workers),
    }
    if past is not None:
        out["history"] = past
    return out
