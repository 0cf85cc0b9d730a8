"""CPU of a worker's Redis round trip: made in a thread, as the group commits
make them (crawlproj/redis/groupcommit.py: redis-py blocking, handed over with
deferToThread), against made by the reactor thread on a non-blocking
connection (a throwaway RESP protocol here: redis-py's command packer and
hiredis' reader), while the reactor thread does Python work as a crawling
worker's does.

Each mode runs in a fresh process for --seconds: every millisecond the
reactor runs --work loop iterations of interpreter work (about 0.2 ms of CPU
at the default); the round trips go one after another (the next 0.5 ms after
the last one's reply, as a group commit's next batch), each a pipeline of two
RPUSH and an EVAL, on a fresh server (crawlproj.redis.embedded.spawn_server, AOF
off). A mode's CPU per round trip is its
process CPU above the run without round trips, over its round trips; the
voluntary context switches say how often a thread went to sleep for another.

    .venv/bin/python bench/roundtrip_bench.py [--seconds 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys
from twisted.internet import asyncioreactor
asyncioreactor.install()
from twisted.internet import defer, protocol, reactor, task, threads
import hiredis, redis

port, mode, seconds, work = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
client = redis.Redis(port=port)
pack = client.connection_pool.get_connection().pack_commands
COMMANDS = [("RPUSH", "k1", b"x" * 200, b"y" * 200), ("RPUSH", "k2", b"z" * 300),
            ("EVAL", "return 1", 0)]
trips = 0

def work_tick():
    s = 0
    for i in range(work):
        s += i * i

def in_thread():
    pipe = client.pipeline(transaction=False)
    for c in COMMANDS:
        pipe.execute_command(*c)
    return pipe.execute()

class Resp(protocol.Protocol):
    def connectionMade(self):
        self.reader, self.waiting = hiredis.Reader(), []
    def send(self, commands):
        d = defer.Deferred()
        self.waiting.append((len(commands), [], d))
        self.transport.writeSequence(pack(commands))
        return d
    def dataReceived(self, data):
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            n, replies, d = self.waiting[0]
            replies.append(reply)
            if len(replies) == n:
                self.waiting.pop(0)
                d.callback(replies)

def next_trip(conn=None):
    def done(_):
        global trips
        trips += 1
        reactor.callLater(0.0005, next_trip, conn)
    d = threads.deferToThread(in_thread) if mode == "thread" else conn.send(COMMANDS)
    d.addCallback(done)

def start():
    task.LoopingCall(work_tick).start(0.001)
    if mode == "thread":
        next_trip()
    elif mode == "reactor":
        protocol.ClientCreator(reactor, Resp).connectTCP("127.0.0.1", port).addCallback(next_trip)
    reactor.callLater(seconds, stop)

def stop():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"mode": mode, "trips": trips,
                      "cpu_s": ru.ru_utime + ru.ru_stime - t0[0], "sys_s": ru.ru_stime - t0[1],
                      "voluntary_switches": ru.ru_nvcsw - t0[2]}))
    reactor.stop()

ru = resource.getrusage(resource.RUSAGE_SELF)
t0 = (ru.ru_utime + ru.ru_stime, ru.ru_stime, ru.ru_nvcsw)
reactor.callWhenRunning(start)
reactor.run()
"""


def main() -> None:
    from crawlproj.redis.embedded import free_port, spawn_server

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work", type=int, default=4000,
                   help="loop iterations of the reactor's work each millisecond (4000: about 0.2 ms of CPU)")
    a = p.parse_args()
    port = free_port()
    proc = spawn_server(port, Path(tempfile.mkdtemp(prefix="roundtrip-")), appendonly=False)
    try:
        for rnd in range(a.repeat):
            runs = {}
            for mode in ("none", "thread", "reactor"):
                out = subprocess.run([sys.executable, "-c", CHILD, str(port), mode, str(a.seconds),
                                      str(a.work)], capture_output=True, text=True, check=True)
                runs[mode] = json.loads(out.stdout.strip().splitlines()[-1])
            base = runs["none"]["cpu_s"]
            for mode in ("thread", "reactor"):
                r = runs[mode]
                r["cpu_us_per_trip"] = round((r["cpu_s"] - base) / max(1, r["trips"]) * 1e6, 1)
            print(json.dumps({"round": rnd + 1, **runs}))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
