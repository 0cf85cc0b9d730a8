"""The hosts that hold a crawl back, and why: Heritrix's hosts and frontier
reports, read from the crawl's Redis (no writes).

A host is in one of the frontier's states (crawlproj/frontier/lua/frontier.lua):
ready (its turn has come: it waits for a worker), waiting on the heap until
its next-contact time, leased (a download under way), or idle. Why a host
waits is read from what decided its next-contact time: the frontier's record
of the host (``hs``, written at each download's end by frontier.lua: its
politeness delay, which holds its robots.txt Crawl-delay when that decided
it, and its backoff after connection errors or 429/503), its failures in a
row (``fails``), its robots.txt as the crawl holds it (``r:<origin>``,
crawlproj/robots/cache.py: unreachable ones make a host wait ROBOTS_RETRY_WAIT),
and the trap guard's budgets. :func:`hosts` lists the hosts with work,
sorted and searched; :func:`host` tells one host's story, with its last
fetches from the crawl logs of the workers on this machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgpack

from crawlproj.errors import CrawlprojError
from crawlproj.frontier import codec
from crawlproj.frontier.frontier import Frontier
from crawlproj.redis.keyspace import Keyspace
from crawlproj.robots import MAX_EXPIRY, Rules, describe
from crawlproj.stores.common import crawllog_dir
from crawlproj.stores.crawllog import log_files, parse_line
from crawlproj.urls import host_of

# Hosts read per partition and state: a crawl of millions of hosts is not
# walked whole for one page (the heap's longest waits and the ready set's
# best come first).
HOSTS_READ = 50_000
# Rows a list answers at most.
MAX_ROWS = 1000
SORTS = ("queue", "wait", "errors", "fetched", "backoff", "host")
# Bytes read from the end of each crawl log for a host's last fetches.
LOG_TAIL_BYTES = 4 << 20
LAST_FETCHES = 20
LAST_ERRORS = 20
NEXT_URLS = 10
MAX_HOST_CHARS = 261  # a DNS name (253) and a port


class NoSuchHost(CrawlprojError):
    """A host the crawl never queued, fetched nor holds robots.txt rules of."""

    def __init__(self, host: str, crawl_id: str):
        super().__init__(f"no host {host!r} in crawl {crawl_id!r} (the hosts page lists "
                         "the hosts with work)")


class BadRequest(CrawlprojError, ValueError):
    """An argument no answer can be made of (a sort, a host name)."""


class BadHostName(BadRequest):
    """Text that cannot name a host."""


def host_name(text: str) -> str:
    """The frontier's key of the host text names: a host[:port] or a URL."""
    if not isinstance(text, str) or not text.strip():
        raise BadHostName("give a host name (e.g. example.com or example.com:8080)")
    text = text.strip()
    if len(text) > MAX_HOST_CHARS + 16 or any(c.isspace() for c in text):
        raise BadHostName(f"not a host name: {text[:80]!r}")
    # a bare name keyed as the frontier keys a URL's: IDNA, default port and
    # trailing dot dropped
    key = "" if "://" not in text and "/" in text else \
        host_of(text if "://" in text else f"http://{text}/")
    if not key:
        raise BadHostName(f"not a host name: {text[:80]!r}")
    return key


def _record(raw) -> dict | None:
    """sync.lua's host record."""
    if raw is None:
        return None
    try:
        r = msgpack.unpackb(raw, raw=False)
        ok, fail, busy, first, last, fate, delay, block, wait, backoffs, b_at, b_ms, b_fate = r[:13]
    except Exception:
        return None
    return {"ok": ok, "fail": fail, "busy": busy, "fetched": ok + fail + busy,
            "errors": fail + busy, "first_ms": first, "last_ms": last, "last_fate": fate,
            "delay_ms": delay, "block_ms": block, "retry_after_ms": wait,
            "backoffs": backoffs, "last_backoff": {"at_ms": b_at, "ms": b_ms, "fate": b_fate}
            if backoffs else None}


def interval_s(record: dict | None) -> float | None:
    """A host's mean time between download ends so far (seconds), or None."""
    if not record or record["fetched"] < 2:
        return None
    return (record["last_ms"] - record["first_ms"]) / 1000.0 / (record["fetched"] - 1)


def _candidates(frontier: Frontier) -> dict[str, dict]:
    """host -> {partition, state, until_ms, fails, raw} for the hosts with
    work, failures or a record (HOSTS_READ of each per partition at most)."""
    return {h: {"partition": q.partition, "state": q.state, "until_ms": q.until_ms,
                "fails": q.fails, "raw": q.record}
            for h, q in frontier.list_queues(HOSTS_READ).items()}


