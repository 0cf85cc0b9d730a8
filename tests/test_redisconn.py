"""get_redis: external URL, cluster, embedded default; one-line errors, masked
passwords; one client per server and process, shared."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import redis
import redis.cluster
from scrapy.settings import Settings

from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import (
    RedisAuthError,
    RedisUnavailable,
    describe_url,
    get_redis,
    refusal,
)
from crawlproj.redis.embedded import EmbeddedRedis, free_port


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@h:1/0", "redis://:***@h:1/0"),
        ("rediss://crawler:p%40ss@h:6380/2", "rediss://crawler:***@h:6380/2"),
        ("redis://crawler@h/0", "redis://crawler@h/0"),
        ("redis://h/0?password=pw&db=1", "redis://h/0?password=***&db=1"),
        ("unix:///run/redis.sock?password=pw", "unix:///run/redis.sock?password=***"),
    ],
)
def test_describe_url_masks_passwords(url, shown):
    assert describe_url(url) == shown


def test_unreachable_url_raises_one_line_with_masked_password():
    port = free_port()  # nothing listens there
    with pytest.raises(RedisUnavailable) as info:
        get_redis({"REDIS_URL": f"redis://crawler:s3cret@127.0.0.1:{port}/0"})
    msg = str(info.value)
    assert msg == f"cannot reach Redis at redis://crawler:***@127.0.0.1:{port}/0: Connection refused"
    assert isinstance(info.value, CrawlprojError)


def test_unreachable_cluster_url_raises_redis_unavailable():
    port = free_port()
    with pytest.raises(RedisUnavailable) as info:
        get_redis({"REDIS_URL": f"redis://:pw@127.0.0.1:{port}/0", "REDIS_CLUSTER": True})
    assert "\n" not in str(info.value) and ":***@" in str(info.value)
    assert "pw@" not in str(info.value)


def test_cluster_without_url_is_an_error(tmp_path):
    with pytest.raises(CrawlprojError, match="REDIS_URL"):
        get_redis({"REDIS_CLUSTER": "true", "CRAWL_DATA_DIR": str(tmp_path)})
    assert not (tmp_path / "redis").exists()  # nothing embedded was started


def test_redis_url_returns_bytes_client(redis_url, tmp_path):
    settings = Settings({"REDIS_URL": redis_url, "CRAWL_DATA_DIR": str(tmp_path)})
    r = get_redis(settings)
    assert isinstance(r, redis.Redis)
    r.set("k", "v")
    assert r.get("k") == b"v"
    assert get_redis(settings) is r  # one client per server, shared
    assert not (tmp_path / "redis").exists()  # an external URL starts nothing


def test_db_index_from_url(redis_server, redis_url):
    r = get_redis({"REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/3"})
    r.set(b"in-db-3", b"1")
    assert redis.Redis.from_url(redis_url).exists(b"in-db-3") == 0
    assert redis.Redis(port=redis_server.port, db=3).get(b"in-db-3") == b"1"
    r.flushdb()


@pytest.fixture
def secured(redis_server_factory):
    return redis_server_factory(
        extra={
            "requirepass": "topsecret",
            "user": ["crawler on >s3cret ~* &* +@all"],
        }
    )


def whoami(r: redis.Redis) -> str:
    name = r.acl_whoami()  # str or bytes, depending on redis-py version
    return name.decode() if isinstance(name, bytes) else name


def test_password_and_acl_user(secured):
    r = get_redis({"REDIS_URL": f"redis://:topsecret@127.0.0.1:{secured.port}/0"})
    assert whoami(r) == "default"
    r = get_redis({"REDIS_URL": f"redis://crawler:s3cret@127.0.0.1:{secured.port}/0"})
    assert whoami(r) == "crawler"
    r.set(b"k", b"v")
    assert r.get(b"k") == b"v"


@pytest.mark.parametrize("userinfo", ["", "crawler:wrong@", ":wrong@"])
def test_bad_credentials_say_authentication_masked(secured, userinfo):
    """The server was reached: the line says what it wants, not "cannot reach"."""
    url = f"redis://{userinfo}127.0.0.1:{secured.port}/0"
    with pytest.raises(RedisAuthError) as info:
        get_redis({"REDIS_URL": url})
    assert isinstance(info.value, RedisUnavailable)  # callers that catch that still do
    msg = str(info.value)
    if userinfo:
        assert msg.startswith(f"Redis at {describe_url(url)} refused the credentials of "
                              "REDIS_URL (authentication failed: ")
    else:
        assert msg == (f"Redis at {url} requires authentication: give the password in "
                       "REDIS_URL (redis://:PASSWORD@host:port/db, or "
                       "redis://USER:PASSWORD@host:port/db)")
    assert "\n" not in msg and "wrong" not in msg and "cannot reach" not in msg


def test_embedded_default(embedded_data_dir):
    r = get_redis(Settings({"REDIS_URL": None, "CRAWL_DATA_DIR": str(embedded_data_dir)}))
    url = EmbeddedRedis(embedded_data_dir).ensure_running()
    assert r.connection_pool.connection_kwargs["port"] == int(url.split(":")[-1].split("/")[0])
    r.set(b"k", b"v")
    # A second worker on the same data dir reaches the same server.
    assert get_redis({"CRAWL_DATA_DIR": str(embedded_data_dir)}).get(b"k") == b"v"


@pytest.mark.cluster
def test_cluster_client(redis_server_factory):
    node = redis_server_factory(
        appendonly=False,
        # An explicit bus port: the default (port + 10000) fails above port 55535.
        extra={
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-port": free_port(),
        },
    )
    c = node.client()
    c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    for _ in range(300):  # up to ~30 s
        if b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO"):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("single-node cluster never became ok")
    r = get_redis({"REDIS_URL": node.url, "REDIS_CLUSTER": "1"})
    assert isinstance(r, redis.cluster.RedisCluster)
    r.set(b"{p1}k", b"v")
    assert r.get(b"{p1}k") == b"v"
    r.close()


def test_refusals_that_waiting_cannot_mend_are_told_from_outages(redis_server_factory):
    """Out of memory, plain or inside a script or a pipeline, is a refusal
    (the crawl stops); a server that is gone or silent is an outage (the
    worker waits)."""
    server = redis_server_factory()
    c = get_redis({"REDIS_URL": server.url})
    c.config_set("maxmemory", "1")
    caught = []
    for call in (lambda: c.set("k", "v"),
                 lambda: c.eval("return redis.call('SET', KEYS[1], 'v')", 1, "k"),
                 lambda: c.pipeline(transaction=False).rpush("l", "x").execute()):
        with pytest.raises(redis.ResponseError) as e:
            call()
        caught.append(e.value)
    assert all(refusal(exc).startswith("Redis is out of memory") for exc in caught)
    c.config_set("maxmemory", "0")
    # a command the worker's ACL user may not run, plain, in a script, in a pipeline
    c.execute_command("ACL", "SETUSER", "w", "on", ">pw", "~*", "+@all", "-exists")
    w = get_redis({"REDIS_URL": server.url.replace("redis://", "redis://w:pw@")})
    caught = []
    for call in (lambda: w.exists("k"),
                 lambda: w.eval("return redis.call('EXISTS', KEYS[1])", 1, "k"),
                 lambda: w.pipeline(transaction=False).exists("k").execute()):
        with pytest.raises(redis.ResponseError) as e:
            call()
        caught.append(e.value)
    assert all(refusal(exc).startswith("Redis refuses this worker's commands") for exc in caught)
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command("NOSUCHCOMMAND")
    assert refusal(e.value) is None
    server.proc.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(redis.TimeoutError) as e:  # the read timeout ends the wait
            c.get("k")
    finally:
        server.proc.send_signal(signal.SIGCONT)
    assert refusal(e.value) is None
    server.kill()
    with pytest.raises(redis.ConnectionError) as e:
        c.get("k")
    assert refusal(e.value) is None


SHARED = r"""
import json, os, sys
from scrapy.utils.reactor import install_reactor
install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from crawlproj.addon import apply_table
from crawlproj.monitor.heartbeat import Heartbeat
from crawlproj.redis.client import get_redis
from crawlproj.stores.commit import StoreCommit

