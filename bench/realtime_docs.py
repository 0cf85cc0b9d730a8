"""The real-time search mode on real documentation: fetches to reach a
query's page, the similarity order beside breadth-first (issue 40, item 5).

    .venv/bin/python bench/realtime_docs.py [--manuals python,apache]
        [--budget 50] [--bfs-budget 600] [--queries 'sqlite;json']
        [--set NAME=VALUE ...] [--code DIR] [--keep DIR]

The sites: Debian's Python 3.11 manual (/usr/share/doc/python3.11/html,
package python3.11-doc) as http://docs.python.test/ and Debian's Apache 2.4
manual (/usr/share/doc/apache2-doc/manual, package apache2-doc) as
http://httpd.apache.test/, served by Debian's nginx through tests/nginxweb.py
(the crawl's HTTP proxy, so URLs keep those names and nothing is resolved).
Debian ships the Apache manual split by language (en/index.html, no
index.html.en variants), so plain files serve it; the seed is its English
home page.

Each manual has a fixed set of queries, chosen before any tuning, each with
the one page a user asking it wants, two links from the seed (the bench
checks the distance on the files before it crawls). Per manual:

- bfs: one crawl from the seed, FRONTIER_PRIORITIZER=bfs, stopped after
  --bfs-budget pages (breadth-first does not depend on the query, so one
  crawl serves every query);
- similarity: per query, a real-time search session, `scrapy crawl web -a
  query=Q -a seeds=SEED -a max_pages=--budget` (the similarity prioritizer,
  crawlproj/prioritizers/similarity.py), its stopping rule as by default.

Every crawl: a fresh nginx with its own access log, a fresh data directory,
one worker with CONCURRENT_REQUESTS=1, FRONTIER_PREFETCH=1 and no
politeness wait, so each fetch is the frontier's best URL at that moment
(as bench/similarity_bench.py crawls), scope the seed's host. "fetches" is
the target's position in nginx's access log (robots.txt left out, the seed
is fetch 1); "> N" when the crawl ended after N fetches without it. "rank"
is the target's place in the results the session printed at its end (its
first result page). --set gives the sessions a setting (an A/B of a knob);
--code DIR crawls with the crawlproj of another checkout (`git archive REV
| tar -x -C DIR`), the same bench and servers, to compare two versions.

Prints the table (markdown); with --keep DIR the crawls' files stay there,
and DIR/realtime_docs.json has the table and every crawl's order. Exit
status 0 when every crawl ran, 1 if one failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from live_orders import _stop, git_state, loadavg  # noqa: E402

from crawlproj.extract import extract_page  # noqa: E402
from crawlproj.redis.embedded import free_port, spawn_server  # noqa: E402
from crawlproj.simweb import checks  # noqa: E402
from tests.nginxweb import NginxWeb, Site, nginx_binary  # noqa: E402


@dataclass
class Manual:
    host: str
    root: Path
    seed: str                      # path of the seed page
    queries: list[tuple[str, str]]  # (query, path of the page it wants)
    directives: str = ""
    package: str = ""

    @property
    def seed_url(self) -> str:
        return f"http://{self.host}{self.seed}"


# The query sets, fixed before any tuning: a user's words and the page they
# want. Single words (a module's or a tool's name) and several words (what
# the page's title or its subject says).
MANUALS = {
    "python": Manual("docs.python.test", Path("/usr/share/doc/python3.11/html"), "/", [
        ("sqlite", "/library/sqlite3.html"),
        ("sqlite database cursor", "/library/sqlite3.html"),
        ("json", "/library/json.html"),
        ("socket", "/library/socket.html"),
        ("zipfile", "/library/zipfile.html"),
        ("argparse", "/library/argparse.html"),
        ("csv", "/library/csv.html"),
        ("decimal", "/library/decimal.html"),
        ("hashlib", "/library/hashlib.html"),
        ("logging cookbook", "/howto/logging-cookbook.html"),
        ("virtual environments packages", "/tutorial/venv.html"),
        ("descriptor guide", "/howto/descriptor.html"),
        ("data model", "/reference/datamodel.html"),
    ], package="python3.11-doc"),
    "apache": Manual("httpd.apache.test", Path("/usr/share/doc/apache2-doc/manual"), "/en/index.html", [
        ("rewrite flags", "/en/rewrite/flags.html"),
        ("virtual host examples", "/en/vhosts/examples.html"),
        ("name based virtual hosts", "/en/vhosts/name-based.html"),
        ("ssl howto", "/en/ssl/ssl_howto.html"),
        ("htpasswd", "/en/programs/htpasswd.html"),
        ("apachectl", "/en/programs/apachectl.html"),
        ("proxy", "/en/mod/mod_proxy.html"),
        ("deflate", "/en/mod/mod_deflate.html"),
        ("expires headers", "/en/mod/mod_expires.html"),
        ("benchmarking tool", "/en/programs/ab.html"),
        ("event mpm", "/en/mod/event.html"),
        ("ip based virtual hosts", "/en/vhosts/ip-based.html"),
    ], package="apache2-doc"),
}

# one request at a time, no politeness wait: the order is the frontier's
CRAWL_SETTINGS = {"CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1, "FRONTIER_DELAY_FACTOR": 0,
                  "CRAWL_SCOPE": "host", "LOG_LEVEL": "INFO", "CRAWL_CONTACT": "mailto:bench@localhost"}


def local_file(m: Manual, path: str) -> Path:
    f = m.root / path.lstrip("/")
    return f / "index.html" if path.endswith("/") or f.is_dir() else f


def distances(m: Manual, wanted: set[str], depth: int = 2) -> dict[str, int]:
    """Links from the seed to each wanted path, read from the files (up to
    ``depth``; a path further away is left out)."""
    seen, frontier, out = {m.seed: 0}, [m.seed], {}
    prefix = f"http://{m.host}"
    for d in range(depth + 1):
        nxt = []
        for path in frontier:
            if path in wanted:
                out.setdefault(path, d)
            if d == depth:
                continue
            f = local_file(m, path)
            if not f.is_file() or f.suffix not in (".html", ""):
                continue
            for url, _anchor in extract_page(f.read_bytes(), prefix + path).links:
                if url.startswith(prefix + "/"):
                    p = url[len(prefix):]
                    if p not in seen:
                        seen[p] = d + 1
                        nxt.append(p)
        frontier = nxt
    return out


@dataclass
class Run:
    order: list[str] = field(default_factory=list)  # paths, in arrival order
    rc: int | None = None
    seconds: float = 0.0
    results: list[str] = field(default_factory=list)  # printed result paths
    finish: str = "-"
    duplicates: int = 0      # links to URLs already seen that reached the frontier
    script_us: float = 0.0   # Redis CPU in the frontier's Lua scripts (EVALSHA), us


def crawl(m: Manual, code: Path, work: Path, redis_url: str, crawl_id: str, spargs: dict,
          settings: dict, timeout: float) -> Run:
    work.mkdir(parents=True)
    run = Run()
    server = redis.Redis.from_url(redis_url)
    server.config_resetstat()
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={m.seed_url}"]
    for k, v in spargs.items():
        cmd += ["-a", f"{k}={v}"]
    for k, v in {**CRAWL_SETTINGS, **settings}.items():
        cmd += ["-s", f"{k}={v}"]
    with NginxWeb([Site(m.host, m.root, m.directives)], work / "nginx") as web:
        env = web.env()
        env.update(REDIS_URL=redis_url, CRAWL_ID=crawl_id, CRAWL_DATA_DIR=str(work / "data"),
                   PYTHONUNBUFFERED="1", PYTHONPATH=str(code))
        t0 = time.monotonic()
        with open(work / "worker.log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=log,
                                    start_new_session=True)
            try:
                out, _ = proc.communicate(timeout=timeout)
                run.rc = proc.returncode
            except subprocess.TimeoutExpired:
                _stop(proc)
                out = b""
        run.seconds = time.monotonic() - t0
        web.stop()  # the access log is flushed
        records = web.settle_log()
    prefix = f"http://{m.host}"
    run.order = [u[len(prefix):] for u in checks.arrival_order(records) if u.startswith(prefix)]
    text = out.decode(errors="replace")
    (work / "stdout.txt").write_text(text)
    lines = text.splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.startswith("results for ")), None)
    if at is not None:
        run.results = [ln.split()[2][len(prefix):] for ln in lines[at + 1:]
                       if len(ln.split()) >= 3 and ln.split()[2].startswith(prefix)]
    logged = (work / "worker.log").read_text(errors="replace")
    found = [ln.split("'finish_reason': '")[1].split("'")[0] for ln in logged.splitlines()
             if "'finish_reason': '" in ln]
    run.finish = found[-1] if found else "-"
    dups = re.findall(r"Frontier closed .*? duplicates=(\d+)", logged)
    run.duplicates = int(dups[-1]) if dups else 0
    run.script_us = sum(v["usec"] for k, v in server.info("commandstats").items()
                        if k in ("cmdstat_evalsha", "cmdstat_eval"))
    server.close()
    return run


def position(order: list[str], path: str) -> int | None:
    return order.index(path) + 1 if path in order else None


def refusal(a) -> str | None:
    """Why the bench cannot run with these arguments, or None."""
    unknown = [n for n in a.manuals if n not in MANUALS]
    if unknown:
        return f"unknown manual(s) {', '.join(unknown)}; use {', '.join(MANUALS)}"
    if nginx_binary() is None:
        return "nginx is not installed (Debian: nginx-light)"
    if any("=" not in kv for kv in a.set):
        return "--set takes NAME=VALUE"
    if not (Path(a.code) / "crawlproj").is_dir():
        return f"--code {a.code} holds no crawlproj package"
    for n in a.manuals:
        m = MANUALS[n]
        if not local_file(m, m.seed).is_file():
            return f"{m.root} is missing (Debian: {m.package})"
        far = [t for t, d in distances(m, {t for _, t in m.queries}).items() if d != 2]
        far += [t for _, t in m.queries if t not in distances(m, {t})]
        if far:
            return f"not two links from {m.seed_url}: {', '.join(sorted(set(far)))}"
    return None


def measure(m: Manual, name: str, a, work: Path, redis_url: str, extra: dict) -> tuple[dict, bool]:
    """One bfs crawl and a session per query: the manual's rows."""
    code = Path(a.code)
    queries = [(q, t) for q, t in m.queries if a.queries is None or q in a.queries]
    bfs = crawl(m, code, work / name / "bfs", redis_url, f"{name}-bfs", {},
                {"FRONTIER_PRIORITIZER": "bfs", "CLOSESPIDER_PAGECOUNT": a.bfs_budget}, a.timeout)
    failed = bfs.rc != 0
    print(f"{name}: bfs {len(bfs.order)} fetches in {bfs.seconds:.0f} s ({bfs.finish})", flush=True)
    rows = []
    for i, (q, target) in enumerate(queries):
        r = crawl(m, code, work / name / f"q{i}", redis_url, f"{name}-q{i}",
                  {"query": q, "max_pages": a.budget}, extra, a.timeout)
        failed |= r.rc != 0
        row = {"query": q, "target": target, "bfs": position(bfs.order, target),
               "similarity": position(r.order, target),
               "rank": (r.results.index(target) + 1) if target in r.results else None,
               "fetched": len(r.order), "finish": r.finish, "seconds": round(r.seconds, 1),
               "duplicates": r.duplicates, "script_us": r.script_us, "order": r.order}
        rows.append(row)
        print(f"  {q!r}: similarity {row['similarity'] or '-'}, bfs {row['bfs'] or '-'}, rank "
              f"{row['rank'] or '-'} ({row['fetched']} fetches, {r.finish}, {r.seconds:.0f} s)",
              flush=True)
    return {"seed": m.seed_url, "bfs_fetched": len(bfs.order), "bfs_order": bfs.order,
            "rows": rows}, failed