def _queues(frontier: Frontier, rows: list[dict]) -> None:
    """Each row's queue length: the hosts with work, a script call per
    partition and QUEUES_PER_CALL hosts (an idle host has none)."""
    by_partition: dict[int, list[dict]] = {}
    for row in rows:
        row["queue"] = 0
        if row["state"] != "idle":
            by_partition.setdefault(row["partition"], []).append(row)
    for p, some in by_partition.items():
        for row, n in zip(some, frontier.queue_lengths(p, [row["host"] for row in some])):
            row["queue"] = n


def _robots(redis, keyspace: Keyspace, hosts: list[str], useragent: str) -> dict[str, dict]:
    """Each host's robots.txt as the crawl holds it, of its http and https origins."""
    pipe = redis.pipeline(transaction=False)
    for host in hosts:
        p = keyspace.partition_of(host)
        for scheme in ("http", "https"):
            key = keyspace.robots(p, f"{scheme}://{host}")
            pipe.get(key)
            pipe.pttl(key)
    replies = pipe.execute()
    out = {}
    for i, host in enumerate(hosts):
        origins = []
        for j, scheme in enumerate(("http", "https")):
            stored, ttl = replies[4 * i + 2 * j:4 * i + 2 * j + 2]
            if stored is None:
                continue
            kind, text = describe(stored)
            delay = None
            if kind == "rules":
                try:
                    delay = Rules.load(stored, useragent)[0].crawl_delay
                except Exception:  # rules the crawl could not read are shown as text
                    delay = None
            origins.append({"origin": f"{scheme}://{host}", "status": kind,
                            "failures": int(text) if kind in ("failed", "unresolved")
                            and text.isdigit() else 0,
                            "rules": text if kind == "rules" else "", "crawl_delay": delay,
                            "expires_in_s": round(ttl / 1000.0) if ttl and ttl > 0 else None})
        out[host] = {"origins": origins,
                     "crawl_delay": max((o["crawl_delay"] or 0 for o in origins), default=0) or None,
                     "status": _robots_status(origins)}
    return out


def _robots_status(origins: list[dict]) -> str:
    if not origins:
        return "not fetched"
    o = origins[0]
    return {"rules": "rules", "allow": "allows all (none, or 4xx)",
            "disallow": "disallows all (unreachable)",
            "failed": f"unreachable {o['failures']} time(s), asked again",
            "unresolved": f"its name did not resolve {o['failures']} time(s), asked again",
            "no host": "its name does not resolve"}[o["status"]]


def why(row: dict, now_ms: int, settings) -> str:
    """Why the host waits, in a sentence, from its state and records."""
    state, until, rec = row["state"], row.get("until_ms"), row.get("record")
    robots = row.get("robots") or {}
    fails = row.get("fails", 0)
    queue = row.get("queue", 0)
    budget = _budget_reached(row, settings)
    blocked = row.get("blocked_until_ms")
    if blocked and blocked > now_ms:
        return (("a download is under way; then " if state == "leased" else "")
                + f"blocked by the operator for {_in(blocked, now_ms)} "
                f"(`scrapy crawlctl unblock {row['host']}` lifts it)")
    if state == "leased":
        return "a download is under way (leased until " + _in(until, now_ms) + ")"
    if state == "ready":
        return ("its turn has come: it waits for a free worker"
                + (f"; {budget}" if budget else ""))
    if state == "idle":
        if fails:
            return f"no URL queued; {fails} failure(s) in a row (errors, 429/503)"
        return "no URL queued" + (f"; {budget}" if budget else "")
    left = _in(until, now_ms)
    if any(o["status"] == "failed" for o in robots.get("origins", [])):
        return f"robots.txt unreachable: asked again in {left} (ROBOTS_RETRY_WAIT)"
    if any(o["status"] == "unresolved" for o in robots.get("origins", [])):
        return f"its name did not resolve (DNS): asked again in {left}"
    if rec and rec["block_ms"] and rec["block_ms"] >= rec["delay_ms"] and fails:
        what = ("429/503 answers" if rec["last_fate"] == "busy" else "connection errors")
        how = (f"Retry-After {rec['retry_after_ms'] / 1000:g} s"
               if rec["last_fate"] == "busy" and rec["retry_after_ms"] >= 0
               else f"backoff {rec['block_ms'] / 1000:g} s")
        return f"backed off after {fails} {what} in a row ({how}): next contact in {left}"
    delay = robots.get("crawl_delay")
    if rec and delay and rec["delay_ms"] == int(delay * 1000):
        return f"Crawl-delay {delay:g} s (its robots.txt): next contact in {left}"
    least = row.get("least_delay_ms")
    if rec and least and rec["delay_ms"] == least:
        return (f"the operator's least delay, {least / 1000:g} s after its last download "
                f"(`scrapy crawlctl delay {row['host']} 0` lifts it): next contact in {left}")
    if rec:
        return (f"politeness: {rec['delay_ms'] / 1000:g} s after its last download "
                f"(FRONTIER_DELAY_FACTOR x download time, at least FRONTIER_MIN_DELAY): "
                f"next contact in {left}")
    if queue == 0:
        return f"a recrawl is due in {left}"
    return f"next contact in {left}"


