"""Pipelines sent to Redis by the reactor thread, on a non-blocking connection.

redis-py is blocking, so a worker's writes go through a thread
(crawlproj/redis/groupcommit.py); each hand-off wakes that thread on the other core
and passes the GIL back and forth around every socket call, which in a busy
worker costs more than the round trip itself (docs/benchmarks.md,
`bench/roundtrip_bench.py`). Made blocking on the reactor, a remote server's latency or
a stalled one's timeout would hold the whole worker; made here, nothing
waits. ReactorRedis sends a redis-py
pipeline's commands as they were queued and reads the replies with hiredis,
as redis-py reads them, and gives them as ``pipe.execute(raise_on_error=False)``
gives them: redis-py's response callbacks applied, an error reply as the
exception redis-py would make of it.

A connection lost, refused or silent for the client's socket_timeout fails
every pipeline waiting on it with redis-py's ConnectionError or TimeoutError,
as a blocking call would; the next pipeline connects again. Only a plain
redis.Redis over TCP or a Unix socket, speaking RESP3 as redis-py does by
default, is served (for_client): a Cluster client routes by slot, and TLS
needs its own transport; those stay on threads.
"""

from __future__ import annotations

from collections import deque

import redis
from hiredis import ProtocolError, Reader, pack_command
from redis._parsers import BaseParser
from twisted.internet import reactor
from twisted.internet.defer import Deferred, fail
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint, UNIXClientEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure

# Options redis-py's parse_response takes out before a response callback
_NOT_FOR_CALLBACKS = ("keys", "NEVER_DECODE", "EMPTY_RESPONSE")


