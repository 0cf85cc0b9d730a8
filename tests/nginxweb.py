"""Real sites served by a real web server: Debian's nginx on loopback, for tests.

Each site is a host name with a document root (real pages, e.g. Debian's
Python manual in /usr/share/doc/python3.11/html) and optional nginx
directives of its own (headers, aliases). nginx listens on one free loopback
port and is the crawl's HTTP proxy: a request line with an absolute URI
(``GET http://docs.python.test/ HTTP/1.1``) picks its server by that host, so
URLs carry the sites' own names, no name is ever resolved, and nothing leaves
the machine. The access log is JSON, one line a request, read into the
simulated web's record format (t0, t1, host, path, status, ua), so that
crawlproj.simweb.checks judges politeness and duplicates from the server's
own log.

``.ci/run`` installs nginx-light and python3.11-doc and sets
REAL_WEB_TESTS=required, where a missing one fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from crawlproj.redis.embedded import free_port
from tests.loopback import ProxyWeb

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")
REQUIRED = os.environ.get("REAL_WEB_TESTS") == "required"

# t1 is when nginx logged the request (after the last byte went out); t0 is
# t1 less $request_time (from the first byte read), both in ms.
LOG_FORMAT = ("'{\"t1\":$msec,\"rt\":$request_time,\"host\":\"$host\",\"uri\":\"$request_uri\","
              "\"status\":$status,\"ua\":\"$http_user_agent\",\"bytes\":$body_bytes_sent}'")


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def require_real_web(python_docs: bool = True) -> None:
    """Skip (fail in CI) when nginx or Debian's Python manual is missing."""
    missing = []
    if nginx_binary() is None:
        missing.append("nginx (Debian: nginx-light)")
    if python_docs and not (PYTHON_DOCS / "library" / "json.html").is_file():
        missing.append(f"{PYTHON_DOCS} (Debian: python3.11-doc)")
    if missing:
        message = "real-web tests need " + " and ".join(missing)
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)


class Site:
    """One host: its document root and extra directives for its server block."""

    def __init__(self, host: str, root: str | os.PathLike, directives: str = ""):
        self.host, self.root, self.directives = host, Path(root), directives


class NginxWeb(ProxyWeb):
    """nginx serving ``sites`` on 127.0.0.1, as an HTTP proxy; a context manager.

    ``records`` (settle_log()) are the access log's lines: t0, t1, host,
    path (the request URI as sent), status, ua, bytes. Unknown hosts get 404.
    """

    def __init__(self, sites: list[Site], workdir: str | os.PathLike):
        self.sites = sites
        self.dir = Path(workdir)
        self.port = free_port()
        self.log_path = self.dir / "logs" / "access.jsonl"
        self.proc: subprocess.Popen | None = None

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}{path}"

    def _config(self) -> str:
        d = self.dir
        servers = [f"""
  server {{
    listen 127.0.0.1:{self.port} default_server;
    server_name _;
    return 404;
  }}"""]
        for site in self.sites:
            servers.append(f"""
  server {{
    listen 127.0.0.1:{self.port};
    server_name {site.host};
    root {site.root};
    {site.directives}
  }}""")
        temp = "\n".join(f"  {kind}_temp_path {d}/tmp/{kind};"
                         for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # as root, nginx's workers would run as nobody and meet the tests'
        # private (0700) temporary directories with 403s
        user = "user root;\n" if os.geteuid() == 0 else ""
        return f"""daemon off;
{user}master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  sendfile on;
  keepalive_timeout 30;
  server_tokens off;
{temp}
  log_format crawl escape=json {LOG_FORMAT};
  access_log {self.log_path} crawl;
{''.join(servers)}
}}
"""

    def start(self) -> NginxWeb:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed")
        for sub in ("logs", "tmp"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        conf = self.dir / "nginx.conf"
        conf.write_text(self._config())
        self.proc = subprocess.Popen(
            [binary, "-c", str(conf), "-p", str(self.dir), "-e", str(self.dir / "logs" / "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx did not start: {self.proc.stderr.read().decode(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("nginx did not listen within 20 s") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: the log is flushed
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def settle_log(self) -> list[dict]:
        records = []
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return records
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            records.append({"t0": r["t1"] - r["rt"], "t1": r["t1"], "host": r["host"], "path": r["uri"],
                            "status": r["status"], "ua": r["ua"], "bytes": r["bytes"]})
        return records

    read_log = settle_log
