"""GroupCall (crawlproj/redis/groupcommit.py) on a real reactor and thread pool, in a
child process (a reactor starts once per process): the calls of one reactor
turn share one call of fn; after a failure, calls fail at once, without
reaching fn, until retry_delay has passed."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, threading, time
from twisted.internet import reactor
from crawlproj.redis.groupcommit import GroupCall

calls, answers = [], []
failing = threading.Event()

def fn(args):  # in a pool thread
    calls.append(list(args))
    if failing.is_set():
        raise ConnectionError("server out of reach")
    return [a * 10 for a in args]

gc = GroupCall(fn, retry_delay=0.5)

def ask(tag, arg):
    gc(arg).addCallbacks(lambda v: answers.append([tag, arg, v]),
                         lambda f: answers.append([tag, arg, "failed"]))

def turn1():  # three calls in one reactor turn: one call of fn
    for a in (1, 2, 3):
        ask("together", a)
    reactor.callLater(0.3, turn2)

def turn2():  # the server goes away: the batch fails, every page of it
    failing.set()
    ask("fails", 4)
    ask("fails", 5)
    reactor.callLater(0.2, turn3)

def turn3():  # within retry_delay of the failure: failed without asking
    ask("at once", 6)
    reactor.callLater(0.6, turn4)

def turn4():  # past retry_delay, the server back: asked again, answered
    failing.clear()
    ask("again", 7)
    reactor.callLater(0.3, reactor.stop)

reactor.callWhenRunning(turn1)
reactor.run()
print(json.dumps({"calls": calls, "answers": answers}))
"""


def test_one_call_per_turn_and_no_call_while_failing():
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["calls"] == [[1, 2, 3], [4, 5], [7]]
    assert out["answers"] == [["together", 1, 10], ["together", 2, 20], ["together", 3, 30],
                              ["fails", 4, "failed"], ["fails", 5, "failed"],
                              ["at once", 6, "failed"], ["again", 7, 70]]


CPU_PROBE = r"""
import json, time
from twisted.internet import reactor
from crawlproj.redis.groupcommit import GroupCall

class Stats(dict):
    def inc_value(self, key, n=1):
        self[key] = self.get(key, 0) + n

def burn(args):  # a test's work: CPU in the pool thread
    end = time.thread_time() + 0.2
    while time.thread_time() < end:
        pass
    return args

def wait(args):  # a round trip's wait: no CPU
    time.sleep(0.2)
    return args

stats = Stats()
burning, waiting = GroupCall(burn, name="burn", stats=stats), GroupCall(wait, name="wait", stats=stats)

def spin(until):  # the reactor thread busy meanwhile: not the calls' CPU
    while time.monotonic() < until:
        pass

def start():
    burning(1).addCallback(lambda _: waiting(2)).addCallback(lambda _: reactor.stop())
    spin(time.monotonic() + 0.1)

reactor.callWhenRunning(start)
reactor.run()
print(json.dumps(stats))
"""


def test_the_cpu_of_each_call_in_its_thread_is_counted():
    run = subprocess.run([sys.executable, "-c", CPU_PROBE], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    stats = json.loads(run.stdout.strip().splitlines()[-1])
    assert stats["burn/thread_cpu_s"] >= 0.2
    assert stats["wait/thread_cpu_s"] < 0.05
