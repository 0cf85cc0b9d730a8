"""Fixtures shared by crawlproj's tests: real Redis-protocol servers, no fakes.

redis_server           session-wide server (AOF on) with .url .port .dir .proc,
                       .kill() (SIGKILL) and .restart() for fault injection
redis_url              url of that server, FLUSHALLed (and restarted if a test
                       killed it) before each test; db 0, as Redis Cluster wants
redis_server_factory   make(**spawn_server options) -> a private RedisServer,
                       stopped after the test (e.g. requirepass, cluster mode)
embedded_data_dir      a CRAWL_DATA_DIR whose embedded server, if a test (or a
                       subprocess) starts one, is stopped after the test

SERVER_TESTS_ONLY=1 keeps only the tests that use one of these servers (or
test_cluster's): .ci/run's passes with another server first on PATH test the
servers, and the rest (parsers, the simulated web, settings) would only repeat.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import redis

from crawlproj.redis.embedded import EmbeddedRedis, _pid_alive, _wait_exit, free_port, spawn_server

SERVER_FIXTURES = {"redis_server", "redis_server_factory", "embedded_data_dir", "cluster_url"}


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("SERVER_TESTS_ONLY"):
        return
    uses = [bool(SERVER_FIXTURES & set(getattr(it, "fixturenames", ()))) for it in items]
    config.hook.pytest_deselected(items=[it for it, u in zip(items, uses) if not u])
    items[:] = [it for it, u in zip(items, uses) if u]


class RedisServer:
    """A foreground server on loopback that tests may kill and restart."""

    def __init__(self, directory: str | os.PathLike, port: int | None = None, **options):
        self.dir = Path(directory)
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.options = options  # appendonly=, extra= for spawn_server
        self.proc = spawn_server(self.port, self.dir, **options)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def client(self, **kwargs) -> redis.Redis:
        return redis.Redis.from_url(self.url, **kwargs)

    def kill(self) -> None:
        """SIGKILL: no AOF fsync, as in a crash (appendfsync everysec may lose ~1s)."""
        self.proc.kill()
        self.proc.wait()

    def restart(self) -> None:
        """Start again on the same port and dir (reloading the AOF); wait for PING."""
        if self.alive:
            self.kill()
        self.proc = spawn_server(self.port, self.dir, **self.options)

    def stop(self) -> None:
        if self.alive:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.kill()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis-session"))
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    if not redis_server.alive:  # an earlier test killed it without restarting
        redis_server.restart()
    with redis_server.client() as c:
        c.flushall()
    return redis_server.url


@pytest.fixture
def redis_server_factory(tmp_path):
    servers: list[RedisServer] = []

    def make(**options) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(servers)}", **options)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def _force_stop_embedded(data_dir: Path) -> None:
    server = EmbeddedRedis(data_dir)
    try:
        server.stop(timeout=10)
    except Exception:
        pass
    # If stop failed or the state file was lost, the pid file still names the
    # daemon: SIGKILL it, but only if it runs in this data dir's redis/, where
    # a server chdirs to and nothing else runs. (Its executable's name says
    # nothing: Debian's redis-server is a link to redis-check-rdb.)
    pids = []
    try:
        pids.append(int(json.loads(server.state_file.read_text())["pid"]))
    except Exception:
        pass
    try:
        pids.append(int(server.pid_file.read_text()))
    except Exception:
        pass
    for pid in pids:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == str(server.dir) and _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            _wait_exit(pid, 10)


@pytest.fixture(scope="session")
def _embedded_dirs():
    """Session safety net: every embedded data dir handed out is stopped at the end."""
    dirs: list[Path] = []
    yield dirs
    for d in dirs:
        _force_stop_embedded(d)


@pytest.fixture
def embedded_data_dir(tmp_path, _embedded_dirs) -> Path:
    data_dir = tmp_path / "crawl-data"
    _embedded_dirs.append(data_dir)
    yield data_dir
    _force_stop_embedded(data_dir)


# The checkout's own data dir, where a command run from the project root with
# no CRAWL_DATA_DIR keeps its embedded server. A test must not leave one
# there: the server outlives it, and tests running side by side (pytest -n)
# would share it.
CHECKOUT_DATA_DIR = Path(__file__).resolve().parent.parent / ".crawlproj"


def _checkout_server_started() -> float | None:
    try:
        return float(json.loads((CHECKOUT_DATA_DIR / "redis" / "server.json").read_text())["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pytest_sessionstart(session):
    session.config._checkout_server = _checkout_server_started()


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the controller looks once all have ended
    started = _checkout_server_started()
    if started is not None and started != session.config._checkout_server:
        _force_stop_embedded(CHECKOUT_DATA_DIR)
        session.config.get_terminal_writer().line(
            f"a test started an embedded server in {CHECKOUT_DATA_DIR} (stopped now): "
            "give its commands a CRAWL_DATA_DIR of their own", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
