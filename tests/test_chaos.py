"""Chaos: the frontier outlives its server's hiccups (docs/frontier.md, "When
Redis fails").

Real `scrapy crawl web` workers crawl the simulated web on a real Redis
server while the test hurts the server or a worker; what was fetched, how
often and when is read from the simulated web's own request log, never from
the crawler. The faults:

* Redis killed, down longer than FRONTIER_LEASE_TTL, restarted from its AOF;
* Redis paused (SIGSTOP) for 20 s, and a worker interrupted meanwhile;
* Redis killed and a worker told to stop (SIGTERM) while it is down;
* Redis restarted empty (no persistence), and Redis out of memory: the crawl
  stops, once, with one clear message;
* a worker stopped (SIGSTOP) past its leases;
* the embedded server killed: the worker starts it again.

The claims, for each: every reachable page fetched (for the stop cases: the
workers end, and a worker started afterwards on the same crawl fetches every
page left: nothing was lost), no two requests to one host at once, and no
page fetched twice unless its first fetch began before the workers could know
of the fault: before it, or within the longest a worker goes without a round
trip to Redis while it holds leases (LONGEST_SLEEP; STALLED more when the
server hangs instead of refusing connections). Such a page was leased before
the fault, and its end could not be recorded before its lease expired.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import datetime, timezone

import pytest

from crawlproj.frontier.sync import LONGEST_SLEEP
from crawlproj.redis.groupcommit import STALLED
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from settings import base
from tests import slowrobots
from tests.e2e import Workers, stat

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

WEB = {"seed": 18, "hosts": 40, "pages": 700, "page_bytes": 1500, "latency_ms": [10, 20],
       "crawl_delay_fraction": 0.0, "p500": 0.0}
TTL = 4.0
SETTINGS = {"FRONTIER_DELAY_FACTOR": 0.5, "RETRY_TIMES": 0, "FRONTIER_LEASE_TTL": TTL,
            "CONCURRENT_REQUESTS": 8}
STALE_UA = "crawlproj-test stopped"


@pytest.fixture
def crawls():
    """The Workers of a test: none outlives it, whatever failed."""
    made: list[Workers] = []
    yield made
    for workers in made:
        workers.kill_all()


def start_crawl(crawls, sw, url, tmp_path, crawl_id, n=2, **settings):
    seeds = sw.web.seeds(2)
    reachable = sw.web.reachable(seeds, obey_robots=True)
    workers = Workers(sw, url, tmp_path, seeds, crawl_id, {**SETTINGS, **settings})
    crawls.append(workers)
    workers.start(n)
    # a third of the web fetched: the crawl is well under way at the fault
    sw.wait_log(len(reachable) // 3, timeout=120)
    return workers, reachable


def twice_after(records, fault_at: float) -> list[str]:
    """URLs fetched more than once although their first fetch began after the
    workers knew of the fault (fault_at: the fault, plus the time a worker may
    take to find out): nothing excuses the second."""
    first: dict[str, float] = {}
    for r in sorted(records, key=lambda r: r["t0"]):
        first.setdefault(checks.url_of(r), r["t0"])
    counts = checks.fetch_counts(records)
    return sorted(u for u, n in counts.items() if n > 1 and first[u] >= fault_at)


def assert_whole_and_polite(sw, reachable, known_at, excused=frozenset(), sent_late=()):
    """known_at: when every worker knew of the fault; excused: URLs another
    log proves were in flight then; sent_late: requests of the web's log that
    another log proves were under way at the fault, which overlaps may name."""
    records = sw.settle_log()
    counts = checks.fetch_counts(records)
    assert set(counts) == reachable, (
        f"missing {sorted(reachable - set(counts))[:5]} of {len(reachable)}")
    overlaps = [o for o in checks.overlaps(records) if o[1] not in sent_late and o[2] not in sent_late]
    assert overlaps == [], overlaps[:3]
    late = [u for u in twice_after(records, known_at) if u not in excused]
    assert not late, f"fetched twice, first fetch after the fault: {late[:5]}"
    return records


def finish_with_a_new_worker(workers, sw, reachable, known_at):
    """A worker started on the crawl after the others ended fetches every
    page they left: nothing they held was lost (their leases expire, their
    URLs go back to their queues)."""
    time.sleep(TTL + 0.5)
    (last,) = workers.start(1, seeds=False)
    assert last.wait(300) == 0, workers.log(len(workers.procs) - 1)[-3000:]
    return assert_whole_and_polite(sw, reachable, known_at)


def errors_in(log: str, text: str) -> int:
    return sum(1 for line in log.splitlines() if text in line)


def worker_lines(log: str, text: str) -> int:
    """Lines of the worker's own process: its indexer, a process of its own
    with a client of its own, says its own outage ("(indexer")."""
    return sum(1 for line in log.splitlines() if text in line and "(indexer" not in line)


# -- Redis down, paused, restarted ---------------------------------------------


def test_redis_down_longer_than_the_lease_ttl(redis_server_factory, tmp_path, crawls):
    """Redis killed and restarted from its AOF after 2 TTLs: the workers wait,
    say so every few seconds without a busy loop, drop the leases that
    expired meanwhile instead of fetching them, and finish the crawl."""
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, server.url, tmp_path, "down")
        fault_at = time.time()
        server.kill()
        down = 2 * TTL + 4
        time.sleep(down)
        server.restart()
        assert workers.wait(300) == [0, 0]
        records = assert_whole_and_polite(sw, reachable, fault_at + LONGEST_SLEEP)
        assert [r for r in records if r["t0"] > fault_at + down], "no crawl after the restart"
        for i in (0, 1):
            log = workers.log(i)
            assert worker_lines(log, "Redis call failed (") == 1  # one line when it starts,
            # naming the first source to fail (whichever it was); the end names them all
            ended = re.findall(r"Redis calls work again after \d+ s \(([^;]*);", log)
            assert any("frontier" in e.split(", ") for e in ended), log[-3000:]
            assert "Redis still failing after" in log  # said again while it lasts
            # one try a second (retry_delay) while it lasts, however many
            # entries are added meanwhile; no busy loop
            assert stat(log, "frontier/redis_errors") <= down + 4


@pytest.mark.slow
def test_redis_paused_for_20_seconds(redis_server_factory, tmp_path, crawls):
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, server.url, tmp_path, "paused")
        fault_at = time.time()
        server.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(20)
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert workers.wait(300) == [0, 0]
        # a paused server is told from a slow one after STALLED seconds: a
        # download handed out before that may have its end unrecorded
        assert_whole_and_polite(sw, reachable, fault_at + LONGEST_SLEEP + STALLED)
        for i in (0, 1):
            log = workers.log(i)
            # a paused server answers nothing: the read timeout tells it
            assert worker_lines(log, "Redis call failed") == 1
            assert "Redis still failing after" in log  # said again while it lasts
            assert worker_lines(log, "Redis calls work again after") == 1


def test_ctrl_c_ends_a_worker_while_redis_is_paused(redis_server_factory, tmp_path, crawls):
    """A worker whose Redis calls hang (the server paused) still ends on
    Ctrl-C, before the server answers again; its URLs are not lost."""
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, server.url, tmp_path, "pausedint", n=1)
        fault_at = time.time()
        server.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(1.0)
            Workers.signal(workers.procs[0], signal.SIGINT)
            workers.procs[0].wait(60)  # raises if it does not end while Redis is paused
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert "Dumping Scrapy stats" in workers.log(0)
        finish_with_a_new_worker(workers, sw, reachable, fault_at + LONGEST_SLEEP + STALLED)


def test_sigterm_ends_a_worker_while_redis_is_down(redis_server_factory, tmp_path, crawls):
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, server.url, tmp_path, "downterm", n=1)
        fault_at = time.time()
        server.kill()
        time.sleep(1.0)
        Workers.signal(workers.procs[0], signal.SIGTERM)
        workers.procs[0].wait(60)  # raises if the worker does not end
        assert "Dumping Scrapy stats" in workers.log(0)
        server.restart()
        finish_with_a_new_worker(workers, sw, reachable, fault_at + LONGEST_SLEEP)


def test_a_worker_stops_when_redis_is_silent_past_the_outage_limit(redis_server_factory, tmp_path,
                                                                    crawls):
    """REDIS_OUTAGE_LIMIT: Redis killed and not restarted; the worker stops
    once the outage has lasted that long, with exit status 5, and its URLs
    are not lost (a worker started when the server is back finishes)."""
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, server.url, tmp_path, "silent", n=1,
                                         REDIS_OUTAGE_LIMIT=3)
        fault_at = time.time()
        server.kill()
        assert_each_stopped_once(workers, "Redis has not answered for", "redis_unreachable", 5,
                                 "Redis did not answer for REDIS_OUTAGE_LIMIT")
        assert worker_lines(workers.log(0), "Redis call failed") == 1
        server.restart()
        finish_with_a_new_worker(workers, sw, reachable, fault_at + LONGEST_SLEEP)


def test_ctrl_c_while_the_crawl_starts_ends_the_worker(redis_url, tmp_path, crawls):
    """Scrapy stops the reactor without closing the spider when Ctrl-C comes
    while the crawl starts: no thread a store started may keep the process."""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        for i in range(2):
            (tmp_path / str(i)).mkdir()
            workers = Workers(sw, redis_url, tmp_path / str(i), sw.web.seeds(2), f"early{i}",
                              SETTINGS)
            crawls.append(workers)
            (worker,) = workers.start(1)
            while "Frontier opened" not in workers.log(0) and worker.poll() is None:
                time.sleep(0.005)
            Workers.signal(worker, signal.SIGINT)
            worker.wait(60)  # raises if the worker does not end


# -- Redis refuses: the crawl stops, once, losing nothing ------------------------


def assert_each_stopped_once(workers, reason: str, finish: str, status: int, what: str) -> None:
    """Every worker ends with the exit status of its failure's class, having
    said why once, and its last line says so."""
    for p in workers.procs:
        assert p.wait(60) == status  # raises if a worker does not end
    for i in range(len(workers.procs)):
        log = workers.log(i)
        assert errors_in(log, f"Stopping the crawl (finish reason {finish})") == 1, log[-3000:]
        assert reason in log
        assert f"'finish_reason': '{finish}'" in log
        assert log.strip().splitlines()[-1] == (
            f"crawlproj: the crawl stopped on an error: {what} (finish reason {finish}); the log "
            f"says what failed (exit status {status})")


def test_redis_restarted_empty_stops_the_crawl(redis_server_factory, tmp_path, crawls):
    """The server comes back without the crawl: each worker stops with exit
    status 3, says the crawl must be restored or seeded again (not that its
    URLs go back to their queues: there are none), and writes nothing into
    the empty server (no page metadata, links, worker records)."""
    server = redis_server_factory(appendonly=False)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, _ = start_crawl(crawls, sw, server.url, tmp_path, "empty")
        server.kill()
        time.sleep(0.5)
        server.restart()  # no AOF: the crawl's state is gone
        assert_each_stopped_once(workers, "the crawl's state is not on the Redis server",
                                 "redis_lost", 3, "the crawl's state is gone from Redis")
        logs = workers.log(0) + workers.log(1)
        assert "DUE not configured" not in logs
        assert "go back to their queues" not in logs and "seed the crawl anew" in logs
        with server.client() as c:
            assert c.keys("*") == []


def test_redis_out_of_memory_stops_the_crawl_and_loses_nothing(redis_server_factory, tmp_path, crawls):
    """Every write refused: each worker stops with exit status 4. A Ctrl-C
    while one closes lets its close finish (the spider closed, its stats
    dumped, its frontier closed), and a second one was not needed."""
    server = redis_server_factory(appendonly=True)
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, server.url, tmp_path, "oom")
        fault_at = time.time()
        with server.client() as c:
            c.config_set("maxmemory", "1")  # noeviction: every write refused
        while "Stopping the crawl" not in workers.log(0) and workers.procs[0].poll() is None:
            time.sleep(0.01)
        Workers.signal(workers.procs[0], signal.SIGINT)  # while it closes
        assert_each_stopped_once(workers, "Redis is out of memory (maxmemory) and refuses writes",
                                 "redis_refused", 4, "Redis refuses the crawl's writes")
        first = workers.log(0)
        # said by crawlproj when the close had begun, by Scrapy when the signal came
        # first (between the error line and the close): the close finishes either way
        assert "Received SIGINT" in first
        for line in ("Spider closed (redis_refused)", "Dumping Scrapy stats", "Frontier closed"):
            assert line in first, first[-3000:]
        records = sw.settle_log()
        assert set(checks.fetch_counts(records)) < reachable  # the crawl did stop early
        with server.client() as c:
            c.config_set("maxmemory", "0")
        finish_with_a_new_worker(workers, sw, reachable, fault_at + LONGEST_SLEEP)


# -- a worker stopped past its leases --------------------------------------------


def started_downloads(tmp_path, pid: int) -> dict[str, float]:
    """URL -> when worker pid started its last download of it, from the
    worker's crawl log (logs/ under CRAWL_DATA_DIR, one file per worker named
    crawl-<crawl>@<host>_<pid>_<id>.log: Heritrix's fields, the fetch start as
    yyyymmddhhmmssSSS+duration, '-' for an attempt never sent). The record
    middleware stamps the start in the same reactor turn as the lease check,
    right before it."""
    started = {}
    for path in (tmp_path / "data" / "logs").glob(f"crawl-*_{pid}_*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) > 8 and parts[8][:1].isdigit():
                stamp = datetime.strptime(parts[8].split("+")[0], "%Y%m%d%H%M%S%f")
                started[parts[3]] = stamp.replace(tzinfo=timezone.utc).timestamp()
    return started


def test_worker_stopped_past_its_leases_fetches_none_of_them(redis_url, tmp_path, crawls):
    """SIGSTOP one worker for 3 TTLs: the other takes over its hosts and URLs.
    Resumed, the stopped worker starts no download of a URL whose lease it
    lost, and contacts no host while the other holds it. (A download it had
    started when it was stopped, its request not yet written to the socket,
    goes out on resume, to a host the other may be fetching from: its own
    crawl log shows it started before.)"""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, "stopped", SETTINGS)
        crawls.append(workers)
        # the web's log tells the workers' requests apart by User-Agent
        (stopped,) = workers.start(1, settings={"USER_AGENT": STALE_UA})
        workers.start(1)
        sw.wait_log(len(reachable) // 3, timeout=120)
        fault_at = time.time()
        Workers.signal(stopped, signal.SIGSTOP)
        try:
            time.sleep(3 * TTL)
        finally:
            Workers.signal(stopped, signal.SIGCONT)
        resumed_at = time.time()
        assert workers.wait(300) == [0, 0]
        records = sw.settle_log()
        # the pages: robots.txt requests are counted apart (crawlproj.simweb.checks)
        pages = [r for r in records if r["path"] not in checks.ROBOTS]
        taken_over = {checks.url_of(r) for r in pages
                      if r["ua"] != STALE_UA and r["t0"] > fault_at}
        stale = {checks.url_of(r) for r in pages if r["ua"] == STALE_UA
                 and r["t0"] > resumed_at and checks.url_of(r) in taken_over}
        started = started_downloads(tmp_path, stopped.pid)
        late = sorted(u for u in stale if started.get(u, resumed_at) >= resumed_at)
        assert not late, f"the resumed worker fetched URLs it had lost: {late[:5]}"
        # its crawl log proves in flight at the stop what it had started before:
        # a request written between fault_at and the signal's delivery reaches
        # the web after fault_at, and its lease, expired, goes to the other worker
        in_flight = {u for u, t in started.items() if t < resumed_at}
        # such a request, sent on resume, may meet the other worker's on its
        # host: no check in the process takes back a download it passed before
        sent_on_resume = [r for r in pages if r["ua"] == STALE_UA and r["t0"] >= fault_at
                          and checks.url_of(r) in in_flight]
        assert len(sent_on_resume) <= SETTINGS["CONCURRENT_REQUESTS"], sent_on_resume
        assert_whole_and_polite(sw, reachable, fault_at, excused=stale | in_flight,
                                sent_late=sent_on_resume)
        # it did hold leases: the other worker took them back
        assert stat(workers.log(1), "frontier/expired_leases") > 0


def test_worker_stopped_past_its_leases_sends_no_robots_txt_for_them(redis_url, tmp_path, crawls):
    """A host's robots.txt is fetched under the lease of the page that needs
    it, and checked against that lease's deadline like the page. The first
    worker leases hosts whose robots.txt nobody has, and is stopped while its
    robots.txt requests wait in the middlewares (tests/slowrobots.py, before
    the crawl log's stamp and the lease check); a second worker takes the
    hosts over. Resumed, the first sends none of those requests: each
    origin's robots.txt is fetched once, and every page once."""
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, "stoppedrobots", SETTINGS)
        crawls.append(workers)
        middlewares = dict(base.DOWNLOADER_MIDDLEWARES, **{"tests.slowrobots.SlowRobotsMiddleware": 945})
        (stopped,) = workers.start(1, settings={"USER_AGENT": STALE_UA,
                                                "DOWNLOADER_MIDDLEWARES": json.dumps(middlewares)})
        workers.wait_opened()
        time.sleep(slowrobots.DELAY / 2)  # it holds leases; their robots.txt requests wait
        Workers.signal(stopped, signal.SIGSTOP)
        try:
            workers.start(1, seeds=False)
            time.sleep(3 * TTL)
        finally:
            Workers.signal(stopped, signal.SIGCONT)
        assert workers.wait(300) == [0, 0]
        records = sw.settle_log()
        robots = [r["host"] for r in records if r["path"] in checks.ROBOTS]
        assert sorted(robots) == sorted(set(robots)), \
            sorted(h for h in set(robots) if robots.count(h) > 1)
        # nothing of the first worker's reached the web before it was stopped
        assert_whole_and_polite(sw, reachable, 0.0)
        assert stat(workers.log(0), "frontier/expired_dropped") > 0, workers.log(0)[-3000:]


# -- the embedded server ----------------------------------------------------------


def test_worker_restarts_the_embedded_server(embedded_data_dir, tmp_path, crawls):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        workers, reachable = start_crawl(crawls, sw, "", tmp_path, "embedded", n=1,
                                         CRAWL_DATA_DIR=str(embedded_data_dir))
        state = json.loads((embedded_data_dir / "redis" / "server.json").read_text())
        fault_at = time.time()
        os.kill(state["pid"], signal.SIGKILL)
        assert workers.wait(300) == [0]
        assert_whole_and_polite(sw, reachable, fault_at + LONGEST_SLEEP)
        again = json.loads((embedded_data_dir / "redis" / "server.json").read_text())
        assert again["pid"] != state["pid"]  # a new server, started by the worker
