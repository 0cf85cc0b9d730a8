"""StoreCommit (crawlproj/stores/commit.py) on a real reactor, thread and
Redis server, in a child process (a reactor starts once per process): the
writes of several stores added in one reactor turn go in one pipeline; a
part whose command fails holds back every part's confirmation until a write
goes through, and the other parts' entries are not written again meanwhile."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, logging, sys
import redis
from twisted.internet import reactor
from crawlproj.stores.commit import StoreCommit

client = redis.Redis.from_url(sys.argv[1])
pipelines = []
make_pipeline = client.pipeline
def counting_pipeline(*args, **kwargs):
    pipe = make_pipeline(*args, **kwargs)
    execute = pipe.execute
    def counted(*a, **kw):
        pipelines.append(len(pipe))
        return execute(*a, **kw)
    pipe.execute = counted
    return pipe
client.pipeline = counting_pipeline

logged = []
class Keep(logging.Handler):
    def emit(self, record):
        logged.append(record.getMessage())
logging.getLogger("crawlproj").addHandler(Keep())

class Stats(dict):
    def inc_value(self, key, n=1):
        self[key] = self.get(key, 0) + n

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
commit = StoreCommit(client, stats)
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
print(json.dumps({"pipelines": pipelines, "results": results, "confirmed": confirmed,
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
