"""Whole crawls, side by side: this frontier vs stock Scrapy vs scrapy-redis.

    .venv/bin/python bench/crawl_bench.py [--hosts 500 --pages 20000 --page-bytes 10000]
        [--concurrency 32] [--repeat 1] [--configs stock,cp1,redis,cp2] [--profile] [--profile-rate 50] [--cprofile]
        [--out DIR] [--src HEAD|worktree] [--set NAME=VALUE]

One simulated web (its own process, latency 0, no Crawl-delay, responses cached
and pre-warmed so that every run is served alike) and one fresh Redis-protocol
server (crawlproj.redis.embedded.spawn_server, the embedded server's configuration,
AOF on as the embedded default) serve every run. Each run is a real
`scrapy crawl web` of the same web from the same seeds, with the same settings
but for the scheduler:

    stock  SCHEDULER=scrapy.core.scheduler.Scheduler,
           DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter (in-memory),
           CONCURRENT_ITEMS=100 (Scrapy's default; the project sets 8)
    cp1    this project's frontier, one worker (FRONTIER_DELAY_FACTOR=0, MIN_DELAY=0)
    redis  scrapy_redis.scheduler.Scheduler + scrapy_redis.dupefilter.RFPDupeFilter
           (default PriorityQueue, pickle), REDIS_URL = the same server
    cp2    this project's frontier, two workers (same settings as cp1)
    full1  this project's default stack, one worker: the frontier of cp1 with
           every store, the content-seen test and the index hand-over on
           (the project's own ITEM_PIPELINES and DOWNLOADER_MIDDLEWARES), as
           a user runs it
    full2  the same, two workers

The configurations run interleaved (stock cp1 redis cp2 stock cp1 ...), each
--repeat times; the machine is shared, so the ratios within one round are the
figures that count. Items are built by the spider and dropped in every
configuration: the stores (pipelines, the record and content-seen
middlewares) and the ranker are switched off (STORES_OFF below), so that the
runs compare schedulers, except in full1/full2, which measure what the stores
cost against stock Scrapy without them (bench/stores_bench.py measures the
stores one by one).

Measured per run:
* pages: requests the simulated web logged during the run (robots.txt not
  counted), checked against the reachable set (web.reachable with robots):
  missing, extra, fetched more than once (500s: 1 + RETRY_TIMES is expected);
* pages/s over the crawl: pages / (last response end - first request arrival)
  in the simulated web's log, and pages / wall time (process start to exit);
* Redis commands per page: client-issued, counted in each worker by a
  measurement shim (a sitecustomize.py put on the workers' PYTHONPATH that
  counts every command redis-py packs, and every send = round trip), and
  server-side from INFO commandstats (CONFIG RESETSTAT before each run), which
  also counts the commands run inside Lua scripts: inside = server - client;
* CPU seconds (user+sys) of each worker (os.wait4 rusage: the worker and its
  indexer process, crawlproj/search/process.py), of the indexer process alone
  (its /proc/PID/stat sampled every 0.25 s: the last quarter second of it is
  counted as the worker's), the worker's own process (the difference), of the
  simulated web and of the Redis server (/proc/PID/stat), and the load average;
* each worker's main (reactor) thread from /proc/PID/task/PID/schedstat: time
  running, time runnable but waiting for a CPU (a shared machine), and the rest
  of its life, idle or blocked;
* seconds each worker spent in the cyclic garbage collector (gc.callbacks, from
  the same shim);
* each worker's CPU seconds by thread name (/proc/PID/task/*/stat, sampled
  through the run): the reactor (the process's name), Twisted's pool threads,
  the WARC writer, and threads no Python profiler sees (a native library's);
  and by the work they did, from the workers' stats ``<name>/thread_cpu_s``
  (time.thread_time around each job: the frontier's syncs, the stores'
  writes, the WARC batches, the content-seen and near-duplicate tests);
* each worker's memory: peak RSS (os.wait4's ru_maxrss) and, from
  /proc/PID/status sampled every 0.25 s, RSS and its anonymous part (the
  process's own heap: shared libraries are the file-backed rest) at the last
  sample before the worker exited; and the CPU seconds of every worker, of
  Redis and of the simulated web at each sample (Bench.last_cpu_samples), so
  that a caller can take the CPU of a stretch of the run (cpu_between);
* the workers' own CPU over the simulated web's in the same run: the web
  serves the same pages in every run, so its CPU is the machine's speed
  while the run lasted (this VM's moves 15-35 % within minutes); the
  round's summary gives the stores' share of the worker's CPU both raw,
  1 - cp1 / full1, and on that scale (docs/benchmarks.md).

--together runs each round's configurations at the same time instead, each
against a simulated web and a Redis server of its own, so that the machine's
drift falls on all of them alike; each round then compares the workers' own
CPU per page over the whole runs and over the window in which every run was
crawling (between its 10th and 90th percentile of pages), as the first to end
leaves the others a quieter machine: the stores' share (full1 against cp1)
measured with no scale between two moments of the machine.

The code under test is --src (default HEAD) extracted with git archive into a
temporary directory, so that edits of the work tree during a run change
nothing; --src worktree runs the work tree itself.

--profile adds, after the timed runs, one run of cp1 and of cp2 (and stock)
with py-spy recording every worker (raw collapsed stacks, --nonblocking,
--threads, idle samples left out; only the thread holding the GIL unless
--profile-threads), summarised as top functions by self and inclusive
samples, per thread. With --cprofile the profile runs are made with cProfile
instead, timed by the reactor thread's own CPU (a pstats file per worker):
exact call counts, and each function's CPU whatever else the machine runs,
though cProfile's own cost per call weighs on Python code more than on C.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository


def extract(rev: str) -> tuple[Path, str]:
    """The tree of git revision rev, extracted with `git archive` into a
    temporary directory (removed at exit), and its commit id."""
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                            f"{rev}^{{commit}}"], capture_output=True, text=True)
    if found.returncode != 0:
        sys.exit(f"crawl_bench.py: {rev!r} names no commit of {ROOT}")
    commit = found.stdout.strip()
    dest = Path(tempfile.mkdtemp(prefix=f"crawlproj-{commit[:10]}-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    return dest, commit


def source_tree(argv: list[str]) -> tuple[Path, str]:
    """The code under test: --src REV (default HEAD) is extracted with
    `git archive` into a temporary directory, so that edits made to the work
    tree while the bench runs cannot change it; --src worktree uses the work
    tree as it is."""
    rev = "HEAD"
    for i, arg in enumerate(argv):
        if arg == "--src" and i + 1 < len(argv):
            rev = argv[i + 1]
        elif arg.startswith("--src="):
            rev = arg.split("=", 1)[1]
    if rev == "worktree":
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return ROOT, f"worktree at {head[:10]}" + (" + uncommitted changes" if dirty else "")
    return extract(rev)


SRC, SRC_DESC = source_tree(sys.argv)  # also when imported by politeness_bench.py
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(ROOT / "bench"))

import redis

from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer

PY = sys.executable
HERE = Path(__file__).resolve().parent  # bench/
CLK = os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def scratch_server(aof: bool = True, prefix: str = "bench-"):
    """A fresh Redis-protocol server (the embedded configuration, AOF as asked)
    in a temporary directory: (client, process), removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    port = free_port()
    proc = spawn_server(port, tmp / "redis", appendonly=aof)
    r = redis.Redis(port=port)
    try:
        yield r, proc
    finally:
        r.close()
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def flush_sync(r) -> None:
    """FLUSHALL SYNC, then wait for lazy frees: Valkey frees a plain FLUSHALL in
    the background (lazyfree-lazy-user-flush), which would skew used_memory."""
    r.execute_command("FLUSHALL", "SYNC")
    for _ in range(200):
        if not r.info("memory").get("lazyfree_pending_objects"):
            return
        time.sleep(0.05)

