"""The one place where crawlproj components get their Redis client.

REDIS_URL set        -> a client for that server (redis://, rediss://, user:password@, /db)
REDIS_CLUSTER true   -> a RedisCluster client seeded from REDIS_URL
REDIS_URL unset      -> the embedded server of CRAWL_DATA_DIR, started if needed,
                        unless REDIS_URL_REQUIRED (settings.cluster): refused

Clients return bytes (values are msgpack). A process has one client per
server, shared by every component that asks for it while any of them holds it
(get_redis); its connection pool holds one connection for each thread that
can use it at once. Nobody closes it: it lives as long as its holders.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from importlib import resources
from urllib.parse import urlsplit

import redis
import redis.cluster
from redis.exceptions import RedisClusterException
from scrapy.settings import BaseSettings, Settings

from crawlproj.errors import CrawlprojError
from crawlproj.redis.embedded import EmbeddedRedis

logger = logging.getLogger(__name__)

# While Redis keeps failing, say so again this often (seconds): one line per
# outage is easy to miss in a long log, one per try floods it.
STILL_FAILING_EVERY = 5.0

# Seconds a command may wait for its reply: far above any call of the
# crawl's (a sync script takes milliseconds), well below a user's patience
# with Ctrl-C.
SOCKET_TIMEOUT = 5.0


def embedded_restarter(settings):
    """For a worker on the embedded server (REDIS_URL unset): a function that
    starts the server again if it died; None when REDIS_URL names the server
    (someone else runs it)."""
    if settings.get("REDIS_URL") or _getbool(settings, "REDIS_CLUSTER"):
        return None
    server = EmbeddedRedis(settings.get("CRAWL_DATA_DIR"))
    return server.ensure_running


class RedisUnavailable(CrawlprojError):
    """Redis could not be reached or refused us; the message is one line."""


class RedisAuthError(RedisUnavailable):
    """Redis answered but wants credentials, or other ones than REDIS_URL gives."""


def lua_script(package: str, name: str) -> str:
    """The text of a Lua script shipped in package's lua/ folder, read as
    package data (so that it loads from a zipped egg under Scrapyd too)."""
    return resources.files(package).joinpath("lua").joinpath(name).read_text(encoding="utf-8")


def describe_url(url: str) -> str:
    """The url with any password (in the userinfo or a ?password= query) masked."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return "<invalid Redis URL>"
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            url = url.replace(netloc, f"{userinfo.split(':', 1)[0]}:***@{host}", 1)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)


def _reason(exc: BaseException) -> str:
    # "Error 111 connecting to 127.0.0.1:1. Connection refused." -> "Connection refused"
    text = re.sub(r"Error -?\d+ connecting to \S+\.\s+", "", str(exc).strip())
    text = " ".join(text.split()).rstrip(".")
    return text or type(exc).__name__


# Replies by which Redis refuses a write for good: waiting does not mend them
# (the crawl stops, docs/frontier.md "When Redis fails"). OOM: maxmemory
# reached with a noeviction policy; MISCONF: snapshots failing with
# stop-writes-on-bgsave-error; NOPERM: the worker's ACL user may not;
# CRAWLLOST: the crawl's state is not on the server (frontier/lua/sync.lua).
REFUSALS = {
    "OOM": "Redis is out of memory (maxmemory) and refuses writes",
    "MISCONF": "Redis refuses writes: it cannot save its data (MISCONF)",
    "NOPERM": "Redis refuses this worker's commands (ACL: NOPERM)",
    "CRAWLLOST": "the crawl's state is not on the Redis server: it restarted without "
                 "its data (no persistence) or was flushed",
}


class Refusal(str):
    """Why Redis refuses a write for good; ``code`` is the reply's code
    (OOM, MISCONF, NOPERM, CRAWLLOST)."""

    code: str

    def __new__(cls, code: str, text: str):
        self = super().__new__(cls, text)
        self.code = code
        return self


def refusal(exc: BaseException) -> Refusal | None:
    """Why Redis refuses a write for good, or None for a failure worth
    retrying (unreachable, timed out, loading, restarting)."""
    if not isinstance(exc, redis.ResponseError):
        return None
    text = " ".join(str(exc).split())
    # redis-py strips the codes it has a class for; inside a script (and in a
    # pipeline's message) the server's text says what it was
    if isinstance(exc, redis.exceptions.OutOfMemoryError) or "> 'maxmemory'" in text:
        code = "OOM"
    elif isinstance(exc, redis.exceptions.NoPermissionError) or any(
            words in text for words in ("ACL failure", "no permissions to run",
                                        "user executing the script can't run")):
        code = "NOPERM"  # a script's ACL failure comes as a plain error (Redis 7.0's words)
    else:
        code = next((c for c in REFUSALS if text.startswith(c) or f" {c} " in f" {text} "),
                    None)
    return None if code is None else Refusal(code, f"{REFUSALS[code]} ({text[:200]})")