settings = Settings()
apply_table(settings)
settings.setdict({"REDIS_URL": sys.argv[1], "CRAWL_ID": "shared", "MONITOR_INTERVAL": 5,
                  "CRAWL_DATA_DIR": sys.argv[2]}, priority="cmdline")
crawler = get_crawler(settings_dict=settings.copy_to_dict())
beat, stores = Heartbeat.from_crawler(crawler), StoreCommit.of(crawler)
parent = beat.redis
out = {"same": stores.redis is parent and get_redis(settings) is parent,
       "pool": parent.connection_pool.max_connections,
       "parent_id": parent.client_id()}
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # the child asks for the crawl's client: its own, on connections of its own
    child = get_redis(settings)
    os.write(write, json.dumps({"child_is_parent": child is parent,
                                "child_id": child.client_id()}).encode())
    os._exit(0)
os.waitpid(pid, 0)
out.update(json.loads(os.read(read, 4096)))
out["parent_id_after"] = parent.client_id()   # the parent's connection is untouched
print(json.dumps(out))
"""


def test_components_of_a_crawler_share_one_client_and_a_fork_gets_its_own(redis_url, tmp_path):
    run = subprocess.run([sys.executable, "-c", SHARED, redis_url, str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["same"] is True
    assert out["pool"] == 10 + 2   # Scrapy's REACTOR_THREADPOOL_MAXSIZE, the reactor, WARC's
    assert out["child_is_parent"] is False
    assert out["child_id"] != out["parent_id"]
    assert out["parent_id_after"] == out["parent_id"]
