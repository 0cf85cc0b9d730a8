"""StoreCommit (crawlproj/stores/commit.py) on a real reactor, thread and
Redis server, in a child process (a reactor starts once per process): the
writes of several stores added in one reactor turn go in one pipeline; a
part whose command fails holds back every part's confirmation until a write
goes through, and the other parts' entries are not written again meanwhile."""

from __future__ import annotations

import json
import subprocess
import sys

SETUP = r"""
import json, logging, sys
import redis
from twisted.internet import reactor
from crawlproj.stores.commit import StoreCommit

client = redis.Redis.from_url(sys.argv[1])
sent = []   # the command names of each pipeline sent, in order

def names(pipe):
    return [args[0] for args, _ in pipe.command_stack]

make_pipeline = client.pipeline
def counting_pipeline(*args, **kwargs):   # the writer thread's pipelines
    pipe = make_pipeline(*args, **kwargs)
    execute = pipe.execute
    def counted(*a, **kw):
        sent.append(names(pipe))
        return execute(*a, **kw)
    pipe.execute = counted
    return pipe
client.pipeline = counting_pipeline

class Stats(dict):
    def inc_value(self, key, n=1):
        self[key] = self.get(key, 0) + n

def store_commit(stats):
    return StoreCommit(client, stats)
"""

PROBE = SETUP + r"""
logged = []
class Keep(logging.Handler):
    def emit(self, record):
        logged.append(record.getMessage())
logging.getLogger("crawlproj").addHandler(Keep())

def rpush_part(key):
    def queue(pipe, values):
        pipe.rpush(key, *values)
        return key
    def answer(token, replies):
        for r in replies:
            if isinstance(r, Exception):
                raise r
        return [token, int(replies[0])]
    return queue, answer

stats = Stats()
commit = store_commit(stats)
commit.commit.retry_delay = 0.2
results, confirmed = [], []
for key in ("a", "b", "c"):
    queue, answer = rpush_part(key)
    commit.part(key, queue, answer, on_result=results.append)

def turn1():  # three stores, one turn: one pipeline of three commands
    for key in ("a", "b", "c"):
        commit.add_confirmed(key, key + "1").addCallback(lambda _, k=key: confirmed.append(k + "1"))
    commit.add("c", "c2")
    reactor.callLater(0.3, turn2)

def turn2():  # b's key is not a list: the write fails, nothing is confirmed
    client.set("b", "not a list")
    for key in ("a", "b"):
        commit.add_confirmed(key, key + "3").addCallback(lambda _, k=key: confirmed.append(k + "3"))
    reactor.callLater(0.5, turn3)

def turn3():
    state["confirmed_while_failing"] = list(confirmed)
    client.delete("b")  # mended: the retry writes them
    reactor.callLater(0.5, done)

def done():
    d = commit.close()
    d.addCallback(lambda _: reactor.stop())

state = {}
reactor.callWhenRunning(turn1)
reactor.run()
print(json.dumps({"pipelines": [len(p) for p in sent], "results": results, "confirmed": confirmed,
                  "state": state, "stats": stats, "logged": logged,
                  "lists": {k: [v.decode() for v in client.lrange(k, 0, -1)] for k in "abc"}}))
"""


