"""The simulated web over HTTP: an HTTP/1.1 forward proxy on loopback.

A crawler with ``http_proxy=http://127.0.0.1:PORT`` (or ``meta['proxy']``)
sends ``GET http://h0001.example/path HTTP/1.1``; this server answers it from
the SimWeb instead of forwarding it.  Origin-form requests (``GET /path`` with
a ``Host:`` header) are answered the same way.  CONNECT gets 405 (https is not
simulated); an unknown host gets 502, as a real proxy answers a failed DNS
lookup.

Plain asyncio Protocol (no framework, no streams) because the server must
never be the bottleneck of a crawler benchmark: responses are cached as ready
bytes in an LRU, and the per-request work is one dict lookup and one write.

Every request becomes one JSON line in the request log:
``{"t0": arrival, "t1": finish, "conn": connection id, "method", "host",
"path", "status", "bytes": body length, "ua": User-Agent}`` plus
``"aborted": true`` when the client went away first.  t0 is when the full
request head had arrived, t1 when the kernel had accepted the last byte of
the response; both are time.time() so other processes can compare them.

On a web with change processes (spec change_dist), page responses also carry
Date, ETag and Last-Modified (on the simulated HTTP calendar, change.py),
conditional GETs (If-None-Match, else If-Modified-Since, RFC 9110 §13.2.2)
are answered 304 when the version held is current, and the page's record
gets ``"v": version served``.
"""

from __future__ import annotations

import argparse
import asyncio
import email.utils
import itertools
import json
import math
import os
import signal
import time
import traceback
from collections import OrderedDict
from typing import Any

from crawlproj.errors import CrawlprojError

from .change import ChangeClock
from .model import LM_NOW, REASONS, TEXT, Response, SimWeb, norm_host

__all__ = ["SimWebProxy", "read_log", "run", "main"]

MAX_HEAD = 16 * 1024        # longer request heads get 431
MAX_BODY = 1024 * 1024      # request bodies are read and discarded, up to this
LOG_FLUSH_EVERY = 0.1       # seconds; readers see finished requests within ~0.2 s