# ---------------------------------------------------------------------------
# The measurement shim: counts redis-py commands in a worker process.
# ---------------------------------------------------------------------------

SHIM = r'''
# Written by bench/crawl_bench.py: counts the Redis commands this process sends.
import atexit, json, os, threading
from collections import Counter
_out = os.environ.get("CRAWLBENCH_REDIS_COUNTS")
if _out:
    try:
        import redis.connection as _rc
    except Exception:
        _rc = None
    if _rc is not None:
        _lock = threading.Lock()
        _cmds = Counter()
        _sends = [0]

        def _wrap_pack(cls):
            orig = cls.pack
            def pack(self, *args):
                name = args[0]
                if isinstance(name, bytes):
                    name = name.decode("latin-1")
                name = str(name).upper()
                if name in ("SCRIPT", "CLIENT", "CONFIG", "MEMORY") and len(args) > 1:
                    sub = args[1].decode("latin-1") if isinstance(args[1], bytes) else str(args[1])
                    name = name + "|" + sub.upper()
                with _lock:
                    _cmds[name] += 1
                return orig(self, *args)
            cls.pack = pack

        for _n in ("PythonRespSerializer", "HiredisRespSerializer"):
            if hasattr(_rc, _n):
                _wrap_pack(getattr(_rc, _n))
        _orig_send = _rc.AbstractConnection.send_packed_command

        def _send(self, command, check_health=True):
            with _lock:
                _sends[0] += 1
            return _orig_send(self, command, check_health)
        _rc.AbstractConnection.send_packed_command = _send

        # ... and, in a tree benchmarked for comparison that has one, those its
        # reactor thread sent itself (crawlproj/redis/reactor.py), counted once
        # that module is imported (importing it here would install Twisted's
        # default reactor before Scrapy's)
        import sys as _sys

        class _CountReactorSends:
            def find_spec(self, name, path=None, target=None):
                if name != "crawlproj.redis.reactor":
                    return None
                _sys.meta_path.remove(self)
                import importlib.util
                spec = importlib.util.find_spec(name)
                load = spec.loader.exec_module

                def exec_module(module):
                    load(module)
                    orig, pack = module._Connection.send, module.pack_command

                    def send(self, packed, n, timeout):
                        with _lock:
                            _sends[0] += 1
                        return orig(self, packed, n, timeout)

                    def counted_pack(args):
                        name = args[0].decode("latin-1") if isinstance(args[0], bytes) else str(args[0])
                        with _lock:
                            _cmds[name.upper()] += 1
                        return pack(args)
                    module._Connection.send = send
                    module.pack_command = counted_pack
                spec.loader.exec_module = exec_module
                return spec
        _sys.meta_path.insert(0, _CountReactorSends())

        # time spent in the cyclic garbage collector, by generation
        import gc, time as _time
        _gc = {"s": [0.0, 0.0, 0.0], "n": [0, 0, 0], "t": [0.0]}

        def _gc_cb(phase, info):
            if phase == "start":
                _gc["t"][0] = _time.perf_counter()
            else:
                g = info.get("generation", 0)
                _gc["s"][g] += _time.perf_counter() - _gc["t"][0]
                _gc["n"][g] += 1
        gc.callbacks.append(_gc_cb)

        @atexit.register
        def _dump():
            import sys
            mod = sys.modules.get("crawlproj")
            with open(_out, "w") as f:
                json.dump({"commands": dict(_cmds), "sends": _sends[0],
                           "crawlproj": getattr(mod, "__file__", None),
                           "gc_seconds_by_generation": [round(x, 3) for x in _gc["s"]],
                           "gc_collections_by_generation": _gc["n"]}, f)

# --cprofile: a deterministic profile of the main (reactor) thread, timed by
# its own CPU (what the machine's other work leaves out), for pstats
_prof = os.environ.get("CRAWLBENCH_CPROFILE")
if _prof:
    import cProfile
    import time as _ptime
    _profiler = cProfile.Profile(_ptime.thread_time)
    _profiler.enable()
    atexit.register(lambda: (_profiler.disable(), _profiler.dump_stats(_prof)))
'''

# ---------------------------------------------------------------------------
# Process accounting
# ---------------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """utime + stime (all threads) of a live process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def proc_memory(pid: int) -> tuple[int, int] | None:
    """(VmRSS, RssAnon) of a live process in KiB, from /proc/PID/status."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    kib = {}
    for line in text.splitlines():
        if line.startswith(("VmRSS:", "RssAnon:")):
            name, value = line.split(":", 1)
            kib[name] = int(value.split()[0])
    return kib.get("VmRSS", 0), kib.get("RssAnon", 0)


def cpu_between(samples: list[tuple[float, float]], t0: float, t1: float) -> float:
    """CPU seconds spent between wall-clock times t0 and t1, from (time, CPU
    seconds so far) samples, interpolated linearly between samples."""
    def at(t):
        if not samples:
            return 0.0
        if t <= samples[0][0]:
            return samples[0][1]
        for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
            if t <= tb:
                return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
        return samples[-1][1]
    return at(t1) - at(t0)


def schedstat(pid: int) -> tuple[float, float] | None:
    """(seconds on CPU, seconds runnable but waiting for a CPU) of a process's
    main thread, from /proc/PID/schedstat (None once it has exited)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            run_ns, wait_ns, _ = f.read().split()
        return int(run_ns) / 1e9, int(wait_ns) / 1e9
    except (OSError, ValueError):
        return None


def thread_cpu(pid: int, into: dict) -> None:
    """Each live thread's CPU seconds (user+sys) so far into into[tid] =
    (name, seconds): sampled while the process runs, so that threads that
    end before it (and the process's own exit) keep their last figure. The
    main thread (the reactor) is "main"; Python's other threads all bear
    the process's name ("python"), a native library's threads their own."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = "main" if tid == str(pid) else text[text.index("(") + 1: text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        into[tid] = (name, (int(fields[11]) + int(fields[12])) / CLK)


def children_cpu(pid: int, into: dict) -> None:
    """Each live child process's CPU seconds so far into into[child pid] (the
    worker's indexer process, crawlproj/search/process.py): sampled while it
    runs, since the worker's own figure (wait4) includes it once reaped."""
    kids = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:  # a thread's children are listed under that thread
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += f.read().split()
    for kid in kids:
        with contextlib.suppress(OSError, ValueError):
            into[int(kid)] = proc_cpu(int(kid))


def cpu_by_thread_name(threads: dict) -> dict:
    """Thread CPU seconds summed by thread name, digits folded (pool threads)."""
    out = Counter()
    for name, sec in threads.values():
        out[re.sub(r"\d+", "N", name)] += sec
    return {k: round(v, 2) for k, v in out.most_common()}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def read_log_from(path: str, offset: int) -> list[dict]:
    out = []
    with open(path, "rb") as f:
        f.seek(offset)
        for line in f:
            if line.endswith(b"\n"):
                out.append(json.loads(line))
    return out


