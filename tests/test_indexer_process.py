"""The crawl's indexer as a process of its own (crawlproj/search/process.py).

Real Redis server, real child processes, real tantivy index. The worker's
side is played by the test (or by a process the test kills): it takes the
indexer lock, starts the child with the lock's token, and the child writes
what is handed over, stops when told, leaves when its worker is gone or the
lock is another's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import redis as redis_lib
from scrapy.settings import Settings

from crawlproj.redis.keyspace import Keyspace
from crawlproj.search.document import Document
from crawlproj.search.handover import HandOver
from crawlproj.search.index import PageIndex
from crawlproj.search.indexer import IndexerLock
from crawlproj.search.process import IndexerChild, settings_order
from crawlproj.search.searcher import Searcher
from tests.e2e import ROOT

CRAWL = "proc"
T0 = 1_700_000_000.0


def settings(redis_url, tmp_path, **extra) -> Settings:
    s = Settings()
    s.setmodule("settings.base", priority="project")
    s.setdict({"REDIS_URL": redis_url, "CRAWL_ID": CRAWL, "INDEX_DIR": str(tmp_path / "index"),
               "INDEX_TICK": 0.1, "INDEX_LOCK_TTL": 2.0, "INDEX_IDLE_COMMIT": 0,
               "LOG_LEVEL": "INFO", **extra}, priority="cmdline")
    return s


def docs(n, word="walnut"):
    return [Document(f"http://h{i % 7}.example/{word}/{i}", f"page {i}", f"{word} text {i}", T0 + i, []).pack()
            for i in range(n)]


def indexed(tmp_path, word="walnut") -> int:
    index = PageIndex(tmp_path / "index")
    try:
        return Searcher(index).search(word).total
    finally:
        index.close()


def wait_until(check, seconds=60.0):
    """Poll check() until it holds; a bound on the polls, so that a test
    that cannot pass fails instead of hanging (nothing is timed)."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        time.sleep(0.05)
    pytest.fail(f"{check} never held")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_child_writes_what_is_handed_over_and_stops_when_told(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    lock = IndexerLock(r, ks, ttl=2.0)
    assert lock.hold()
    HandOver(r, ks).push(docs(300))
    reports = []
    child = IndexerChild(settings_order(settings(redis_url, tmp_path), CRAWL, lock.token), reports.append)
    try:
        # it renews the lock it was handed: another process cannot take it
        wait_until(lambda: HandOver(r, ks).waiting() == 0)
        other = IndexerLock(r, ks, ttl=2.0)
        wait_until(lambda: r.pttl(ks.indexer_lock) > 1900)  # renewed by the child
        assert not other.hold() and lock.holder() == lock.token
        # handed over after its last batch, then SIGTERM: written before it exits
        HandOver(r, ks).push(docs(40, "hazel"))
        assert child.stop() == 0
    finally:
        if child.running():
            child.proc.kill()
    assert HandOver(r, ks).waiting() == 0
    assert indexed(tmp_path) == 300 and indexed(tmp_path, "hazel") == 40
    assert r.get(ks.indexer_lock) is None  # released, not left to expire
    assert sum(b["written"] for b in reports) == 340
    assert sum(b["committed"] for b in reports) == 340


def test_a_child_stopped_before_its_first_tick_writes_what_is_waiting(redis_url, tmp_path):
    """A crawl shorter than the child's start-up: SIGTERM comes while it
    imports, before it ever held the index open."""
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    lock = IndexerLock(r, ks, ttl=2.0)
    assert lock.hold()
    HandOver(r, ks).push(docs(25))
    child = IndexerChild(settings_order(settings(redis_url, tmp_path), CRAWL, lock.token), print)
    assert child.stop() == 0  # at once: it has not even set its SIGTERM handler yet
    assert HandOver(r, ks).waiting() == 0 and indexed(tmp_path) == 25
    assert r.get(ks.indexer_lock) is None


def test_the_child_leaves_when_its_worker_is_killed(redis_url, tmp_path):
    """The worker is a process the test kills with SIGKILL: its indexer sees
    its parent gone, writes what is waiting, releases the lock, exits."""
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    HandOver(r, ks).push(docs(120))
    worker = subprocess.Popen(
        [sys.executable, "-c", """
import json, sys, time, redis
from crawlproj.redis.keyspace import Keyspace
from crawlproj.search.indexer import IndexerLock
from crawlproj.search.process import IndexerChild
order = json.loads(sys.stdin.readline())
lock = IndexerLock(redis.Redis.from_url(order["settings"]["REDIS_URL"]), Keyspace("proc", 1), 2.0)
assert lock.hold()
order["token"] = lock.token
import os; order["parent"] = os.getpid()
child = IndexerChild(order, lambda b: None)
print(child.pid, flush=True)
time.sleep(600)
"""], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    import json
    worker.stdin.write(json.dumps(settings_order(settings(redis_url, tmp_path), CRAWL, "")) + "\n")
    worker.stdin.close()
    child_pid = int(worker.stdout.readline())
    try:
        wait_until(lambda: HandOver(r, ks).waiting() == 0)
        assert alive(child_pid) and r.get(ks.indexer_lock) is not None
        HandOver(r, ks).push(docs(30, "hazel"))
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        wait_until(lambda: not alive(child_pid), 30)
    finally:
        if alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)
    assert HandOver(r, ks).waiting() == 0 and indexed(tmp_path, "hazel") == 30
    assert r.get(ks.indexer_lock) is None


def test_the_child_leaves_when_another_process_holds_the_lock(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    holder = IndexerLock(r, ks, ttl=30.0)
    assert holder.hold()
    HandOver(r, ks).push(docs(10))
    child = IndexerChild(settings_order(settings(redis_url, tmp_path), CRAWL, "stale-token"), print)
    try:
        wait_until(lambda: not child.running(), 30)
    finally:
        if child.running():
            child.proc.kill()
    assert child.returncode == 0
    assert HandOver(r, ks).waiting() == 10 and holder.holder() == holder.token
    assert not (tmp_path / "index").exists()


def test_the_child_rides_out_redis_out_of_reach(redis_server_factory, tmp_path):
    """Redis killed under it and started again (AOF: the lock and the list
    come back): the child logs the failed ticks and goes on writing."""
    server = redis_server_factory(appendonly=True)
    r = redis_lib.Redis.from_url(server.url)
    ks = Keyspace(CRAWL, 1)
    lock = IndexerLock(r, ks, ttl=5.0)
    assert lock.hold()
    HandOver(r, ks).push(docs(20))
    child = IndexerChild(settings_order(settings(server.url, tmp_path, INDEX_LOCK_TTL=5.0), CRAWL,
                                        lock.token), print)
    try:
        wait_until(lambda: HandOver(r, ks).waiting() == 0)
        server.kill()
        time.sleep(1.5)  # a dozen ticks fail meanwhile
        assert child.running()
        server.restart()
        r = redis_lib.Redis.from_url(server.url)
        HandOver(r, ks).push(docs(15, "hazel"))
        wait_until(lambda: HandOver(r, ks).waiting() == 0)
        assert child.running()
        assert child.stop() == 0
    finally:
        if child.running():
            child.proc.kill()
    assert indexed(tmp_path) == 20 and indexed(tmp_path, "hazel") == 15


def test_a_failing_child_says_why_in_one_line(redis_url, tmp_path):
    """An index directory that cannot be made: exit code 1, one line."""
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    lock = IndexerLock(r, ks, ttl=2.0)
    assert lock.hold()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    s = settings(redis_url, tmp_path, INDEX_DIR=str(blocker / "index"))
    child = subprocess.Popen([sys.executable, "-m", "crawlproj.search.process"], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    import json
    out, err = child.communicate(json.dumps(settings_order(s, CRAWL, lock.token)).encode(), timeout=60)
    assert child.returncode == 1
    lines = [x for x in err.decode().splitlines() if x.startswith("crawlproj:")]
    assert len(lines) == 1 and "Traceback" not in err.decode(), err.decode()


def test_started_by_hand_it_says_to_run_scrapy_index():
    run = subprocess.run([sys.executable, "-m", "crawlproj.search.process"], cwd=ROOT,
                         input=b"", capture_output=True, timeout=60)
    assert run.returncode == 2 and b"scrapy index" in run.stderr and b"Traceback" not in run.stderr


# -- the worker's side: IndexerExtension, its work() and leave() called as
# LockedWork calls them (in a thread of the worker; here, in the test's)

def extension(redis_url, tmp_path, **extra):
    from scrapy.utils.test import get_crawler

    from crawlproj.search.extension import IndexerExtension

    # no reactor runs here: whichever the test process has
    crawler = get_crawler(settings_dict=settings(redis_url, tmp_path, CRAWL_DATA_DIR=str(tmp_path / "data"),
                                                 TWISTED_REACTOR=None, **extra).copy_to_dict())
    crawler.stats.open_spider()
    return IndexerExtension.from_crawler(crawler), crawler.stats


def test_a_worker_starts_its_indexer_once_pages_are_handed_over(redis_url, tmp_path):
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    ext, stats = extension(redis_url, tmp_path)
    ext.work()
    assert ext.child is None and r.get(ks.indexer_lock) is None  # nothing to write: no process
    HandOver(r, ks).push(docs(30))
    ext.work()
    child = ext.child
    try:
        assert child is not None and child.running()
        assert r.get(ks.indexer_lock).decode() == ext.runner.lock.token
        wait_until(lambda: HandOver(r, ks).waiting() == 0)
        ext.work()  # renews the lock its child holds, starts no second one
        assert ext.child is child and child.running()
        ext.leave()
    finally:
        if child is not None and child.running():
            child.proc.kill()
    assert not child.running() and child.returncode == 0
    assert indexed(tmp_path) == 30 and r.get(ks.indexer_lock) is None
    assert stats.get_value("index/errors") is None


def test_with_index_process_off_the_worker_writes_in_its_own_threads(redis_url, tmp_path):
    # a real-time search session's indexer: no process of its own to wait for
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    ext, stats = extension(redis_url, tmp_path, INDEX_PROCESS=False)
    HandOver(r, ks).push(docs(30))
    ext.work()
    assert ext.child is None
    assert HandOver(r, ks).waiting() == 0 and indexed(tmp_path) == 30
    assert r.get(ks.indexer_lock).decode() == ext.runner.lock.token
    HandOver(r, ks).push(docs(12, "hazel"))
    ext.leave()
    assert HandOver(r, ks).waiting() == 0 and indexed(tmp_path, "hazel") == 12
    assert r.get(ks.indexer_lock) is None and stats.get_value("index/errors") is None


def indexing(redis_url, tmp_path, n):
    """A worker whose indexer process has written n pages handed over."""
    r = redis_lib.Redis.from_url(redis_url)
    ks = Keyspace(CRAWL, 1)
    ext, stats = extension(redis_url, tmp_path)
    HandOver(r, ks).push(docs(n))
    ext.work()
    wait_until(lambda: HandOver(r, ks).waiting() == 0)
    return r, ks, ext, stats


def test_a_worker_whose_indexer_died_writes_what_is_left_at_close(redis_url, tmp_path):
    r, ks, ext, stats = indexing(redis_url, tmp_path, 30)
    child = ext.child
    child.proc.kill()
    child.proc.wait()
    HandOver(r, ks).push(docs(12, "hazel"))
    ext.leave()  # the lock is still this worker's token: it writes in its own process
    assert stats.get_value("index/errors") == 1
    assert HandOver(r, ks).waiting() == 0 and indexed(tmp_path, "hazel") == 12
    assert r.get(ks.indexer_lock) is None


def test_a_worker_that_lost_the_lock_stops_its_indexer(redis_url, tmp_path):
    r, ks, ext, stats = indexing(redis_url, tmp_path, 5)
    child = ext.child
    try:
        r.set(ks.indexer_lock, "another:1:abcdef", px=30_000)  # its TTL ran out, another took it
        ext.work()
        wait_until(lambda: not child.running(), 30)
    finally:
        if child.running():
            child.proc.kill()
    assert child.returncode == 0 and r.get(ks.indexer_lock) == b"another:1:abcdef"
    ext.leave()
    assert r.get(ks.indexer_lock) == b"another:1:abcdef" and stats.get_value("index/errors") is None
