"""What it costs to hand a script a batch of links: 8 arguments per link vs one msgpack array.

    .venv/bin/python bench/args_bench.py [--links 256] [--calls 4000]

A script that does nothing but receive its arguments (and, for the array, unpack
it) is called --calls times with --links links of the shape the frontier sends
(host, fingerprint, aux, score, 38-byte payload, force, bump, first), against a
fresh embedded-configuration server without AOF. Reported per link: the server's
CPU (/proc) and the wall time of the whole round trip (client packing, sending,
the server, the reply). crawlproj.frontier.frontier.Batch.args sends the array.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import msgpack
from crawl_bench import proc_cpu, scratch_server  # also puts the code under test on the path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--links", type=int, default=256)
    p.add_argument("--calls", type=int, default=4000)
    a = p.parse_args()
    with scratch_server(aof=False, prefix="args-bench-") as (r, proc):
        links = [[f"h{i % 7}.example", str(-1234567890123456789 + i), b"", "12.5", b"x" * 38,
                  "0", "0", ""] for i in range(a.links)]
        flat = [x for link in links for x in link]
        ways = {
            "8 arguments per link": ("return 1", lambda: flat),
            "one msgpack array": ("local t = cmsgpack.unpack(ARGV[1]) return #t",
                                  lambda: [msgpack.packb(flat, use_bin_type=False)]),
        }
        for name, (script, args) in ways.items():
            sha = r.script_load(script)
            c0, t0 = proc_cpu(proc.pid), time.perf_counter()
            for _ in range(a.calls):
                r.evalsha(sha, 1, "k", *args())
            wall = time.perf_counter() - t0
            n = a.calls * a.links
            print(f"{name:22s} server {1e6 * (proc_cpu(proc.pid) - c0) / n:5.2f} us/link   "
                  f"round trip {1e6 * wall / n:5.2f} us/link")


if __name__ == "__main__":
    main()