_STAT_RE = re.compile(r"^\s*'([^']+)':\s*(-?[0-9.]+),?\s*$")


def scrapy_stats(log_text: str) -> dict:
    """Numeric entries of the stats dump at the end of a Scrapy log."""
    i = log_text.rfind("Dumping Scrapy stats:")
    out = {}
    if i < 0:
        return out
    for line in log_text[i:].splitlines()[1:]:
        m = _STAT_RE.match(line)
        if m:
            v = m.group(2)
            out[m.group(1)] = float(v) if "." in v else int(v)
        elif line.startswith("20"):  # next log line
            break
    m = re.search(r"'finish_reason': '([^']+)'", log_text[i:])
    if m:
        out["finish_reason"] = m.group(1)
    return out


# ---------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------

# Every run: no stores, no content-seen test, no ranker; robots.txt as the
# project does it (Crawl-delay handed to the frontier).
STORES_OFF = {
    "ITEM_PIPELINES": "{}",
    "CONTENTSEEN_ENABLED": "False",
    "RANKER_ENABLED": "False",
}
# ... and the downloader middlewares of the stores left out of the tree's own
# list (each tree under test has its own: tree_middlewares)
STORE_MIDDLEWARES = ("middlewares.record.RecordMiddleware",
                     "middlewares.contentseen.ContentSeenMiddleware")
_TREES: dict = {}


def tree(rev: str | None) -> tuple[Path, str]:
    """The code a configuration runs: SRC, or the tree of git revision rev
    (a config named "cp1@REV"), so that one invocation can compare two."""
    if rev is None:
        return SRC, SRC_DESC
    if rev not in _TREES:
        _TREES[rev] = extract(rev)
    return _TREES[rev]


def tree_middlewares(src: Path) -> str:
    """The tree's DOWNLOADER_MIDDLEWARES with the stores' middlewares off."""
    out = subprocess.run([PY, "-c", "import json; from settings.base import "
                          "DOWNLOADER_MIDDLEWARES as m; print(json.dumps(m))"],
                         cwd=src, capture_output=True, text=True, check=True).stdout
    mws = json.loads(out)
    mws.update({m: None for m in STORE_MIDDLEWARES if m in mws})
    return json.dumps(mws)

CONFIGS = {
    "stock": dict(workers=1, settings={
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
        # Scrapy's own default, not the project's 8 (settings/base.py):
        # stock Scrapy as it comes; "stock+CONCURRENT_ITEMS=8" shows the other
        "CONCURRENT_ITEMS": "100",
        # and CPython's collector as Scrapy leaves it: the project's GCFreeze
        # (frozen start-up heap, young generation every 20,000 allocations)
        # took stock's collector from 21-29 s of a crawl to 4-7 s, its memory
        # queues being what full collections walk; "stock+GC_FREEZE=True"
        # shows stock with it (a --set GC_FREEZE does not reach stock)
        "GC_FREEZE": "False",
    }),
    "cp1": dict(workers=1, settings={}),
    "redis": dict(workers=1, settings={
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    }),
    "cp2": dict(workers=2, settings={}),
    "full1": dict(workers=1, settings={}, stores=True),
    "full2": dict(workers=2, settings={}, stores=True),
}


def config(name: str) -> dict:
    """A configuration by name; "cp2+FRONTIER_PREFETCH=96" = cp2 with that
    setting; "cp1@abc1234" = cp1 on the code of commit abc1234."""
    base, *extra = name.split("+")
    base, _, rev = base.partition("@")
    c = CONFIGS[base]
    settings = dict(c["settings"])
    for kv in extra:
        k, _, v = kv.partition("=")
        settings[k] = v
    return {"workers": c["workers"], "settings": settings, "src": tree(rev or None)[0],
            "stores": c.get("stores", False)}


