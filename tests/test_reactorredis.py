"""ReactorRedis (crawlproj/redis/reactor.py) against a real server, on a real
reactor in a child process (a reactor starts once per process): a pipeline's
replies are what redis-py's own execute gives; a server that goes away, or
stops answering, fails what waits on it as a blocking call would, and the
next pipeline connects again; AUTH and the database of the URL are used."""

from __future__ import annotations

import json
import subprocess
import sys

import redis

from crawlproj.redis.reactor import ReactorRedis

CHILD = r"""
import json, os, signal, sys, tempfile
import redis
from twisted.internet import defer, protocol, reactor, task
from crawlproj.redis.embedded import free_port, spawn_server
from crawlproj.redis.reactor import ReactorRedis

out = {}
port = free_port()
home = tempfile.mkdtemp()
extra = {"requirepass": "s3cret"}
server = spawn_server(port, home, appendonly=False, extra=extra)
url = f"redis://:s3cret@127.0.0.1:{port}/3"
client = redis.Redis.from_url(url, socket_timeout=0.5)
io = ReactorRedis.for_client(client)

def build(pipe):
    pipe.set("k", "v", nx=True, get=True)
    pipe.set("plain", "x")
    pipe.rpush("list", b"a", b"b")
    pipe.hset("h", mapping={"f": 1, "g": "two"})
    pipe.hgetall("h")
    pipe.execute_command("EVALSHA", "0" * 40, 0)
    pipe.incr("list")                       # WRONGTYPE
    pipe.incrbyfloat("f", 1.25)
    pipe.get("missing")
    pipe.set("big", b"\xff" * (1 << 20))
    pipe.strlen("big")
    pipe.execute_command("EVAL", "return {1, 'two', {3}}", 0)
    return pipe

def shown(replies):
    return [[type(r).__name__, r if isinstance(r, (int, float, type(None))) else
             ({k.decode(): v.decode() for k, v in r.items()} if isinstance(r, dict) else
              (r.decode() if isinstance(r, bytes) else
               (repr(r) if isinstance(r, list) else None)))] for r in replies]

async def sleep(s):
    await task.deferLater(reactor, s, lambda: None)

async def main():
    try:
        out["reactor"] = shown(await io.execute(build(client.pipeline(transaction=False))))
        client.flushdb()
        out["blocking"] = shown(build(client.pipeline(transaction=False)).execute(raise_on_error=False))
        out["db3"] = client.dbsize() > 0 and redis.Redis(port=port, password="s3cret", db=0).dbsize() == 0
        # the server goes away: what waits fails, the next connects again
        server.kill(); server.wait()
        try:
            await io.execute(client.pipeline(transaction=False).ping())
        except Exception as exc:
            out["down"] = type(exc).__name__
        globals()["server"] = spawn_server(port, home, appendonly=False, extra=extra)
        out["back"] = shown(await io.execute(client.pipeline(transaction=False).set("again", 1).get("again")))
        # the server stops answering: a timeout after socket_timeout
        os.kill(server.pid, signal.SIGSTOP)
        started = reactor.seconds()
        try:
            await io.execute(client.pipeline(transaction=False).ping())
        except Exception as exc:
            out["paused"] = [type(exc).__name__, reactor.seconds() - started]
        os.kill(server.pid, signal.SIGCONT)
        out["resumed"] = shown(await io.execute(client.pipeline(transaction=False).get("again")))
        # a server that answers garbage: what waits fails with ConnectionError
        class Garbage(protocol.Protocol):
            def dataReceived(self, data):
                self.transport.write(b"?what\r\n")
        listening = reactor.listenTCP(0, protocol.Factory.forProtocol(Garbage), interface="127.0.0.1")
        odd = ReactorRedis.for_client(redis.Redis(port=listening.getHost().port))
        try:
            await odd.execute(redis.Redis().pipeline(transaction=False).ping())
        except Exception as exc:
            out["garbage"] = [type(exc).__name__, str(exc)[:40]]
        await listening.stopListening()
        # a server that sends a reply nobody asked for: the connection is
        # dropped before it can be taken for the next command's
        class Extra(protocol.Protocol):
            def dataReceived(self, data):
                self.transport.write(b"+OK\r\n" * data.count(b"*"))
                reactor.callLater(0.05, self.transport.write, b"+UNASKED\r\n")
        listening = reactor.listenTCP(0, protocol.Factory.forProtocol(Extra), interface="127.0.0.1")
        odd = ReactorRedis.for_client(redis.Redis(port=listening.getHost().port))
        first = await odd.execute(redis.Redis().pipeline(transaction=False).ping())
        await sleep(0.2)
        out["extra"] = [first, odd._connection is None]
        await listening.stopListening()
    except Exception as exc:
        out["error"] = repr(exc)
    finally:
        server.kill()
        reactor.stop()

reactor.callWhenRunning(lambda: defer.ensureDeferred(main()))
reactor.run()
print(json.dumps(out))
"""


def test_replies_failures_and_reconnection_as_redis_py_gives_them():
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert "error" not in out, out
    assert out["reactor"] == out["blocking"]
    kinds = [k for k, _ in out["reactor"]]
    assert kinds[5] == "NoScriptError" and kinds[6] == "ResponseError"
    assert out["reactor"][1] == ["bool", True] and out["reactor"][7] == ["float", 1.25]
    assert out["reactor"][10] == ["int", 1 << 20]
    assert out["db3"] is True                     # the URL's database, with its password
    assert out["down"] == "ConnectionError"
    assert out["back"] == [["bool", True], ["bytes", "1"]]
    assert out["paused"][0] == "TimeoutError" and 0.4 <= out["paused"][1] < 5
    assert out["resumed"] == [["bytes", "1"]]
    assert out["garbage"][0] == "ConnectionError" and "Protocol error" in out["garbage"][1]
    assert out["extra"] == [[False], True]   # (PING answered "+OK", not "+PONG")


def test_clients_it_cannot_serve_stay_on_threads():
    assert ReactorRedis.for_client(redis.Redis(port=1)) is not None
    assert ReactorRedis.for_client(redis.Redis(port=1, ssl=True)) is None
    assert ReactorRedis.for_client(redis.Redis(port=1, protocol=2)) is None
    assert ReactorRedis.for_client(redis.cluster.RedisCluster.__new__(redis.cluster.RedisCluster)) is None