def read_log(path: str) -> list[dict[str, Any]]:
    """Records of a request log, in the order they finished.  A partly
    written last line (server still running) is ignored."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


class _Log:
    """Buffered JSON-lines writer flushed by a timer (a flush per request
    would cost more than serving it)."""

    def __init__(self, path: str | None):
        self.f = open(path, "a", encoding="utf-8") if path else None
        self.lines: list[str] = []

    def add(self, rec: dict[str, Any]) -> None:
        if self.f:
            self.lines.append(json.dumps(rec, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        if self.f and self.lines:
            self.f.write("".join(self.lines))
            self.lines.clear()
            self.f.flush()

    def close(self) -> None:
        self.flush()
        if self.f:
            self.f.close()
            self.f = None


def not_modified(headers: dict[str, str], etag: str, last_modified: float | None,
                 now: float) -> bool:
    """Whether a conditional GET gets 304 (RFC 9110 §13.2.2): If-None-Match
    decides when present (weak comparison, '*' matches); otherwise
    If-Modified-Since, when the resource has a trustworthy Last-Modified
    (Unix seconds) and the date is valid and not after `now`."""
    inm = headers.get("if-none-match")
    if inm is not None:
        for tag in inm.split(","):
            tag = tag.strip()
            if tag == "*" or tag.removeprefix("W/") == etag:
                return True
        return False
    ims = headers.get("if-modified-since")
    if ims is None or last_modified is None:
        return False
    since = ChangeClock.parse_http_date(ims)
    return since is not None and since <= now and last_modified <= since


_HEAD_304 = b"HTTP/1.1 304 Not Modified\r\nServer: simweb\r\n"


def _head(status: int, ctype: str, length: int | None, location: str | None = None,
          headers: tuple = ()) -> bytes:
    """Status line and headers, without Connection and the final CRLF. No
    Content-Length when length is None or headers have one."""
    loc = f"Location: {location}\r\n" if location else ""
    more = "".join(f"{k}: {v}\r\n" for k, v in headers)
    if length is not None and not any(k.lower() == "content-length" for k, _ in headers):
        more = f"Content-Length: {length}\r\n" + more
    return (f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\nServer: simweb\r\n"
            f"Content-Type: {ctype}\r\n{loc}{more}").encode("latin-1")


# A streamed response (model.Response.stream) sends a chunk every this many
# seconds: a drip, one byte; an endless body or head, every 10 ms, 16 x
# STREAM_CHUNK bytes, as long as the client takes them.
STREAM_EVERY = 0.2
STREAM_CHUNK = 64 * 1024

_KEEP = b"Connection: keep-alive\r\n\r\n"
_BUSY = b"busy: come back later\n"
_CLOSE = b"Connection: close\r\n\r\n"


class ServeError(CrawlprojError):
    """The simulated web cannot be served (its port is taken); one line."""


class SimWebProxy:
    """Serves a SimWeb.  ``port = await proxy.start(host, port)``, then
    ``await proxy.close()``; or use ``run()`` / the command line."""

    def __init__(self, web: SimWeb, log_path: str | None = None, cache_bytes: int = 64 << 20):
        self.web = web
        self.log = _Log(log_path)
        # (host, path) -> (status, head, body, expires, latency, validators,
        # stream); validators is (version, ETag, Last-Modified text and Unix
        # seconds, LM mode) for pages of a web with change processes, else
        # None; stream is always None here (streamed responses are not cached).
        self.cache: OrderedDict[tuple[str, str],
                                tuple[int, bytes, bytes, float, float, Any, str | None]] = OrderedDict()
        self.cache_bytes = cache_bytes
        self._cached = 0
        self._ids = itertools.count(1)
        self.conns: set[_Conn] = set()
        self.requests = 0
        self.busy_served: dict[str, int] = {}  # host -> 503s answered (SimWeb.busy)
        self._server: asyncio.AbstractServer | None = None
        self._flusher: asyncio.Task | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(lambda: _Conn(self), host, port, backlog=1024)
        except OSError as exc:
            raise ServeError(f"the simulated web cannot listen on {host}:{port}: "
                             f"{os.strerror(exc.errno) if exc.errno else exc}"
                             f"{' (--port 0 picks a free port)' if port else ''}") from None
        self._flusher = asyncio.create_task(self._flush_loop())
        return self._server.sockets[0].getsockname()[1]

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(LOG_FLUSH_EVERY)
            self.log.flush()

    async def close(self) -> None:
        if self._server:
            self._server.close()
        for c in list(self.conns):
            if c.tr:
                c.tr.close()
        for _ in range(3):  # let connection_lost callbacks log what was in flight
            await asyncio.sleep(0)
        if self._flusher:
            self._flusher.cancel()
        self.log.close()

    def respond(self, host: str, path: str, now: float, headers: dict[str, str]
                ) -> tuple[int, bytes, bytes, float, int | None, str | None]:
        """(status, head, body, latency, version served or None, stream) of
        GET http://host/path, cached. On a web with change processes, a
        page's head is completed with Date, ETag and Last-Modified, and the
        answer is 304 when the request's validators match; stream says how a
        trap host's response is sent (Response.stream), None at once."""
        if path != "/robots.txt" and self.web.busy(host):
            # a busy host: its first page requests are answered 503, counted here
            # (the model answers a request alike whenever it comes)
            n = self.busy_served.get(host, 0)
            if n < self.web.busy(host):
                self.busy_served[host] = n + 1
                h = self.web.host_id(host)
                return 503, _head(503, TEXT, len(_BUSY), None), _BUSY, self.web._latency[h], None, None
        e = self._entry(host, path, now)
        val = e[5]
        if val is None:
            return e[0], e[1], e[2], e[4], None, e[6]
        version, etag, lm_text, lm, mode = val
        clock = self.web.clock
        day = clock.day(now)
        date = clock.date_text(day)
        now_s = math.floor(clock.date_seconds(day))
        if mode == LM_NOW:
            lm_text, lm = date, None  # a dynamic page: If-Modified-Since means nothing
        extra = (f"Date: {date}\r\nETag: {etag}\r\n"
                 + (f"Last-Modified: {lm_text}\r\n" if lm_text else "")).encode("latin-1")
        if not_modified(headers, etag, lm, now_s):
            return 304, _HEAD_304 + extra, b"", e[4], version, None
        return e[0], e[1] + extra, e[2], e[4], version, None

    def _entry(self, host: str, path: str, now: float
               ) -> tuple[int, bytes, bytes, float, float, Any, str | None]:
        key = (host, path)
        hit = self.cache.get(key)
        if hit is not None and hit[3] > now:
            self.cache.move_to_end(key)
            return hit
        try:
            r: Response = self.web.respond(host, path, now)
        except Exception:  # a model bug must not take the server down
            traceback.print_exc()
            r = Response(500, TEXT, b"simweb: internal error\n", expires=0.0)
        h = self.web.host_id(host)
        latency = self.web._latency[h] if h is not None else 0.0
        endless = r.stream in ("endless", "endless_head")
        head = _head(r.status, r.content_type, None if endless else len(r.body), r.location,
                     r.headers)
        val = None
        if r.version is not None:
            lm = None if r.last_modified is None else email.utils.formatdate(r.last_modified, usegmt=True)
            val = (r.version, r.etag, lm, r.last_modified, self.web._lm_mode[h])
        entry = (r.status, head, r.body, r.expires, latency, val, r.stream)
        if r.stream:
            return entry  # sent as it goes, never cached
        size = len(head) + len(r.body) + 200
        if size < self.cache_bytes // 16:
            if hit is not None:
                self._cached -= len(hit[1]) + len(hit[2]) + 200
            self.cache[key] = entry
            self.cache.move_to_end(key)
            self._cached += size
            while self._cached > self.cache_bytes:
                _, old = self.cache.popitem(last=False)
                self._cached -= len(old[1]) + len(old[2]) + 200
        return entry