def _in(until_ms, now_ms) -> str:
    if until_ms is None:
        return "-"
    s = (until_ms - now_ms) / 1000.0
    if s <= 0:
        return "0 s (due)"
    return f"{s:.1f} s" if s < 60 else f"{s / 60:.1f} min" if s < 3600 else f"{s / 3600:.1f} h"


def _budget_reached(row: dict, settings) -> str:
    max_queued = settings.getint("TRAPGUARD_HOST_MAX_QUEUED")
    max_pages = settings.getint("TRAPGUARD_HOST_MAX_PAGES")
    if max_queued and row.get("queue", 0) >= max_queued:
        return f"new URLs refused: {max_queued} queued (TRAPGUARD_HOST_MAX_QUEUED)"
    pages = row.get("pages_leased")
    if max_pages and pages is not None and pages + row.get("queue", 0) >= max_pages:
        return f"new URLs refused: {max_pages} pages (TRAPGUARD_HOST_MAX_PAGES)"
    return ""


def _sort_key(sort: str, now_ms: int):
    if sort == "host":
        return lambda r: r["host"]
    if sort == "wait":
        return lambda r: -((r["until_ms"] or now_ms) - now_ms if r["state"] == "waiting" else 0)
    if sort == "errors":
        return lambda r: -(r["record"]["errors"] if r["record"] else 0)
    if sort == "fetched":
        return lambda r: -(r["record"]["fetched"] if r["record"] else 0)
    if sort == "backoff":
        return lambda r: -r.get("fails", 0)
    return lambda r: -r["queue"]


def hosts(redis, keyspace: Keyspace, settings, sort: str = "queue", search: str = "",
          n: int = 100, offset: int = 0) -> dict:
    """The hosts with work or failures, sorted by sort (SORTS; the longest
    first, the name alphabetically), those whose name holds search, rows
    offset..offset+n with why each waits: {"total", "matched", "rows"}."""
    if sort not in SORTS:
        raise BadRequest(f"sort by one of {', '.join(SORTS)}, not {sort!r}")
    frontier = Frontier(redis, keyspace)
    now_ms = frontier.now_ms()
    found = _candidates(frontier)
    rows = []
    for h, row in found.items():
        row.update(host=h, record=_record(row.pop("raw", None)))
        rows.append(row)
    _queues(frontier, rows)
    search = (search or "").strip().lower()
    matched = [r for r in rows if search in r["host"]] if search else rows
    matched.sort(key=lambda r: r["host"])  # ties in name order
    matched.sort(key=_sort_key(sort, now_ms))
    page = matched[offset:offset + max(0, min(n, MAX_ROWS))]
    useragent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
    robots = _robots(redis, keyspace, [r["host"] for r in page], useragent) if page else {}
    for r in page:
        r["robots"] = robots[r["host"]]
        r["why"] = why(r, now_ms, settings)
        r["interval_s"] = interval_s(r["record"])
    return {"crawl_id": keyspace.crawl_id, "now_ms": now_ms, "total": len(rows),
            "matched": len(matched), "sort": sort, "search": search, "offset": offset,
            "rows": page}