class OutageLog:
    """What one worker says of a Redis outage: a line when it starts, one
    every STILL_FAILING_EVERY seconds while it lasts, one when it ends, and
    the failures in between counted (redis/failures/<source>), not logged:
    an outage of a minute is three lines, not one per page and store. Each
    source (a group commit, a per-page test) reports its failures and its
    successes; the outage ends when every source that failed works again."""

    def __init__(self, stats=None, every: float = STILL_FAILING_EVERY, clock=time.monotonic,
                 limit: float = 0.0, on_limit: Callable[[float], None] | None = None):
        self.stats = stats
        self.every = every
        self.clock = clock
        self.limit = limit          # seconds an outage may last (0: no limit) ...
        self.on_limit = on_limit    # ... before this is called, once, with its length
        self.failing: dict[str, str] = {}  # source -> its last error
        self.since: float | None = None
        self._said_at = 0.0
        self._failures = 0
        self._sources: set[str] = set()  # every source that failed in this outage

    def failed(self, source: str, error: str, retry: float | None = None) -> None:
        now = self.clock()
        self._failures += 1
        if self.stats is not None:
            self.stats.inc_value(f"redis/failures/{source}")
        self.failing[source] = error
        self._sources.add(source)
        if self.since is None:
            self.since = self._said_at = now
            again = f", retrying every {retry:g} s" if retry else ""
            logger.error("Redis call failed (%s%s): %s", source, again, error)
        elif now - self._said_at >= self.every:
            self._said_at = now
            logger.warning("Redis still failing after %.0f s (%s; %d failures): %s",
                           now - self.since, ", ".join(sorted(self.failing)), self._failures, error)
        if self.limit and now - self.since >= self.limit and self.on_limit is not None:
            on_limit, self.on_limit = self.on_limit, None
            on_limit(now - self.since)

    def ok(self, source: str) -> None:
        if not self.failing or self.failing.pop(source, None) is None or self.failing:
            return
        logger.info("Redis calls work again after %.0f s (%s; %d failures in between)",
                    self.clock() - self.since, ", ".join(sorted(self._sources)), self._failures)
        self.since, self._failures = None, 0
        self._sources.clear()


def _getbool(settings, name: str) -> bool:
    if hasattr(settings, "getbool"):  # scrapy.settings.Settings
        return settings.getbool(name)
    value = settings.get(name)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


# The process's clients, by (pid, server URL, cluster): one per server, alive
# while a component holds it. The pid keeps a forked child off its parent's
# sockets (two processes reading one connection's replies would mix them up).
_clients: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_clients_lock = threading.Lock()


def pool_size(settings) -> int:
    """Connections of a client's pool: one for each thread that may use it
    at once, the reactor's thread pool (REACTOR_THREADPOOL_MAXSIZE: the group
    commits, the per-page tests, deferToThread), the reactor thread (start-up
    and close) and the WARC writer's thread."""
    if not isinstance(settings, BaseSettings):
        settings = Settings({k: v for k, v in settings.items() if v is not None})
    return settings.getint("REACTOR_THREADPOOL_MAXSIZE") + 2


def get_redis(settings) -> redis.Redis | redis.cluster.RedisCluster:
    """The process's client for the crawl's Redis, shared (one per server),
    connected (checked with PING).

    ``settings`` is a Scrapy Settings object or any mapping with REDIS_URL,
    REDIS_CLUSTER, REDIS_URL_REQUIRED and CRAWL_DATA_DIR. Raises RedisUnavailable
    when the server cannot be reached, with the URL (password masked) and the
    reason, and CrawlprojError when REDIS_URL is needed and unset.
    """
    url = settings.get("REDIS_URL") or None
    cluster = _getbool(settings, "REDIS_CLUSTER")
    if url is None:
        if cluster:
            raise CrawlprojError("REDIS_CLUSTER is set but REDIS_URL is not: name a cluster node")
        if _getbool(settings, "REDIS_URL_REQUIRED"):
            raise CrawlprojError(
                "REDIS_URL is not set, and these settings (REDIS_URL_REQUIRED, as in "
                "settings.cluster) need the crawl's shared server: set REDIS_URL, e.g. "
                "redis://:PASSWORD@HOST:6379/0")
        url = EmbeddedRedis(settings.get("CRAWL_DATA_DIR")).ensure_running()
    # A URL query (e.g. ?socket_connect_timeout=30) overrides these defaults.
    # The connect timeout keeps an unroutable host from hanging the worker for
    # minutes; the read timeout bounds a call to a server that stopped
    # answering (paused, hung): the call fails and is retried, and a worker
    # told to stop is not held by a thread waiting on a dead socket.
    kwargs = {"decode_responses": False, "socket_connect_timeout": 10,
              "socket_timeout": SOCKET_TIMEOUT, "max_connections": pool_size(settings)}
    key = (os.getpid(), url, cluster)
    try:
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                if cluster:
                    # Construction already contacts the seed node to learn the slot map.
                    client = redis.cluster.RedisCluster.from_url(url, **kwargs)
                else:
                    # A thread finding every connection busy waits for one as
                    # long as a reply may take (a cluster's node pools do not
                    # wait). The client does not own its pool: a holder's
                    # close() leaves the others' connections alone.
                    client = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(
                        url, timeout=SOCKET_TIMEOUT, **kwargs))
                _clients[key] = client
        client.ping()
    except redis.AuthenticationError as e:
        raise _auth_error(url, e) from e
    except (redis.RedisError, RedisClusterException, OSError, ValueError) as e:
        raise RedisUnavailable(f"cannot reach Redis at {describe_url(url)}: {_reason(e)}") from e
    return client


def _auth_error(url: str, exc: BaseException) -> RedisAuthError:
    shown = describe_url(url)
    parts = urlsplit(url)
    if parts.password is None and "password=" not in parts.query:
        return RedisAuthError(f"Redis at {shown} requires authentication: give the password in "
                              "REDIS_URL (redis://:PASSWORD@host:port/db, or "
                              "redis://USER:PASSWORD@host:port/db)")
    return RedisAuthError(f"Redis at {shown} refused the credentials of REDIS_URL "
                          f"(authentication failed: {_reason(exc)})")
