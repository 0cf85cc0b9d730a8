"""Run the simulated web in a child process, for tests and benchmarks.

    with SimWebServer({"seed": 1, "hosts": 50, "pages": 500}, log_path=p) as sw:
        env = sw.env()            # http_proxy=... for a crawler subprocess
        ...                       # or meta={'proxy': sw.proxy_url}
        records = sw.wait_log(lambda recs: len(recs) >= 10)

The child is a real HTTP server on its own core; the calling process builds
the same SimWeb from the same spec (``sw.web``) to know what to expect.
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .model import SimWeb, with_clock
from .server import LOG_FLUSH_EVERY, read_log

__all__ = ["SimWebServer", "fetch"]


def fetch(proxy_url: str, url: str, method: str = "GET", headers: dict[str, str] | None = None,
          timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """One request through the proxy, redirects not followed:
    (status, headers with lower-case names, body)."""
    phost, _, pport = proxy_url.split("://", 1)[-1].rstrip("/").partition(":")
    conn = http.client.HTTPConnection(phost, int(pport or 80), timeout=timeout)
    try:
        conn.request(method, url, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def realtime(pid: int) -> bool:
    """Give the server real-time scheduling (SCHED_FIFO, the lowest priority)
    where the OS allows it (root, CAP_SYS_NICE). The server is the measuring
    instrument: its log's t0 and t1 are taken right after a read and a send,
    and under a loaded machine an ordinary process can be preempted for a
    scheduler slice in between, stamping a transfer's end tens of ms after the
    crawler has read it all (and a politeness gap that much short). The
    server waits on its sockets nearly all the time, so it takes little from
    the processes it measures. Elsewhere it runs as an ordinary process."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(1))
    except (AttributeError, OSError):
        return False
    return True


class SimWebServer:
    """Context manager running ``python -m crawlproj.simweb`` (server.main).

    spec: a generate()/from_graph() spec dict (see SimWeb.from_spec), or a
    SimWeb (its .spec is sent to the child and the object is reused as .web).
    log_path: request log file; None = a temporary file removed on exit.
    port: 0 = any free port (the child reports it).
    """

    def __init__(self, spec: dict[str, Any] | SimWeb, log_path: str | None = None, port: int = 0,
                 host: str = "127.0.0.1", cache_mb: int = 64, startup_timeout: float = 120.0):
        if isinstance(spec, SimWeb):
            self._web: SimWeb | None = spec
            self.spec = spec.spec
        else:
            self._web = None
            # The clock of a changing web is fixed here, so that the child
            # and self.web agree on it.
            self.spec = with_clock(dict(spec))
        self._tmpdir = None
        if log_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="simweb-")
            log_path = os.path.join(self._tmpdir, "requests.jsonl")
        self.log_path = str(log_path)
        self.host, self.port = host, port
        self.cache_mb = cache_mb
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None

    # ---- lifecycle ----------------------------------------------------------
    def start(self) -> SimWebServer:
        cmd = [sys.executable, "-m", "crawlproj.simweb", "--spec", json.dumps(self.spec),
               "--host", self.host, "--port", str(self.port), "--log", self.log_path,
               "--cache-mb", str(self.cache_mb), "--watch-stdin"]
        env = dict(os.environ)
        # The child must import this very package, wherever it comes from (a
        # checkout, site-packages, a Scrapyd egg): it gets this process's
        # import path.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # stdin is a pipe only we hold: if this process dies, the child sees
        # EOF and exits instead of serving forever.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        realtime(self.proc.pid)
        # Wait for the "listening" line without blocking forever on a child
        # that dies or hangs while building a big graph.
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.startup_timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                self.stop()
                raise RuntimeError("simweb server did not start in time")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                code = self.proc.wait()
                raise RuntimeError(f"simweb server exited with {code} before listening")
            line += chunk
        sel.close()
        info = json.loads(line.decode().splitlines()[0])
        self.port = info["port"]
        self.info = info
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the server flushes its log), wait, SIGKILL if needed."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdin, p.stdout):
            if f:
                f.close()
        return p.returncode

    def __enter__(self) -> SimWebServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    # ---- conveniences -------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def proxy_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def web(self) -> SimWeb:
        """The same SimWeb, built in this process (lazily: big graphs take
        seconds)."""
        if self._web is None:
            self._web = SimWeb.from_spec(self.spec)
        return self._web

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a crawler subprocess: http_proxy set, no_proxy cleared."""
        env = dict(os.environ if base is None else base)
        env.update(http_proxy=self.proxy_url, HTTP_PROXY=self.proxy_url, no_proxy="", NO_PROXY="")
        return env

    def fetch(self, url: str, method: str = "GET", headers: dict[str, str] | None = None,
              timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
        return fetch(self.proxy_url, url, method, headers, timeout)

    def read_log(self) -> list[dict[str, Any]]:
        return read_log(self.log_path)

    def settle_log(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The log once the server has written all it has: it flushes every
        LOG_FLUSH_EVERY seconds, so read until two reads three times that far apart
        agree. For after the crawlers have exited."""
        deadline = time.monotonic() + timeout
        recs = self.read_log()
        while time.monotonic() < deadline:
            time.sleep(3 * LOG_FLUSH_EVERY)
            again = self.read_log()
            if len(again) == len(recs):
                return again
            recs = again
        return recs

    def wait_log(self, predicate: Callable[[list[dict[str, Any]]], bool] | int,
                 timeout: float = 10.0) -> list[dict[str, Any]]:
        """Re-read the log until predicate(records) (or len >= an int) holds;
        returns the records either way after timeout."""
        if isinstance(predicate, int):
            n = predicate
            def predicate(recs):
                return len(recs) >= n
        deadline = time.monotonic() + timeout
        while True:
            recs = self.read_log()
            if predicate(recs) or time.monotonic() > deadline:
                return recs
            time.sleep(0.05)