def print_table(name: str, t: dict) -> None:
    print(f"{name} ({t['seed']}):\n")
    print("| query | page | similarity: fetches | bfs: fetches | rank in the session's results |")
    print("|---|---|---|---|---|")
    for row in t["rows"]:
        sim = row["similarity"] or f"> {row['fetched']}"
        bfs = row["bfs"] or f"> {t['bfs_fetched']}"
        print(f"| `{row['query']}` | {row['target'].lstrip('/')} | {sim} | {bfs} | "
              f"{row['rank'] or '-'} |")
    rows = t["rows"]
    reached = [row["similarity"] for row in rows if row["similarity"]]
    # the median over every query, one not reached counting as the longest
    steps = sorted(row["similarity"] or math.inf for row in rows)
    median = statistics.median_low(steps) if steps else math.inf
    fetched = sum(row["fetched"] for row in rows) or 1
    print(f"\nreached by the session: {len(reached)} of {len(rows)}; median "
          + (f"{median:g}" if median < math.inf else f"> {a_budget(rows)}") + " fetches; "
          f"sessions: {sum(row['duplicates'] for row in rows) / fetched:.1f} duplicate links a "
          f"fetched page to the frontier, {sum(row['script_us'] for row in rows) / fetched:.0f} us "
          "of Redis CPU a fetched page in its scripts\n")