def host(redis, keyspace: Keyspace, name: str, settings, log_dirs: list[Path] = ()) -> dict:
    """One host's story: its state and why it waits (and until when), its
    queue and next URLs, how its downloads ended, its backoffs, its robots.txt
    as the crawl holds it, its budgets, and its last fetches from the crawl
    logs under log_dirs. NoSuchHost when the crawl knows nothing of it."""
    h = host_name(name)
    frontier = Frontier(redis, keyspace)
    now_ms = frontier.now_ms()
    view = frontier.host(h)
    sitemaps = redis.hget(keyspace.sitemap_files(view.partition), h)
    useragent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
    robots = _robots(redis, keyspace, [h], useragent)[h]
    record = _record(view.record)
    if not view.known() and sitemaps is None and not robots["origins"]:
        raise NoSuchHost(h, keyspace.crawl_id)
    if view.lease_deadline_ms is not None:
        state, until = "leased", view.lease_deadline_ms
    elif view.ready or view.recrawl_ready:
        state, until = "ready", None
    elif view.next_contact_ms is not None:
        state, until = "waiting", view.next_contact_ms
    else:
        state, until = "idle", view.idle_until_ms
    row = {"host": h, "partition": view.partition, "state": state, "until_ms": until,
           "fails": view.fails or 0, "queue": view.queued, "record": record, "robots": robots,
           "pages_leased": view.pages_leased, "blocked_until_ms": view.blocked_until_ms,
           "least_delay_ms": view.least_delay_ms}
    next_urls = []
    for payload in frontier.queued_urls(h, NEXT_URLS) if view.queued else ():
        try:
            next_urls.append(codec.decode(payload, None, h).url)
        except Exception:  # a payload no worker could read either: said, not shown
            next_urls.append("(unreadable queued request)")
    return {
        "crawl_id": keyspace.crawl_id, "now_ms": now_ms, **row,
        "why": why(row, now_ms, settings), "interval_s": interval_s(record),
        "scheduled": view.scheduled, "next_urls": next_urls,
        "budgets": {
            "queued": view.queued, "max_queued": settings.getint("TRAPGUARD_HOST_MAX_QUEUED"),
            "pages_leased": row["pages_leased"],
            "max_pages": settings.getint("TRAPGUARD_HOST_MAX_PAGES"),
            "reached": _budget_reached(row, settings),
            "trapped": view.trapped,
            "sitemap_files": int(sitemaps) if sitemaps is not None else 0,
            "max_sitemap_files": settings.getint("SITEMAP_MAX_FILES"),
        },
        "robots_expiry_s": min(settings.getfloat("ROBOTS_EXPIRY"), MAX_EXPIRY),
        **_fetches(h, keyspace.crawl_id, log_dirs),
    }


def _fetches(h: str, crawl_id: str, log_dirs) -> dict:
    every = last_fetches(h, crawl_id, log_dirs, n=None)
    return {"last_fetches": every[-LAST_FETCHES:], "last_errors": last_errors(every)}


def log_dirs(redis, keyspace: Keyspace, settings) -> list[Path]:
    """Where this machine's crawl logs of the crawl may be: CRAWLLOG_DIR, and
    the directories of the logs the workers listed now name."""
    dirs = {crawllog_dir(settings)}
    for w in redis.zrange(keyspace.workers, 0, -1):
        log = redis.hget(keyspace.worker(w.decode()), "log")
        if log:
            dirs.add(Path(log.decode()).parent)
    return sorted(dirs)


def last_fetches(h: str, crawl_id: str, log_dirs, n: int | None = LAST_FETCHES) -> list[dict]:
    """The last n lines (None: all read) of host h in the crawl logs under
    log_dirs (this machine's workers), newest last, each as the crawl log has it."""
    found = []
    seen = set()
    for d in log_dirs:
        for path in log_files(Path(d), crawl_id):
            if path in seen:
                continue
            seen.add(path)
            try:
                with open(path, "rb") as f:
                    size = os.path.getsize(path)
                    f.seek(max(0, size - LOG_TAIL_BYTES))
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            for raw in text.splitlines():
                if h not in raw:
                    continue
                line = parse_line(raw, path.name)
                if line is None or host_of(line.url) != h:
                    continue
                found.append({"time": raw.split(" ", 1)[0], "status": line.status,
                              "size": line.size, "url": line.url, "hops": line.hops,
                              "mime": line.mime, "notes": (raw.split()[11:12] or ["-"])[0],
                              "log": path.name})
    found.sort(key=lambda x: x["time"])
    return found if n is None else found[-n:]


def last_errors(fetches: list[dict], n: int = LAST_ERRORS) -> list[dict]:
    """Of a host's log lines, the last n that were no answer or a 4xx/5xx."""
    return [f for f in fetches if f["status"] < 0 or f["status"] >= 400][-n:]


def rows(redis, keyspace: Keyspace, picks: list[tuple[int, str, int]]) -> list[dict]:
    """The rows of the hosts picked, (partition, host, queue length) each:
    their state, next-contact time and record, for the ETA (eta.py)."""
    if not picks:
        return []
    times = Frontier(redis, keyspace).host_times([(p, h) for p, h, _ in picks])
    out = []
    for (p, h, queue), (heap, lease, rec) in zip(picks, times):
        state = "leased" if lease is not None else "waiting" if heap is not None else "ready"
        record = _record(rec)
        out.append({"host": h, "partition": p, "queue": queue, "state": state,
                    "until_ms": heap if lease is None else None,
                    "record": record, "interval_s": interval_s(record)})
    return out
