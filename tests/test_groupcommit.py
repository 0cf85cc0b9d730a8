"""GroupCommit (crawlproj/redis/groupcommit.py) on a real reactor and thread pool, in
a child process (a reactor starts once per process): what one turn adds goes
in one write; a write that fails is retried with its entries in front, and
with replay on, with the entries written in the last REPLAY_WINDOW seconds
before them (a server that died may not have them in its AOF); a confirmed
entry's Deferred fires once it is written; close() waits for the last write,
or gives up after its timeout while the server stays out of reach."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, sys, threading
from twisted.internet import reactor
from crawlproj.redis.groupcommit import GroupCommit

replay = sys.argv[1] == "replay"
writes, events = [], []
failing = threading.Event()

def write(payload):  # in a pool thread
    if failing.is_set():
        writes.append(["failed"] + list(payload))
        raise ConnectionError("server out of reach")
    writes.append(list(payload))

gc = GroupCommit(write, "probe", retry_delay=0.3, replay=replay)

def turn1():  # two entries in one turn: one write
    gc.add("a")
    gc.add("b")
    reactor.callLater(0.2, turn2)

def turn2():  # the server goes away
    failing.set()
    gc.add_confirmed("c").addCallback(lambda _: events.append("c written"))
    reactor.callLater(0.5, turn3)

def turn3():  # back: the retry writes what failed (and, with replay, a and b first)
    failing.clear()
    reactor.callLater(0.5, turn4)

def turn4():  # closing while the server is away: given up after the timeout
    failing.set()
    gc.add("d")
    gc.close(timeout=0.5).addCallback(lambda _: (events.append("closed"), reactor.stop()))

reactor.callWhenRunning(turn1)
reactor.run()
print(json.dumps({"writes": writes, "events": events, "idle": gc.idle}))
"""


def probe(mode: str) -> dict:
    run = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def test_a_failed_write_is_retried_with_what_was_written_just_before():
    out, log = probe("replay")
    writes = [w for w in out["writes"] if w[0] != "failed"]
    assert writes[:2] == [["a", "b"], ["a", "b", "c"]]
    assert out["events"] == ["c written", "closed"]
    # d, and a, b, c written again first: the server that went away may have lost them
    assert "giving up at close: 4 entries not written" in log
    assert out["idle"]


def test_without_replay_only_what_failed_is_written_again():
    out, log = probe("plain")
    writes = [w for w in out["writes"] if w[0] != "failed"]
    assert writes[:2] == [["a", "b"], ["c"]]
    assert out["writes"][1] == ["failed", "c"]
    assert out["events"] == ["c written", "closed"]
    assert "giving up at close: 1 entries not written" in log