class _Conn(asyncio.Protocol):
    """One client connection.  Requests are answered strictly in order (a
    delayed response holds back pipelined ones, as HTTP/1.1 requires)."""

    def __init__(self, srv: SimWebProxy):
        self.srv = srv
        self.tr: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False         # a response is being delayed or drained
        self.closing = False      # we decided to close after the current response
        self.timer: asyncio.TimerHandle | None = None
        self.pending: dict[str, Any] | None = None   # record awaiting t1
        self.id = 0

    # ---- asyncio callbacks ------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]
        self.id = next(self.srv._ids)
        self.srv.conns.add(self)
        # high=0: pause_writing/resume_writing tell exactly when the kernel
        # has taken every byte, which is the finish time we log.
        self.tr.set_write_buffer_limits(high=0)

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.buf += data
        if not self.busy:
            self._process()
        elif len(self.buf) > MAX_HEAD + MAX_BODY:
            self.tr.close()  # flood while we are busy: drop the client

    def resume_writing(self) -> None:
        if self.pending is not None and self.timer is None:  # not streaming (_stream)
            self._finished()

    def connection_lost(self, exc: Exception | None) -> None:
        self.srv.conns.discard(self)
        if self.timer is not None:  # still sleeping out the host's latency
            self.timer.cancel()
            self.timer = None
        if self.pending is not None:
            if not self.closing:
                self.pending["aborted"] = True
            self._finished(resume=False)
        self.closing = True

    # ---- request handling -------------------------------------------------
    def _process(self) -> None:
        while not self.busy and not self.closing and self.buf:
            buf = self.buf
            end = buf.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEAD:
                if end > MAX_HEAD or len(buf) > MAX_HEAD:
                    self._error(time.time(), 431, "", "")
                return
            t0 = time.time()
            lines = bytes(buf[:end]).split(b"\r\n")
            parts = lines[0].split(b" ")
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
                del buf[:end + 4]
                self._error(t0, 400, "", "")
                return
            method = parts[0].decode("latin-1")
            target = parts[1].decode("latin-1")
            headers = {}
            for line in lines[1:]:
                k, sep, v = line.partition(b":")
                if not sep or not k or k.strip() != k:
                    del buf[:end + 4]
                    self._error(t0, 400, "", target, method)
                    return
                headers[k.lower().decode("latin-1")] = v.strip().decode("latin-1")
            if "transfer-encoding" in headers:  # chunked request bodies: not for a crawler
                del buf[:end + 4]
                self._error(t0, 501, "", target, method)
                return
            clen = headers.get("content-length", "0")
            if not clen.isdigit() or int(clen) > MAX_BODY:
                del buf[:end + 4]
                self._error(t0, 400, "", target, method)
                return
            if len(buf) < end + 4 + int(clen):
                return  # wait for the body
            del buf[:end + 4 + int(clen)]
            conn = headers.get("connection", "") + "," + headers.get("proxy-connection", "")
            conn = conn.lower()
            keep = ("close" not in conn) if parts[2] == b"HTTP/1.1" else ("keep-alive" in conn)
            ua = headers.get("user-agent", "")
            if method == "CONNECT":
                self._error(t0, 405, target.split(":")[0].lower(), "", method, ua)
                return
            if target[:7].lower() == "http://":
                rest = target[7:]
                cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
                host, path = norm_host(rest[:cut]), rest[cut:] or "/"
                if path[0] == "?":
                    path = "/" + path
            elif target.startswith("/"):
                host, path = norm_host(headers.get("host", "")), target
            else:
                self._error(t0, 400, "", target, method, ua)
                return
            path = path.split("#", 1)[0]
            if method not in ("GET", "HEAD"):
                self._error(t0, 405, host, path, method, ua, keep)
                continue
            status, head, body, latency, version, stream = self.srv.respond(host, path, t0, headers)
            rec = {"t0": t0, "t1": 0.0, "conn": self.id, "method": method, "host": host,
                   "path": path, "status": status, "bytes": len(body), "ua": ua}
            if version is not None:
                rec["v"] = version
            if stream:
                self._stream(rec, stream, head + _CLOSE, body if method == "GET" else b"")
                return
            data = head + (_KEEP if keep else _CLOSE) + (body if method == "GET" else b"")
            if latency > 0:
                self.busy = True
                self.pending = rec  # logged as aborted if the client leaves first
                self.timer = asyncio.get_running_loop().call_later(
                    latency, self._send_delayed, rec, data, keep)
                return
            self._send(rec, data, keep)

    def _stream(self, rec: dict[str, Any], kind: str, head: bytes, body: bytes) -> None:
        """Send a hostile response (Response.stream) until it is sent or the
        client leaves; the connection closes after it."""
        self.busy = self.closing = True
        self.pending = rec  # logged when the connection ends
        self.srv.requests += 1
        loop = asyncio.get_running_loop()
        if kind == "drip":
            self.tr.write(head)
            rest = iter(body)
        elif kind == "drip_head":
            rest = iter(head + body)
        else:
            rest = None
        if kind == "endless_head":
            self.tr.write(head.split(b"\r\n", 1)[0] + b"\r\n")
        elif kind == "endless":
            self.tr.write(head + body)
        filler = b"X-Filler: " + b"a" * 100 + b"\r\n" if kind == "endless_head" else b"a"
        filler *= STREAM_CHUNK // len(filler)

        def step() -> None:
            self.timer = None
            if self.tr is None or self.tr.is_closing():
                return
            if rest is not None:
                byte = next(rest, None)
                if byte is None:
                    self.tr.close()
                    return
                self.tr.write(bytes((byte,)))
            elif kind != "silent" and self.tr.get_write_buffer_size() < 4 * STREAM_CHUNK:
                self.tr.write(filler * 16)  # up to 100 MB/s, as fast as the client reads
            self.timer = loop.call_later(STREAM_EVERY if rest is not None else 0.01, step)
        self.timer = loop.call_later(STREAM_EVERY, step)

    def _send_delayed(self, rec: dict[str, Any], data: bytes, keep: bool) -> None:
        self.timer = None
        self._send(rec, data, keep)
        if not self.busy:
            self._process()

    def _send(self, rec: dict[str, Any], data: bytes, keep: bool) -> None:
        self.srv.requests += 1
        self.tr.write(data)
        self.pending = rec
        if not keep:
            self.closing = True
            self.tr.close()  # flushes first; connection_lost then finishes rec
        if self.tr.get_write_buffer_size():
            self.busy = True  # resume_writing or connection_lost finishes rec
        elif self.pending is not None:
            self._finished(resume=False)

    def _finished(self, resume: bool = True) -> None:
        rec, self.pending = self.pending, None
        rec["t1"] = time.time()
        self.srv.log.add(rec)
        self.busy = False
        if resume and not self.closing:
            self._process()

    def _error(self, t0: float, status: int, host: str, path: str, method: str = "",
               ua: str = "", keep: bool = False) -> None:
        """Small text answer; the connection is closed unless keep (405 after
        a well-formed request)."""
        body = f"simweb: {status} {REASONS.get(status, '')}\n".encode()
        head = _head(status, TEXT, len(body))
        if status == 405:
            head += b"Allow: GET, HEAD\r\n"
        rec = {"t0": t0, "t1": 0.0, "conn": self.id, "method": method, "host": host,
               "path": path, "status": status, "bytes": len(body), "ua": ua}
        if not keep:
            self.buf.clear()
        self._send(rec, head + (_KEEP if keep else _CLOSE) + body, keep)


