"""The sync script's control part (crawlproj/monitor/lua/sync_control.lua):
CRAWLLOST, and pause and stop as the frontier's lease hand-out sees them,
through the composed script (crawlproj.frontier.frontier.Frontier) on a real
server."""

from __future__ import annotations

import time

import pytest
import redis as redis_lib

from crawlproj.frontier.frontier import Batch
from crawlproj.monitor import control
from tests.test_monitor import _frontier


def test_a_paused_crawl_hands_out_no_lease_and_a_resumed_one_does(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r)
    at = control.control(r, f.keyspace, "pause")
    res = f.sync({0: Batch(lease=2)})[0]
    assert res.leased == [] and res.paused == at and res.queued == 4
    assert control.state(r, f.keyspace) == {"paused_at": at, "stopped_at": None}
    control.control(r, f.keyspace, "resume")
    res = f.sync({0: Batch(lease=2)})[0]
    assert len(res.leased) == 2 and res.paused == 0


def test_a_pause_still_sends_expired_leases_back(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, urls=2)
    f.lease_ttl_ms = 1  # the leases below expire at once
    assert len(f.sync({0: Batch(lease=2)})[0].leased) == 2
    control.control(r, f.keyspace, "pause")
    time.sleep(0.01)  # past the 1 ms deadline, on the server's clock too
    res = f.sync({0: Batch(lease=1)})[0]
    assert res.expired == 2 and res.leased == [] and res.queued == 2


def test_every_sync_carries_the_stop_stamp_and_a_stop_leases_on(redis_url):
    """A stop is news for the workers running when it was given, which read
    its stamp from any sync's answer (frontier/sync.py); it is no pause."""
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r)
    assert f.sync({0: Batch()})[0].stopped == 0
    at = control.control(r, f.keyspace, "stop")
    res = f.sync({0: Batch(lease=2)})[0]
    assert res.stopped == at and res.paused == 0 and len(res.leased) == 2


def test_a_flushed_crawl_is_refused_not_taken_for_an_empty_one(redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, urls=1)
    r.flushall()
    with pytest.raises(redis_lib.ResponseError, match="CRAWLLOST"):
        f.sync({0: Batch(lease=100)})


def test_a_partition_without_the_dues_record_is_lost_and_nothing_is_written(redis_url):
    """The DUE's record marks a partition as the crawl's: without it the
    call is refused before any write, even of URLs to enqueue."""
    r = redis_lib.Redis.from_url(redis_url)
    f = _frontier(r, "lost", urls=2)
    r.delete(f.keyspace.prefix(0) + "due")
    before = {k: r.dump(k) for k in r.keys("*")}
    with pytest.raises(redis_lib.ResponseError, match="CRAWLLOST"):
        f.sync({0: Batch(enqueue=[f.entry("n.ex", "http://n.ex/", 0.0, b"x")], lease=1)})
    assert {k: r.dump(k) for k in r.keys("*")} == before
