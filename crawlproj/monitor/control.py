"""Crawl control: pause, resume and stop every worker of a crawl.

The flag is written in every partition's control hash, where the frontier's
one script (its part crawlproj/monitor/lua/sync_control.lua) reads it each
time it hands out leases: a script touches its own partition only (one hash slot of a Redis
Cluster), so the crawl-wide flag is one field per partition, all written in
one pipeline, plus the crawl's record of the last command for the dashboard.

pause   no partition hands out leases; every worker finishes the downloads
        it has started, gives back the leases it had not started, and waits
        (polling at most once a second).
resume  leases are handed out again.
stop    every worker running when the stop is stamped closes gracefully and
        gives back its leases (finish reason "stopped"); a worker started
        after it (`scrapy crawl web` again, with the same CRAWL_ID) runs, so
        a stop racing a worker's start leaves that worker running or closed,
        never half. A stop also ends a pause: the crawl restarts running.
"""

from __future__ import annotations

from crawlproj.redis.client import lua_script
from crawlproj.redis.keyspace import Keyspace

PAUSE, STOP = "pause", "stop"
COMMANDS = ("pause", "resume", "stop")
CONTROL_LUA = lua_script("crawlproj.monitor", "control.lua")


def _fields(command: str) -> tuple[str, ...]:
    """control.lua's ARGV for command: the field stamped now, then those deleted."""
    if command == "pause":
        return (PAUSE,)
    if command == "resume":
        return ("", PAUSE, STOP)
    if command == "stop":
        return (STOP, PAUSE)
    raise ValueError(f"no control command {command!r}; one of {', '.join(COMMANDS)}")


def control(redis, keyspace: Keyspace, command: str) -> int:
    """Apply command to every partition of the crawl; returns the server ms
    it was stamped with, in every partition and in the crawl's record alike
    (the first partition's clock, read once)."""
    field, *deleted = _fields(command)
    at = int(redis.execute_command("EVAL", CONTROL_LUA, 1, keyspace.control(0),
                                   field, "", *deleted))
    pipe = redis.pipeline(transaction=False)
    for key in [keyspace.control(p) for p in range(1, keyspace.partitions)] + [
            keyspace.crawl_control]:
        pipe.execute_command("EVAL", CONTROL_LUA, 1, key, field, at, *deleted)
    pipe.execute()
    return at


def state(redis, keyspace: Keyspace) -> dict:
    """The crawl's control as last set: {"paused_at": ms or None,
    "stopped_at": ms or None}."""
    record = redis.hgetall(keyspace.crawl_control)
    paused, stopped = record.get(PAUSE.encode()), record.get(STOP.encode())
    return {"paused_at": int(paused) if paused else None,
            "stopped_at": int(stopped) if stopped else None}