# ---------------------------------------------------------------------------
# Running it
# ---------------------------------------------------------------------------
def _event_loop_policy() -> None:
    try:  # only when already installed; never a dependency
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


def run(web: SimWeb, host: str = "127.0.0.1", port: int = 8899, log_path: str | None = None,
        cache_mb: int = 64, on_ready=None, watch_stdin: bool = False) -> None:
    """Serve until SIGTERM/SIGINT, then flush the log and return.
    on_ready(port) is called once the socket accepts connections.
    watch_stdin: also stop when stdin reaches EOF, i.e. when the parent that
    holds the other end of the pipe dies without stopping us."""
    _event_loop_policy()

    async def main() -> None:
        if web.traps is not None:
            web.traps.prepare()  # bombs and big pages: seconds the event loop must not stall
        proxy = SimWebProxy(web, log_path, cache_mb << 20)
        bound = await proxy.start(host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if watch_stdin:
            def on_stdin() -> None:
                if not os.read(0, 4096):
                    loop.remove_reader(0)
                    stop.set()
            loop.add_reader(0, on_stdin)
        if on_ready:
            on_ready(bound)
        await stop.wait()
        await proxy.close()

    asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    """``python -m crawlproj.simweb --spec JSON [--port 0] [--log F]``;
    prints one JSON line {"event": "listening", "port": ...} on stdout."""
    p = argparse.ArgumentParser(prog="python -m crawlproj.simweb")
    p.add_argument("--spec", required=True, help="spec as JSON text, or @file.json")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", default=None, help="request log (JSON lines)")
    p.add_argument("--cache-mb", type=int, default=64)
    p.add_argument("--watch-stdin", action="store_true", help="exit when stdin closes (parent died)")
    a = p.parse_args(argv)
    spec = a.spec
    if spec.startswith("@"):
        with open(spec[1:], encoding="utf-8") as f:
            spec = f.read()
    web = SimWeb.from_spec(json.loads(spec))

    def ready(port: int) -> None:
        info = {"event": "listening", "host": a.host, "port": port, "pid": os.getpid(),
                "hosts": len(web.hosts), "pages": web.n_nodes}
        if web.changing:
            info["change_epoch"] = web.spec["change_epoch"]
        print(json.dumps(info), flush=True)

    run(web, a.host, a.port, a.log, a.cache_mb, on_ready=ready, watch_stdin=a.watch_stdin)