class _Connection(Protocol):
    """Replies read in order; each pipeline sent waits for its number of them."""

    def __init__(self, owner: ReactorRedis):
        self.owner = owner
        self.reader = Reader(replyError=BaseParser.parse_error)
        self.waiting: deque = deque()   # [replies wanted, replies so far, Deferred, timer]
        self.lost: Failure | None = None

    def send(self, packed: bytes, n: int, timeout: float | None) -> Deferred:
        d = Deferred()
        timer = reactor.callLater(timeout, self._timed_out) if timeout else None
        self.waiting.append([n, [], d, timer])
        self.transport.write(packed)
        return d

    def dataReceived(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except ProtocolError as exc:
                self._drop(redis.ConnectionError(f"Protocol error from Redis: {exc}"))
                return
            if reply is False:
                return
            if not self.waiting:  # a reply nobody asked for: the replies would be misread
                self._drop(redis.ConnectionError("Redis sent a reply nobody asked for"))
                return
            pending = self.waiting[0]
            pending[1].append(reply)
            if len(pending[1]) == pending[0]:
                self.waiting.popleft()
                if pending[3] is not None and pending[3].active():
                    pending[3].cancel()
                pending[2].callback(pending[1])

    def _timed_out(self) -> None:
        self._drop(redis.TimeoutError("Timeout reading from socket"))

    def _drop(self, error: redis.RedisError) -> None:
        """Fail what waits with error, and the connection with it."""
        if self.lost is None:
            self.lost = Failure(error)
        self.transport.abortConnection()

    def connectionLost(self, reason=None) -> None:
        failure = self.lost or Failure(redis.ConnectionError(
            f"Connection closed by server: {reason.getErrorMessage() if reason else ''}".strip()))
        self.owner._lost(self)
        waiting, self.waiting = self.waiting, deque()
        for _, _, d, timer in waiting:
            if timer is not None and timer.active():
                timer.cancel()
            d.errback(failure)


class ReactorRedis:
    def __init__(self, client: redis.Redis):
        self.client = client
        self.encoder = client.get_encoder()
        self._connection: _Connection | None = None
        self._connecting: Deferred | None = None
        self._waiting: list[Deferred] = []   # for the connection being made

    @classmethod
    def for_client(cls, client) -> ReactorRedis | None:
        """One for client, or None when its pipelines must go through a thread."""
        if type(client) is not redis.Redis:
            return None
        pool = client.connection_pool
        if pool.connection_class not in (redis.Connection, redis.UnixDomainSocketConnection):
            return None
        kw = pool.connection_kwargs
        if kw.get("credential_provider") or kw.get("redis_connect_func") \
                or kw.get("protocol") not in (None, 3, "3"):
            return None
        return cls(client)

    def execute(self, pipe) -> Deferred:
        """Send pipe's commands (built on the reactor thread, not executed);
        fires with their replies, in order."""
        stack = list(pipe.command_stack)
        if not stack:
            return fail(ValueError("an empty pipeline"))
        encode = self.encoder.encode
        packed = b"".join(pack_command(tuple(encode(a) for a in args))
                          for args, _ in stack)
        callbacks = pipe.response_callbacks
        d = self._connected()
        d.addCallback(lambda conn: conn.send(packed, len(stack), self._timeout()))
        d.addCallback(_parsed, stack, callbacks)
        return d

    def close(self) -> None:
        if self._connection is not None:
            self._connection.transport.loseConnection()

    def _timeout(self) -> float | None:
        return self.client.connection_pool.connection_kwargs.get("socket_timeout")

    def _connected(self) -> Deferred:
        if self._connection is not None:
            d = Deferred()
            d.callback(self._connection)
            return d
        waiter = Deferred()
        if self._connecting is None:
            self._connecting = self._connect()
            self._connecting.addBoth(self._opened)
        self._waiting.append(waiter)
        return waiter

    def _connect(self) -> Deferred:
        kw = self.client.connection_pool.connection_kwargs
        timeout = kw.get("socket_connect_timeout") or kw.get("socket_timeout") or 30
        if self.client.connection_pool.connection_class is redis.UnixDomainSocketConnection:
            endpoint = UNIXClientEndpoint(reactor, kw["path"], timeout=timeout)
        else:
            host = kw.get("host") or "localhost"
            kind = TCP6ClientEndpoint if ":" in host else TCP4ClientEndpoint
            endpoint = kind(reactor, host, int(kw.get("port") or 6379), timeout=timeout)
        d = endpoint.connect(Factory.forProtocol(lambda: _Connection(self)))
        d.addCallback(self._handshake, kw)
        return d

    def _handshake(self, conn: _Connection, kw: dict) -> Deferred:
        """HELLO 3 (with AUTH and SETNAME) and SELECT, as redis-py starts a
        connection: RESP3 on the wire, which its response callbacks expect."""
        hello: tuple = ("HELLO", 3)
        if kw.get("password"):
            hello += ("AUTH", kw.get("username") or "default", kw["password"])
        if kw.get("client_name"):
            hello += ("SETNAME", kw["client_name"])
        commands = [hello]
        if kw.get("db"):
            commands.append(("SELECT", kw["db"]))
        encode = self.encoder.encode
        d = conn.send(b"".join(pack_command(tuple(encode(a) for a in c)) for c in commands),
                      len(commands), self._timeout())

        def checked(replies):
            for reply in replies:
                if isinstance(reply, Exception):
                    conn.transport.loseConnection()
                    raise reply
            return conn
        return d.addCallback(checked)

    def _opened(self, result):
        self._connecting = None
        waiters, self._waiting = self._waiting, []
        if isinstance(result, Failure):
            error = result.value
            if not isinstance(error, redis.RedisError):
                result = Failure(redis.ConnectionError(f"Error connecting to Redis: {error}"))
            for w in waiters:
                w.errback(result)
            return None
        self._connection = result
        for w in waiters:
            w.callback(result)
        return None

    def _lost(self, conn: _Connection) -> None:
        if self._connection is conn:
            self._connection = None


def _parsed(replies: list, stack: list, callbacks) -> list:
    """The replies as redis-py's pipeline gives them (parse_response)."""
    out = []
    for (args, options), reply in zip(stack, replies):
        if isinstance(reply, Exception):
            if "EMPTY_RESPONSE" in options:
                reply = options["EMPTY_RESPONSE"]
        else:
            callback = callbacks.get(args[0])
            if callback is not None:
                extra = {k: v for k, v in options.items() if k not in _NOT_FOR_CALLBACKS}
                reply = callback(reply, **extra)
        out.append(reply)
    return out