def a_budget(rows: list[dict]) -> int:
    return min(row["fetched"] for row in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manuals", default="python,apache", type=lambda v: [n for n in v.split(",") if n])
    ap.add_argument("--budget", type=int, default=50, help="max_pages of each real-time session")
    ap.add_argument("--bfs-budget", type=int, default=600, help="pages of the bfs crawl")
    ap.add_argument("--queries", default=None, help="only these queries, ';'-separated",
                    type=lambda v: {q.strip() for q in v.split(";") if q.strip()})
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the sessions (an A/B of a knob), repeatable")
    ap.add_argument("--code", default=str(ROOT),
                    help="crawl with the crawlproj of this checkout (e.g. `git archive REV` "
                         "unpacked), to compare two versions; default this one")
    ap.add_argument("--keep", default=None, help="keep the crawls' files (and the table) here")
    a = ap.parse_args(argv)
    why = refusal(a)
    if why:
        print(f"realtime_docs: {why}", file=sys.stderr)
        return 2
    extra = dict(kv.split("=", 1) for kv in a.set)
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="realtime_docs-"))
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    redis_proc = spawn_server(port, work / "redis", appendonly=False)
    code = Path(a.code).resolve()
    where = git_state() if code == ROOT else f"the crawlproj of {code}"
    print(f"code {where}; load average {loadavg()} at the start", flush=True)
    table, failed = {}, False
    try:
        for n in a.manuals:
            table[n], bad = measure(MANUALS[n], n, a, work, f"redis://127.0.0.1:{port}/0", extra)
            failed |= bad
    finally:
        _stop(redis_proc, term=True)
    print(f"\nload average {loadavg()} at the end; budgets: session max_pages {a.budget}, "
          f"bfs {a.bfs_budget} pages; sessions' settings {extra or 'as by default'}\n")
    for n, t in table.items():
        print_table(n, t)
    if a.keep:
        (work / "realtime_docs.json").write_text(json.dumps(table, indent=1))
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