def test_one_pipeline_for_every_store_and_a_failing_store_holds_back_only_confirmations(redis_url):
    run = subprocess.run([sys.executable, "-c", PROBE, redis_url], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # the first turn: one pipeline, one command per store, c's two entries in one RPUSH
    assert out["pipelines"][0] == 3
    assert out["results"][:3] == [["a", 1], ["b", 1], ["c", 2]]
    assert sorted(out["confirmed"][:3]) == ["a1", "b1", "c1"]
    # while b's command fails, no write is confirmed, a's included
    assert out["state"]["confirmed_while_failing"] == out["confirmed"][:3]
    assert out["stats"]["stores/redis_errors"] >= 1
    # the writes' CPU in their thread, counted (what the stores cost off the reactor)
    assert out["stats"]["stores/thread_cpu_s"] > 0
    # the failure names the store it was for
    assert any("b: WRONGTYPE" in m for m in out["logged"]), out["logged"]
    # once mended, both are written and confirmed
    assert sorted(out["confirmed"][3:]) == ["a3", "b3"]
    assert out["lists"]["b"] == ["b3"]
    assert out["lists"]["c"] == ["c1", "c2"]
    # a's entry went through in the first failed write and was not pushed again
    # by the retries
    assert out["lists"]["a"] == ["a1", "a3"]
    assert out["stats"]["stores/redis_errors"] >= 2


CALLS = SETUP + r"""
def push(pipe, values):
    pipe.rpush("w", *values)
def pushed(token, replies):
    if isinstance(replies[0], Exception):
        raise replies[0]
def count(pipe, values):
    for v in values:
        pipe.incr("n:" + v)
def counted(token, replies):
    return [int(r) for r in replies]

commit = store_commit(Stats())
commit.commit.retry_delay = 0.3
commit.part("write", push, pushed)
commit.part("ask", count, counted)
out = {"answers": [], "failed": [], "confirmed": []}

def ask(value, when):
    d = commit.call("ask", value)
    d.addCallbacks(lambda a: out["answers"].append([value, a, when]),
                   lambda f: out["failed"].append([value, f.getErrorMessage()[:60], when]))

def turn1():  # a write and two questions: one round trip answers both
    commit.add_confirmed("write", "w1").addCallback(lambda _: out["confirmed"].append("w1"))
    ask("x", "turn1"); ask("x", "turn1")
    reactor.callLater(0.2, turn2)

def turn2():  # the write fails; the question asked with it is answered, at once
    client.set("w", "not a list")
    commit.add_confirmed("write", "w2").addCallback(lambda _: out["confirmed"].append("w2"))
    ask("y", "turn2")
    reactor.callLater(0.1, turn3)

def turn3():  # while writes fail: a question fails at once, never sent
    out["failing"] = commit.commit.failing
    out["y_answered"] = list(out["answers"])
    ask("z", "turn3")
    client.delete("w")
    reactor.callLater(0.6, turn4)

def turn4():  # mended: the write is retried and confirmed, questions answered
    ask("x", "turn4")
    client.set("n:bad", "text")
    reactor.callLater(0.2, turn5)

def turn5():  # a part that cannot answer fails its questions with its own error
    ask("bad", "turn5")
    reactor.callLater(0.2, done)

def done():
    try:
        out["sent"] = sent
        out["counts"] = {k.decode(): int(client.get(k)) for k in client.keys("n:*")
                         if k != b"n:bad"}
        out["w"] = [v.decode() for v in client.lrange("w", 0, -1)]
    finally:
        commit.close().addBoth(lambda _: reactor.stop())

reactor.callWhenRunning(turn1)
reactor.run()
print(json.dumps(out))
"""


def test_a_question_rides_the_stores_round_trip_and_fails_at_once_when_writes_fail(redis_url):
    run = subprocess.run([sys.executable, "-c", CALLS, redis_url], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # turn 1: the write and both questions in one pipeline, answered in order
    assert out["sent"][0] == ["RPUSH", "INCRBY", "INCRBY"]
    assert out["answers"][:2] == [["x", 1, "turn1"], ["x", 2, "turn1"]]
    # turn 2: asked with the write that failed, answered at once (before the
    # write's retry, 0.3 s later), and not asked again
    assert out["y_answered"][2] == ["y", 1, "turn2"]
    assert out["counts"]["n:y"] == 1
    # turn 3: asked while writes fail: failed at once, never sent
    assert out["failing"] is True
    assert out["failed"][0] == ["z", "Redis does not take this worker's writes now", "turn3"]
    assert "n:z" not in out["counts"]
    # the write itself was retried until it went through, then confirmed
    assert out["confirmed"] == ["w1", "w2"]
    assert out["w"] == ["w2"]
    # and questions are answered again
    assert out["answers"][3] == ["x", 3, "turn4"]
    # turn 5: a part that cannot answer fails its questions with its own error
    assert out["failed"][1][0] == "bad" and out["failed"][1][1].startswith("ask: "), out["failed"]
    assert sum(p.count("INCRBY") for p in out["sent"]) == 5   # x, x, y, x, bad