class Bench:
    """One simulated web + one Redis server, and the runs against them."""

    def __init__(self, spec: dict, workdir: Path, n_seeds: int, common: dict,
                 aof: bool = True, cache_mb: int = 1024):
        self.spec, self.workdir, self.common = spec, workdir, common
        workdir.mkdir(parents=True, exist_ok=True)
        self.shim_dir = workdir / "shim"
        self.shim_dir.mkdir(exist_ok=True)
        (self.shim_dir / "sitecustomize.py").write_text(SHIM)
        t = time.perf_counter()
        self.sw = SimWebServer(spec, log_path=str(workdir / "web.jsonl"), cache_mb=cache_mb)
        self.sw.start()
        self.web = self.sw.web
        self.seeds = self.web.seeds(n_seeds)
        self.reachable = self.web.reachable(self.seeds, obey_robots=True)
        self.seeds_file = workdir / "seeds.txt"
        self.seeds_file.write_text("\n".join(self.seeds) + "\n")
        self.port = free_port()
        self.redis_proc = spawn_server(self.port, workdir / "redis", appendonly=aof)
        self.redis_url = f"redis://127.0.0.1:{self.port}/0"
        self.r = redis.Redis(port=self.port)
        self.proxies: dict = {}  # delay ms -> (delayproxy process, its URL)
        self.setup_s = time.perf_counter() - t
        self.n_run = 0
        self.profile_rate = 50
        self.profile_all = False  # every running thread, not only the GIL's holder
        self.cprofile = False     # cProfile in the workers instead of py-spy

    def redis_url_for(self, delay_ms: float) -> str:
        """The server's URL, or that of a proxy delaying each way by delay_ms
        (bench/delayproxy.py: workers far from Redis), started once per delay."""
        if not delay_ms:
            return self.redis_url
        if delay_ms not in self.proxies:
            port = free_port()
            proc = subprocess.Popen([PY, str(HERE / "delayproxy.py"), "--listen", f"127.0.0.1:{port}",
                                     "--to", f"127.0.0.1:{self.port}", "--delay-ms", str(delay_ms)],
                                    stdout=subprocess.PIPE, text=True)
            proc.stdout.readline()  # listening
            self.proxies[delay_ms] = (proc, f"redis://127.0.0.1:{port}/0")
        return self.proxies[delay_ms][1]

    def rtt_ms(self, url: str, n: int = 50) -> float:
        """The median PING round trip to url, in ms."""
        r = redis.Redis.from_url(url)
        try:
            times = []
            for _ in range(n):
                t = time.perf_counter()
                r.ping()
                times.append(1000 * (time.perf_counter() - t))
            return round(statistics.median(times), 3)
        finally:
            r.close()

    def close(self):
        for proc, _ in self.proxies.values():
            proc.kill()
            proc.wait()
        try:
            self.r.close()
        finally:
            self.redis_proc.kill()
            self.redis_proc.wait()
            self.sw.stop()

    # -- the simulated web is warmed up so that every run is served from cache --

    def warm(self, connections: int = 32) -> dict:
        from simweb_bench import load  # bench/simweb_bench.py's load generator

        hp = [(u[7:].split("/", 1)[0], "/" + u[7:].split("/", 1)[1]) for u in sorted(self.reachable)]
        hp += [(h, "/robots.txt") for h in self.web.hosts]
        random.Random(1).shuffle(hp)
        out = {}
        for phase in ("render", "check"):
            c0, t0 = proc_cpu(self.sw.pid), time.perf_counter()
            stats = asyncio.run(load(self.sw.port, hp, connections, time.monotonic() + 600, len(hp)))
            wall = time.perf_counter() - t0
            out[phase] = {"requests": stats["n"], "req_per_s": round(stats["n"] / wall),
                          "server_cpu_per_req_us": round(1e6 * (proc_cpu(self.sw.pid) - c0) / stats["n"], 1)}
        time.sleep(0.3)
        return out

    def log_offset(self) -> int:
        time.sleep(0.3)  # the server flushes its log every 0.1 s
        return os.path.getsize(self.sw.log_path)

    # -- one run ----------------------------------------------------------------

    def run(self, name: str, workers: int, settings: dict, profile: bool = False,
            timeout: float = 900.0, extra_env: dict | None = None, src: Path | None = None,
            stores: bool = False, delay_ms: float = 0.0) -> dict:
        src = src or SRC
        self.n_run += 1
        rid = f"{self.n_run:02d}-{name}"
        rdir = self.workdir / rid
        rdir.mkdir(exist_ok=True)
        flush_sync(self.r)
        self.r.config_resetstat()
        offset = self.log_offset()
        if stores:  # the tree's own stores and middlewares, as a user runs it
            all_settings = {k: v for k, v in self.common.items() if k not in STORES_OFF}
            all_settings.update(settings)
        else:
            all_settings = {"DOWNLOADER_MIDDLEWARES": tree_middlewares(src), **self.common, **settings}
        env = self.sw.env()
        redis_url = self.redis_url_for(delay_ms)
        rtt = self.rtt_ms(redis_url)
        env.update(REDIS_URL=redis_url, CRAWL_ID=f"bench{self.n_run}",
                   CRAWL_DATA_DIR=str(rdir / "data"), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([str(self.shim_dir), str(src)]
                                              + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        env.update(extra_env or {})
        cmd = [PY, "-m", "scrapy", "crawl", "web", "-a", f"seeds={self.seeds_file}"]
        for k, v in all_settings.items():
            cmd += ["-s", f"{k}={v}"]
        load_before = loadavg()
        sw_cpu0, r_cpu0 = proc_cpu(self.sw.pid), proc_cpu(self.redis_proc.pid)
        self_cpu0 = time.process_time()
        wall0 = time.time()
        t0 = time.perf_counter()
        procs, spies = [], []
        for i in range(workers):
            wenv = dict(env, CRAWLBENCH_REDIS_COUNTS=str(rdir / f"redis-counts-{i}.json"))
            if profile and self.cprofile:
                wenv["CRAWLBENCH_CPROFILE"] = str(rdir / f"cprofile-{i}.pstats")
            log = open(rdir / f"worker{i}.log", "wb")
            procs.append(subprocess.Popen(cmd, cwd=src, env=wenv, stdout=log,
                                          stderr=subprocess.STDOUT))
            log.close()
        if profile and not self.cprofile:
            for i, p in enumerate(procs):
                spies.append(subprocess.Popen(
                    ["py-spy" if shutil.which("py-spy") else str(Path(PY).parent / "py-spy"),
                     "record", "--pid", str(p.pid), "--rate", str(self.profile_rate),
                     "--nonblocking", *(() if self.profile_all else ("--gil",)), "--threads",
                     "--full-filenames", "--format", "raw",
                     "-o", str(rdir / f"profile-{i}.txt")],
                    stdout=subprocess.DEVNULL, stderr=open(rdir / f"py-spy-{i}.log", "wb")))
        rusage, codes, ended = {}, {}, {}
        mem_peak = 0
        sched = {}  # worker -> last (run, wait) of its main thread (the reactor)
        threads = {}  # worker -> {tid: (thread name, CPU seconds)}
        kids = {}  # worker -> {child pid: CPU seconds}: its indexer process
        memory = {}  # worker -> {"rss_peak_kib", "rss_end_kib", "anon_end_kib"}
        cpu_samples = {"workers": {i: [] for i in range(len(procs))}, "redis": [], "simweb": []}
        sw_sched0, r_sched0 = schedstat(self.sw.pid), schedstat(self.redis_proc.pid)
        deadline = time.monotonic() + timeout
        while len(rusage) < len(procs):
            for i, p in enumerate(procs):
                if i in rusage:
                    continue
                st = schedstat(p.pid)
                if st is not None:
                    sched[i] = st
                thread_cpu(p.pid, threads.setdefault(i, {}))
                children_cpu(p.pid, kids.setdefault(i, {}))
                mem = proc_memory(p.pid)
                if mem is not None and mem[0]:  # alive, not a zombie waiting for wait4
                    memory[i] = {"rss_end_kib": mem[0], "anon_end_kib": mem[1]}
                    with contextlib.suppress(OSError):
                        cpu_samples["workers"][i].append((time.time(), proc_cpu(p.pid)))
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    memory.setdefault(i, {})["rss_peak_kib"] = ru.ru_maxrss
                    rusage[i] = (ru.ru_utime, ru.ru_stime)
                    codes[i] = os.waitstatus_to_exitcode(status)
                    p.returncode = codes[i]
                    ended[i] = time.perf_counter() - t0
            now = time.time()
            cpu_samples["redis"].append((now, proc_cpu(self.redis_proc.pid)))
            cpu_samples["simweb"].append((now, proc_cpu(self.sw.pid)))
            try:
                mem_peak = max(mem_peak, self.r.info("memory")["used_memory"])
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                raise RuntimeError(f"run {rid} did not finish in {timeout} s; logs in {rdir}")
            time.sleep(0.25)
        wall = time.perf_counter() - t0
        for s in spies:
            try:
                s.wait(30)
            except subprocess.TimeoutExpired:
                s.kill()
        sw_sched1, r_sched1 = schedstat(self.sw.pid), schedstat(self.redis_proc.pid)
        self.last_cpu_samples = cpu_samples
        self.last_children_cpu = [round(sum(kids.get(i, {}).values()), 2) for i in range(len(procs))]
        self.last_memory = [memory.get(i, {}) for i in range(len(procs))]
        self.last_sched = {
            "workers_main_thread": [
                {"run_s": round(sched[i][0], 2), "runqueue_wait_s": round(sched[i][1], 2),
                 "blocked_or_idle_s": round(ended[i] - sched[i][0] - sched[i][1], 2)}
                if i in sched else None for i in range(len(procs))],
            "workers_cpu_s_by_thread": [cpu_by_thread_name(threads.get(i, {}))
                                        for i in range(len(procs))],
            "simweb_main_thread_runqueue_wait_s": round(sw_sched1[1] - sw_sched0[1], 2)
            if sw_sched0 and sw_sched1 else None,
            "redis_main_thread_runqueue_wait_s": round(r_sched1[1] - r_sched0[1], 2)
            if r_sched0 and r_sched1 else None,
        }
        sw_cpu = proc_cpu(self.sw.pid) - sw_cpu0
        r_cpu = proc_cpu(self.redis_proc.pid) - r_cpu0
        self_cpu = time.process_time() - self_cpu0
        cstats = self.r.info("commandstats")
        mem_end = self.r.info("memory")["used_memory"]
        time.sleep(0.3)
        records = read_log_from(self.sw.log_path, offset)
        self.last_records = [r for r in records if r["t0"] >= wall0 - 1]
        out = self._figures(rid, name, workers, all_settings, rdir, records, wall, wall0,
                            rusage, codes, ended, sw_cpu, r_cpu, self_cpu, cstats,
                            mem_peak, mem_end, load_before, profile)
        out["workers_memory_kib"] = self.last_memory
        if delay_ms:
            out["config"] = f"{name}~{delay_ms:g}ms"
        out["redis_delay_ms"] = delay_ms
        out["redis_rtt_ms"] = rtt
        return out

    def _figures(self, rid, name, workers, settings, rdir, records, wall, wall0, rusage,
                 codes, ended, sw_cpu, r_cpu, self_cpu, cstats, mem_peak, mem_end,
                 load_before, profile) -> dict:
        records = [r for r in records if r["t0"] >= wall0 - 1]
        pages = [r for r in records if r["path"] != "/robots.txt"]
        robots = len(records) - len(pages)
        counts = checks.fetch_counts(records)
        status = {checks.url_of(r): r["status"] for r in pages}
        retries = int(settings.get("RETRY_TIMES", 2))
        fetched = set(counts)
        missing = self.reachable - fetched
        extra = fetched - self.reachable
        refetched = {u: n for u, n in counts.items()
                     if n != (1 + retries if status.get(u) in (500, 502, 503, 504, 522, 524, 408, 429)
                              else 1)}
        first = min(r["t0"] for r in records) if records else 0
        last = max(r["t1"] for r in records) if records else 0
        span = max(last - first, 1e-9)
        # Redis commands: server side (client + inside scripts) and client side (shim)
        mine = ("cmdstat_info", "cmdstat_config|resetstat", "cmdstat_flushall")
        server = {k[8:]: v["calls"] for k, v in cstats.items() if k not in mine}
        server_total = sum(server.values())
        client = Counter()
        sends = 0
        for i in range(workers):
            f = rdir / f"redis-counts-{i}.json"
            if f.exists():
                d = json.loads(f.read_text())
                client.update(d["commands"])
                sends += d["sends"]
        client_total = sum(client.values())
        gc_s = []
        for i in range(workers):
            f = rdir / f"redis-counts-{i}.json"
            if f.exists():
                gc_s.append(json.loads(f.read_text()).get("gc_seconds_by_generation"))
        code_paths = sorted({json.loads((rdir / f"redis-counts-{i}.json").read_text()).get("crawlproj")
                             for i in range(workers) if (rdir / f"redis-counts-{i}.json").exists()} - {None})
        wstats = []
        for i in range(workers):
            text = (rdir / f"worker{i}.log").read_text(errors="replace")
            st = scrapy_stats(text)
            wstats.append({k: st.get(k) for k in (
                "finish_reason", "downloader/response_count", "item_scraped_count",
                "elapsed_time_seconds", "frontier/redis_writes", "frontier/redis_commands",
                "frontier/leased", "frontier/released", "frontier/duplicates",
                "frontier/expired_leases", "dupefilter/filtered", "retry/count",
                "robotstxt/forbidden", "scheduler/enqueued", "scheduler/dequeued",
                "warc/records_cpu_s")
                if st.get(k) is not None})
            # the CPU of each kind of work done in the worker's threads
            # (crawlproj/redis/groupcommit.py, timed): frontier, stores, warc, ...
            wstats[-1]["thread_cpu_s"] = {k.split("/")[0]: round(v, 2) for k, v in st.items()
                                          if k.endswith("/thread_cpu_s")}
            errors = len(re.findall(r"Traceback", text)) + sum(
                1 for line in text.splitlines() if "] ERROR:" in line and "Gave up retrying" not in line)
            if errors:
                wstats[-1]["log_errors"] = errors
        n = max(len(pages), 1)
        # wait4's figure: the worker and its reaped children (its indexer process)
        worker_cpu = [round(u + s, 2) for u, s in (rusage[i] for i in range(workers))]
        indexer_cpu = getattr(self, "last_children_cpu", [0.0] * workers)
        own_cpu = [round(c - k, 2) for c, k in zip(worker_cpu, indexer_cpu)]
        out = {
            "run": rid, "config": name, "workers": workers, "load_avg_before": load_before,
            "exit_codes": [codes[i] for i in range(workers)],
            "pages": len(pages), "robots_fetches": robots, "reachable": len(self.reachable),
            "missing": len(missing), "extra": len(extra), "refetched": len(refetched),
            "examples": {"missing": sorted(missing)[:3], "extra": sorted(extra)[:3],
                         "refetched": sorted(refetched.items())[:3]},
            "crawl_s": round(span, 2), "wall_s": round(wall, 2),
            "worker_exit_s": [round(ended[i], 2) for i in range(workers)],
            "pages_per_s": round(len(pages) / span, 1),
            "pages_per_s_wall": round(len(pages) / wall, 1),
            "cpu_s": {"workers_user_sys": [[round(u, 2), round(s, 2)] for u, s in
                                           (rusage[i] for i in range(workers))],
                      "workers": worker_cpu, "workers_own": own_cpu,
                      "indexer_processes": indexer_cpu, "simweb": round(sw_cpu, 2),
                      "redis": round(r_cpu, 2), "bench": round(self_cpu, 2)},
            "cpu_share_of_crawl": {"workers": [round(c / span, 3) for c in worker_cpu],
                                   "simweb": round(sw_cpu / span, 3),
                                   "redis": round(r_cpu / span, 3)},
            "worker_cpu_ms_per_page": round(1000 * sum(worker_cpu) / n, 2),
            "pages_per_worker_cpu_s": round(n / max(sum(worker_cpu), 1e-9), 1),
            "pages_per_worker_own_cpu_s": round(n / max(sum(own_cpu), 1e-9), 1),
            # every CPU the crawl costs its user: the workers, their indexer
            # processes and the Redis server (stock Scrapy needs none of it)
            "pages_per_all_cpu_s": round(n / max(sum(worker_cpu) + r_cpu, 1e-9), 1),
            "schedstat": getattr(self, "last_sched", None),
            "gc_seconds_by_generation": gc_s,
            "redis": {
                "server_commands": server_total,
                "client_commands": client_total,
                "inside_scripts": server_total - client_total,
                "client_round_trips": sends,
                "client_commands_per_page": round(client_total / n, 2),
                "round_trips_per_page": round(sends / n, 2),
                "server_commands_per_page": round(server_total / n, 2),
                "inside_scripts_per_page": round((server_total - client_total) / n, 2),
                "client_by_command": dict(client.most_common()),
                "server_by_command": dict(sorted(server.items(), key=lambda kv: -kv[1])[:25]),
                "used_memory_peak_sampled": mem_peak, "used_memory_end": mem_end,
            },
            "scrapy_stats": wstats,
            "timeline": timeline(pages, first),
            "dir": str(rdir), "crawlproj_imported_from": code_paths,
        }
        if profile and self.cprofile:
            out["cprofile"] = [str(rdir / f"cprofile-{i}.pstats") for i in range(workers)]
        elif profile:
            prof = [summarise_profile(rdir / f"profile-{i}.txt") for i in range(workers)]
            out["profile"] = prof
            # GIL-holding samples' shares applied to each worker's CPU time: an
            # estimate of worker CPU ms per crawled page, by category
            by = Counter()
            for i, pr in enumerate(prof):
                for k, v in pr.get("categories_pct", {}).items():
                    by[k] += worker_cpu[i] * v / 100.0
            out["worker_cpu_ms_per_page_by_category"] = {
                k: round(1000 * v / n, 3) for k, v in by.most_common()}
        return out


def timeline(pages: list[dict], first: float, window: float = 10.0, top: int = 4) -> dict:
    """Where the crawl's time goes: pages per window of the crawl, hosts busy in
    each window, and for the biggest hosts (the tail of a Zipf web) the time
    between one response's end and the next request's arrival (the host cycle:
    one request per host at a time, so in the tail this sets the pace)."""
    per = Counter(int((r["t0"] - first) // window) for r in pages)
    hosts = defaultdict(set)
    for r in pages:
        hosts[int((r["t0"] - first) // window)].add(r["host"])
    out = {"window_s": window,
           "pages_per_s": [round(per[w] / window, 1) for w in range(max(per) + 1)] if per else [],
           "hosts_busy": [len(hosts[w]) for w in range(max(per) + 1)] if per else []}
    big = Counter(r["host"] for r in pages).most_common(top)
    cycles = {}
    for host, n in big:
        recs = sorted((r for r in pages if r["host"] == host), key=lambda r: r["t0"])
        gaps = sorted(b["t0"] - a["t1"] for a, b in zip(recs, recs[1:]))
        serve = sorted(r["t1"] - r["t0"] for r in recs)
        if gaps:
            cycles[host] = {"pages": n, "last_s": round(recs[-1]["t1"] - first, 1),
                            "gap_ms_median": round(1000 * gaps[len(gaps) // 2], 2),
                            "gap_ms_p90": round(1000 * gaps[int(len(gaps) * 0.9)], 2),
                            "serve_ms_median": round(1000 * serve[len(serve) // 2], 2)}
    out["biggest_hosts"] = cycles
    return out


# ---------------------------------------------------------------------------
# py-spy raw output -> top functions
# ---------------------------------------------------------------------------

def _file(frame: str) -> str:
    """The frame's file, relative to site-packages, the project root or the stdlib."""
    m = re.search(r"\((.*?)(?::\d+)?\)$", frame)
    path = m.group(1) if m else ""
    for marker in ("/site-packages/", str(SRC) + "/", str(ROOT) + "/", "/lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def _short(frame: str) -> str:
    # "func (/long/path/scrapy/core/engine.py:123)" -> "func (scrapy/core/engine.py)"
    m = re.match(r"(.*) \((.*?)(?::\d+)?\)$", frame)
    return f"{m.group(1)} ({_file(frame)})" if m else frame


STOCK_SCHED = ("scrapy/core/scheduler.py", "scrapy/pqueues.py", "scrapy/dupefilters.py",
               "scrapy/squeues.py", "queuelib/")
# the project's Scrapy middlewares: their entry points and the feature packages they live in
PROJECT_MIDDLEWARES = ("middlewares/", "crawlproj/robots/middleware.py", "crawlproj/traps/middleware.py",
                       "crawlproj/sitemaps/middleware.py", "crawlproj/addressguard/middleware.py",
                       "crawlproj/prioritizers/linkcontext.py")
ROOTS = ("scrapy/crawler.py", "scrapy/cmdline.py", "scrapy/commands/", "scrapy/__main__.py",
         "scrapy/utils/reactor.py")


def category(files: list[str], names: list[str]) -> str:
    """Where a sample's time goes, by the frames on its stack (root first)."""
    def has(*xs):
        return any(f.startswith(xs) for f in files)
    if any("importlib" in f or f == "<frozen site>" for f in files):
        return "startup (imports)"
    # the stores (full1/full2), by the innermost store frame on the stack
    for f in reversed(files):
        if f.startswith(("crawlproj/stores/", "crawlproj/pipelines/", "middlewares/record.py",
                         "crawlproj/redis/groupcommit.py")):
            if "warc" in f or "cdxj" in f or f.endswith("exchange.py"):
                return "stores: WARC (records, digests, gzip, CDXJ)"
            if "crawllog" in f:
                return "stores: crawl log"
            if "pagemeta" in f:
                return "stores: page metadata"
            if "link" in f:
                return "stores: link store"
            if f.startswith("crawlproj/pipelines/index"):
                return "stores: index hand-over"
            return "stores: other (record middleware, group commit)"
        if f.startswith(("crawlproj/due/middleware.py", "crawlproj/due/contentseen.py",
                         "crawlproj/due/middleware.py")):
            return "content-seen test"
        if f.startswith("crawlproj/search/"):
            return "search: indexer"
    if has("warcio/"):
        return "stores: WARC (records, digests, gzip, CDXJ)"
    if has("crawlproj/frontier/", "crawlproj/due/"):
        if has("redis/"):
            return "frontier: redis client (sync thread)"
        if any(n.startswith("decode ") for n in names):
            return "frontier: decode leased requests"
        if has("crawlproj/frontier/admission.py", "crawlproj/frontier/codec.py", "crawlproj/due/"):
            return "frontier: admit (canonicalize, fingerprint, encode)"
        return "frontier: scheduler bookkeeping"
    if has("scrapy_redis/"):
        if has("redis/"):
            return "scrapy-redis: redis client"
        return "scrapy-redis: scheduler (pickle, fingerprint)"
    if has(*STOCK_SCHED):
        return "stock scheduler + dupefilter"
    if has("crawlproj/extract.py", "crawlproj/spiders/"):
        return "spider: parse + extract (lxml)"
    if has(*PROJECT_MIDDLEWARES):
        return "project middlewares (robots)"
    if has("redis/"):
        return "redis client (other)"
    # the innermost Scrapy frame says what Scrapy was doing
    for f in reversed(files):
        if f.startswith("scrapy/") and not f.startswith(ROOTS):
            if f.startswith(("scrapy/core/downloader", "scrapy/downloadermiddlewares",
                             "scrapy/core/http2")):
                return "scrapy: downloader + its middlewares"
            if f.startswith(("scrapy/core/scraper", "scrapy/core/spidermw",
                             "scrapy/spidermiddlewares", "scrapy/utils/asyncgen",
                             "scrapy/utils/asyncio", "scrapy/utils/python",
                             "scrapy/utils/defer")):
                return "scrapy: scraper + spider middlewares"
            if f.startswith("scrapy/core/engine"):
                return "scrapy: engine"
            if f.startswith(("scrapy/http", "scrapy/utils/request", "scrapy/utils/url",
                             "scrapy/utils/httpobj")):
                return "scrapy: Request/Response objects"
            if f.startswith(("scrapy/signalmanager", "scrapy/utils/signal")):
                return "scrapy: signals"
            return "scrapy: other"
    if has("twisted/"):
        return "twisted (reactor, TCP, HTTP)"
    return "asyncio loop / other"


def summarise_profile(path: Path, top: int = 25) -> dict:
    """Top functions and categories of a py-spy raw (collapsed) profile."""
    if not path.exists():
        return {"error": f"no profile {path.name}"}
    total = 0
    self_t, incl, threads, cats = Counter(), Counter(), Counter(), Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        n = int(n)
        frames = stack.split(";")
        thread = "?"
        if frames and frames[0].startswith("thread ("):
            thread = re.sub(r"^thread \(\d+\):? ?", "", frames[0]) or "(main, unnamed)"
            thread = re.sub(r"-\d+$", "-N", thread)
            frames = frames[1:]
        if not frames:
            continue
        total += n
        threads[thread] += n
        names = [_short(f) for f in frames]
        files = [_file(f) for f in frames]
        self_t[names[-1]] += n
        for f in set(names):
            incl[f] += n
        cats[category(files, names)] += n
    def pct(c):
        return round(100.0 * c / max(total, 1), 1)
    return {
        "samples": total,
        "threads_pct": {k: pct(v) for k, v in threads.most_common()},
        "categories_pct": {k: pct(v) for k, v in cats.most_common()},
        "top_self_pct": [[k, pct(v)] for k, v in self_t.most_common(top)],
        "top_inclusive_pct": [[k, pct(v)] for k, v in incl.most_common(top + 15)
                              if not k.startswith(("_run_module_as_main", "_run_code", "<module>",
                                                   "execute ", "_run_print_help", "_run_command"))],
    }


# ---------------------------------------------------------------------------

def machine() -> dict:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        mem = open("/proc/meminfo").readline().split()[1]
        mem = f"{int(mem) / 1048576:.0f} GiB"
    except (OSError, IndexError, ValueError):
        pass
    import scrapy
    import scrapy_redis
    import twisted

    return {"cpus": os.cpu_count(), "cpu": model, "memory": mem,
            "kernel": platform.release(), "python": platform.python_version(),
            "scrapy": scrapy.__version__, "twisted": twisted.__version__,
            "scrapy_redis": scrapy_redis.__version__, "redis_py": redis.__version__}


def line_of(res: dict) -> str:
    rd = res["redis"]
    return (f"{res['run']:<10} pages {res['pages']:>6} (missing {res['missing']}, extra {res['extra']}, "
            f"refetched {res['refetched']})  {res['pages_per_s']:>6.1f} p/s crawl "
            f"{res['pages_per_s_wall']:>6.1f} p/s wall  cpu w={res['cpu_s']['workers']} "
            f"web={res['cpu_s']['simweb']} redis={res['cpu_s']['redis']}  "
            f"cmds/page client {rd['client_commands_per_page']} inside {rd['inside_scripts_per_page']} "
            f"rt/page {rd['round_trips_per_page']}  load {res['load_avg_before']}  "
            f"reactor run/wait/idle {[(w or {}).get('run_s') for w in res['schedstat']['workers_main_thread']]}"
            f"/{[(w or {}).get('runqueue_wait_s') for w in res['schedstat']['workers_main_thread']]}"
            f"/{[(w or {}).get('blocked_or_idle_s') for w in res['schedstat']['workers_main_thread']]}"
            f"  big-host gap ms {[h['gap_ms_median'] for h in res['timeline']['biggest_hosts'].values()]}"
            f"  threads' cpu s {[w.get('thread_cpu_s') for w in res['scrapy_stats']]}")


def steady_window(runs: dict, low: float = 0.1, high: float = 0.9) -> tuple[float, float]:
    """The stretch of wall-clock time in which every run of `runs` (name ->
    its records) was between its `low` and `high` share of its pages: past
    every start-up and before any run's last pages."""
    starts, ends = [], []
    for records in runs.values():
        done = sorted(r["t1"] for r in records if r["path"] != "/robots.txt")
        starts.append(done[int(low * (len(done) - 1))])
        ends.append(done[int(high * (len(done) - 1))])
    return max(starts), min(ends)


def together(a, spec: dict, common: dict, head: dict, names: list[str], workdir: Path) -> None:
    """--together: each round runs every configuration at once, each against
    a simulated web and a Redis server of its own (identical webs, from the
    same spec), so that a drift of the machine's speed, which moves whole
    crawls run one after another by 15-35 %, falls on all of them alike. Each
    round compares the workers' own CPU per page twice: over the whole runs,
    and over the window in which all of them were crawling (steady_window),
    as the one that ends first leaves the others a quieter machine."""
    import threading

    benches = {name: Bench(spec, workdir / name.replace("/", "_"), a.seeds, common, aof=not a.no_aof)
               for name in names}
    results, summary = [], []
    try:
        for name, bench in benches.items():
            print(json.dumps({"config": name, "reachable": len(bench.reachable),
                              "warm": bench.warm()}), flush=True)
        for rnd in range(1, a.repeat + 1):
            out, taken, errors = {}, {}, []

            def one(name):
                c, bench = config(name), benches[name]
                try:
                    out[name] = bench.run(name, c["workers"], c["settings"], src=c["src"],
                                          stores=c["stores"])
                    taken[name] = (bench.last_records, bench.last_cpu_samples)
                except BaseException as e:  # reported below, once every run has ended
                    errors.append(f"{name}: {e}")

            threads = [threading.Thread(target=one, args=(n,)) for n in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise SystemExit("; ".join(errors))
            for name in names:
                res = out[name]
                if any(res["exit_codes"]) or res["pages"] == 0:
                    raise SystemExit(f"run {res['run']} failed (exit codes {res['exit_codes']}); "
                                     f"see {res['dir']}")
            ws, we = steady_window({n: taken[n][0] for n in names})
            window = {}
            for name in names:
                res = out[name]
                res["round"] = rnd
                records, samples = taken[name]
                pages = sum(1 for r in records if r["path"] != "/robots.txt" and ws <= r["t1"] < we)
                cpu = sum(cpu_between(w, ws, we) for w in samples["workers"].values())
                window[name] = {"pages": pages, "workers_own_cpu_s": round(cpu, 2),
                                "cpu_ms_per_page": round(1000 * cpu / max(pages, 1), 3)}
                results.append(res)
                print(line_of(res), file=sys.stderr, flush=True)
                print(json.dumps(res), flush=True)
            whole = {n: round(1000 * sum(out[n]["cpu_s"]["workers_own"]) / out[n]["pages"], 3)
                     for n in names}
            # the work each worker's threads timed (crawlproj/redis/groupcommit.py,
            # timed): the near-duplicate test's is the same in every
            # configuration, so its CPU says how fast each process ran
            timed_work = {n: [w.get("thread_cpu_s") for w in out[n]["scrapy_stats"]] for n in names}
            s = {"round": rnd, "window_s": round(we - ws, 1), "window": window,
                 "whole_runs_cpu_ms_per_page": whole, "threads_cpu_s": timed_work}
            if "cp1" in names and "full1" in names:
                s["stores_share"] = {
                    "whole_runs": round(1 - whole["cp1"] / whole["full1"], 3),
                    "window": round(1 - window["cp1"]["cpu_ms_per_page"]
                                    / window["full1"]["cpu_ms_per_page"], 3)}
            summary.append(s)
            print(s, file=sys.stderr, flush=True)
    finally:
        for bench in benches.values():
            bench.close()
        (workdir / "results.json").write_text(json.dumps({**head, "runs": results}, indent=1))
    print(json.dumps({"summary": summary}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=500)
    p.add_argument("--pages", type=int, default=20000)
    p.add_argument("--page-bytes", type=int, default=10000)
    p.add_argument("--seeds", type=int, default=10, help="start URLs (roots of the biggest hosts)")
    p.add_argument("--concurrency", type=int, default=32, help="CONCURRENT_REQUESTS")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of all configurations (one round of the default web takes "
                        "12-15 min on 2 shared cores; run the bench again for more)")
    p.add_argument("--configs", default="stock,cp1,redis,cp2",
                   help="comma-separated; NAME+SETTING=VALUE adds a setting to one configuration")
    p.add_argument("--profile", action="store_true",
                   help="after the timed runs, one py-spy-recorded run of each of --profile-configs")
    p.add_argument("--profile-configs", default="cp1,cp2,stock")
    p.add_argument("--profile-only", action="store_true", help="no timed runs")
    p.add_argument("--profile-threads", action="store_true",
                   help="sample every running Python thread (default: only the one holding "
                        "the GIL), so that work done without the GIL (zlib, hashlib) counts")
    p.add_argument("--profile-rate", type=int, default=50,
                   help="py-spy samples a second (a finer profile slows the worker it samples)")
    p.add_argument("--cprofile", action="store_true",
                   help="profile with cProfile (the reactor thread, by its CPU time: pstats "
                        "files, cprofile-N.pstats in each profile run's directory) instead of py-spy")
    p.add_argument("--together", action="store_true",
                   help="run a round's configurations at the same time, each against a simulated "
                        "web and a Redis server of its own, so that they share the machine's speed")
    p.add_argument("--no-aof", action="store_true", help="Redis without its AOF (default: AOF on, as embedded)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="extra Scrapy setting for every run")
    p.add_argument("--redis-delays", default="0", metavar="MS,MS",
                   help="run each configuration with the workers' Redis traffic delayed this many "
                        "ms each way (bench/delayproxy.py; 0: direct), e.g. 0,1,5")
    p.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    p.add_argument("--src", default="HEAD",
                   help="git revision to benchmark (extracted with git archive), or 'worktree'")
    a = p.parse_args()

    spec = {"seed": a.seed, "hosts": a.hosts, "pages": a.pages, "page_bytes": a.page_bytes,
            "latency_ms": 0, "crawl_delay_fraction": 0.0}
    common = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": a.concurrency,
              "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": 0,
              "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_MIN_DELAY": 0, "RETRY_TIMES": 2,
              "CRAWL_SCOPE": "any", "DEPTH_LIMIT": 0,  # the whole simulated web
              **STORES_OFF}
    for kv in a.set:
        k, _, v = kv.partition("=")
        common[k] = v
    workdir = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="crawl-bench-"))
    head = {"machine": machine(), "code": SRC_DESC, "code_dir": str(SRC), "spec": spec, "common_settings": common,
            "argv": sys.argv, "workdir": str(workdir)}
    print(json.dumps(head), flush=True)
    if a.together and (a.profile or a.profile_only):
        p.error("--together makes no profile: run --profile without it")
    names = [c for c in a.configs.split(",") if c]
    try:
        delays = [float(d) for d in a.redis_delays.split(",") if d.strip()]
    except ValueError:
        p.error(f"--redis-delays: comma-separated milliseconds, not {a.redis_delays!r}")
    if any(not d >= 0 for d in delays) or not delays:
        p.error("--redis-delays: each delay must be >= 0 ms")
    if a.together and delays != [0.0]:
        p.error("--redis-delays runs one configuration at a time: leave out --together")
    if a.together:
        together(a, spec, common, head, names, workdir)
        return
    bench = Bench(spec, workdir, a.seeds, common, aof=not a.no_aof)
    bench.profile_all = a.profile_threads
    bench.profile_rate = a.profile_rate
    bench.cprofile = a.cprofile
    results = []
    try:
        warm = bench.warm()
        print(json.dumps({"reachable": len(bench.reachable), "seeds": len(bench.seeds),
                          "setup_s": round(bench.setup_s, 1), "warm": warm}), flush=True)
        for rnd in range(0 if a.profile_only else a.repeat):
            for name, delay in [(n, d) for n in names for d in delays]:
                c = config(name)
                res = bench.run(name, c["workers"], c["settings"], src=c["src"], stores=c["stores"],
                                delay_ms=delay)
                res["round"] = rnd + 1
                results.append(res)
                print(line_of(res), file=sys.stderr, flush=True)
                print(json.dumps(res), flush=True)
                if any(res["exit_codes"]) or res["pages"] == 0:
                    raise SystemExit(f"run {res['run']} failed (exit codes {res['exit_codes']}); "
                                     f"see {res['dir']}")
        if a.profile or a.profile_only:
            for name in a.profile_configs.split(","):
                c = config(name)
                res = bench.run(name + "-prof", c["workers"], c["settings"], profile=True,
                                src=c["src"], stores=c["stores"])
                res["round"] = "profile"
                results.append(res)
                print(line_of(res), file=sys.stderr, flush=True)
                print(json.dumps(res), flush=True)
    finally:
        bench.close()
        (workdir / "results.json").write_text(json.dumps({**head, "runs": results}, indent=1))
    # the side-by-side ratios, per round
    by_round = defaultdict(dict)
    for r in results:
        if r["round"] != "profile":
            by_round[r["round"]][r["config"]] = r
    summary = []
    for rnd, rs in sorted(by_round.items()):
        def ratio(x, y):
            ok = x in rs and y in rs and rs[y]["pages_per_s"] > 0
            return round(rs[x]["pages_per_s"] / rs[y]["pages_per_s"], 3) if ok else None
        summary.append({"round": rnd, "cp1/stock": ratio("cp1", "stock"),
                        "redis/stock": ratio("redis", "stock"), "cp1/redis": ratio("cp1", "redis"),
                        "cp2/stock": ratio("cp2", "stock"), "cp2/cp1": ratio("cp2", "cp1"),
                        "pages_per_s": {k: v["pages_per_s"] for k, v in rs.items()}})
    # the workers' CPU in units of the simulated web's, and the stores' share
    # of a worker's CPU (full1 against cp1), raw and on that scale
    for s, (_, rs) in zip(summary, sorted(by_round.items())):
        per_web = {k: round(sum(v["cpu_s"]["workers_own"]) / v["cpu_s"]["simweb"], 2)
                   for k, v in rs.items() if v["cpu_s"].get("simweb")}
        s["workers_own_cpu_per_simweb_cpu"] = per_web
        if "cp1" in rs and "full1" in rs:
            own = {k: sum(rs[k]["cpu_s"]["workers_own"]) for k in ("cp1", "full1")}
            s["stores_share"] = {"raw": round(1 - own["cp1"] / own["full1"], 3)}
            if "cp1" in per_web and "full1" in per_web:
                s["stores_share"]["per_simweb"] = round(1 - per_web["cp1"] / per_web["full1"], 3)
    # every configuration against stock Scrapy of the same round: pages/s over
    # the crawl and pages per worker CPU-second
    for s, (_, rs) in zip(summary, sorted(by_round.items())):
        if "stock" in rs:
            st = rs["stock"]
            s["vs_stock"] = {k: {"pages_per_s": round(v["pages_per_s"] / st["pages_per_s"], 3),
                                 "pages_per_cpu_s": round(v["pages_per_worker_cpu_s"]
                                                          / st["pages_per_worker_cpu_s"], 3),
                                 "pages_per_own_cpu_s": round(v["pages_per_worker_own_cpu_s"]
                                                              / st["pages_per_worker_own_cpu_s"], 3),
                                 "pages_per_all_cpu_s": round(v["pages_per_all_cpu_s"]
                                                              / st["pages_per_all_cpu_s"], 3)}
                             for k, v in rs.items() if k != "stock"}
    # each configuration's pages/s with its Redis traffic delayed, against the
    # same configuration's direct run of the same round
    for s, (_, rs) in zip(summary, sorted(by_round.items())):
        far = {k: round(v["pages_per_s"] / rs[k.split("~")[0]]["pages_per_s"], 3)
               for k, v in rs.items() if "~" in k and k.split("~")[0] in rs}
        if far:
            s["delayed_vs_direct"] = far
            s["redis_rtt_ms"] = {k: v["redis_rtt_ms"] for k, v in rs.items()}
    print(json.dumps({"summary": summary}), flush=True)
    for s in summary:
        print(s, file=sys.stderr)


if __name__ == "__main__":
    main()
