"""What a page in the recrawl schedule costs in Redis, per URL, beside what
the same URL costs queued and never crawled: the two payload layouts side by
side in one server.

    .venv/bin/python bench/recrawl_state_bench.py [--per-host 100,2000]

For each host size, one host's keys of each kind, filled as the frontier
fills them (crawlproj/frontier/lua/sync.lua keeps a host's URLs in q:<host>
or d:<host>, a sorted set, and their payloads in p:<host>, a hash):

- queued: a never-crawled URL, its payload as codec.encode writes it for a
  link (Referer, depth) in q:<host>;
- msgpack: a scheduled page, its recrawl record in a msgpack request
  (meta "rc" and "depth"), in d:<host>;
- packed: a scheduled page, its record packed in one binary field
  (crawlproj/recrawl/record.py, pack_payload), in d:<host>.

The records are real: each page's state after a few fetches (state.update),
an ETag as the simulated web writes it, Last-Modified, the 8-byte digest.
MEMORY USAGE (SAMPLES 0: every element) of the host's two keys / pages;
"recrawl" is the scheduled page's cost less the queued URL's. The server is
the embedded one, with its listpack limits (crawlproj/redis/embedded.py), and then
with the server's own defaults (128 entries), which a shared Redis has.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
from pathlib import Path

import redis
from scrapy import Request

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.frontier import codec  # noqa: E402
from crawlproj.recrawl.record import pack_payload  # noqa: E402
from crawlproj.recrawl.state import Observation, RecrawlState, update  # noqa: E402
from crawlproj.redis.embedded import free_port, spawn_server  # noqa: E402

DAY = 86400.0


def pages(host: str, n: int, rng: random.Random):
    for i in range(n):
        path = f"/{rng.choice(['news', 'docs', 'blog', 'p'])}/{i:05d}-{rng.randrange(10**6)}.html"
        state, t = RecrawlState(), 1.7e9
        for _ in range(rng.randrange(2, 12)):
            t += rng.expovariate(1 / DAY)
            state = update(state, Observation(t, rng.random() < 0.4))
        etag = f'"{rng.randrange(50):x}-{rng.getrandbits(32):08x}"'
        digest = hashlib.sha1(path.encode()).digest()[:8]
        fp = hashlib.sha1((host + path).encode()).digest()[:8]
        yield fp, f"http://{host}{path}", path, [state.pack(), etag, int(t - 3600), digest], t


def fill(r, n: int, kind: str, rng: random.Random) -> float:
    host = f"h{kind}{n}.example"
    q, p = f"bench:{kind}:q:{host}", f"bench:{kind}:p:{host}"
    pipe = r.pipeline(transaction=False)
    for fp, url, path, record, t in pages(host, n, rng):
        depth = rng.randrange(1, 6)
        if kind == "queued":
            req = Request(url, meta={"depth": depth},
                          headers={"Referer": f"http://{host}/p/{rng.randrange(10**5)}.html"})
            payload = codec.encode(req, host=host)
            score = rng.random()
        elif kind == "msgpack":
            payload = codec.encode(Request(url, meta={"rc": record, "depth": depth}), host=host)
            score = t * 1000
        else:
            payload = pack_payload(path, False, depth, record)
            score = t * 1000
        pipe.zadd(q, {fp: score})
        pipe.hset(p, fp, payload)
    pipe.execute()
    used = r.memory_usage(q, samples=0) + r.memory_usage(p, samples=0)
    return used / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-host", default="100,2000")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="recrawl-state-bench-"))
    port = free_port()
    server = spawn_server(port, tmp, appendonly=False)
    try:
        r = redis.Redis(port=port)
        info = r.info("server")
        version = (f"Valkey {info['valkey_version']}" if "valkey_version" in info
                   else f"Redis {info['redis_version']}")
        print(f"server {version} on 127.0.0.1:{port}")
        print("| server limits | pages per host | queued | scheduled, msgpack | scheduled, packed "
              "| recrawl, msgpack | recrawl, packed |")
        print("|---|---|---|---|---|---|---|")
        for limits in ("embedded", "defaults"):
            if limits == "defaults":
                for k in ("hash-max-listpack-entries", "zset-max-listpack-entries"):
                    r.config_set(k, "128")
                for k in ("hash-max-listpack-value", "zset-max-listpack-value"):
                    r.config_set(k, "64")
            cfg = r.config_get("*-max-listpack-*")
            for n in (int(x) for x in a.per_host.split(",")):
                got = {kind: fill(r, n, kind, random.Random(n)) for kind in
                       ("queued", "msgpack", "packed")}
                print(f"| {limits} ({cfg['hash-max-listpack-entries']}/"
                      f"{cfg['hash-max-listpack-value']}) | {n} | {got['queued']:.0f} | "
                      f"{got['msgpack']:.0f} | {got['packed']:.0f} | "
                      f"{got['msgpack'] - got['queued']:.0f} | {got['packed'] - got['queued']:.0f} |")
                r.flushall()
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
