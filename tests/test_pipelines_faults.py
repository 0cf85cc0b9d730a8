"""The stores when a crawl is stopped or cannot write: SIGTERM, kill -9, a full
disk, an unwritable directory. Real workers, real Redis, the simulated web;
"nothing lost" is checked against the simulated web's model.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import redis as redis_lib

from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import recover
from tests.e2e import Workers
from tests.test_pipelines_e2e import FAST, WEB, warc_records

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

# -- stops and failures ----------------------------------------------------------

def test_sigterm_closes_files_and_kill9_is_repaired(redis_url, tmp_path):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        workers = Workers(sw, redis_url, tmp_path, seeds, "stops", {
            "RETRY_TIMES": 1, "FRONTIER_DELAY_FACTOR": 2, "FRONTIER_LEASE_TTL": 3})
        victim, stopped = workers.start(2)
        workers.wait_opened()
        sw.wait_log(len(reachable) // 3, timeout=120)
        Workers.signal(victim, signal.SIGKILL)
        Workers.signal(stopped, signal.SIGTERM)
        victim.wait()
        assert stopped.wait(60) == 0
        assert "'finish_reason': 'shutdown'" in workers.log(1)
        warc = tmp_path / "data" / "warc"
        left = list(warc.glob("*.warc.gz.open"))
        assert len(left) == 1  # the killed worker's, and only that one
        (last,) = workers.start(1, seeds=False)  # repairs it at start, finishes the crawl
        assert last.wait(300) == 0
        assert "was left open by a stopped worker" in workers.log(2)
        assert not list(warc.glob("*.open"))
        recs = warc_records(warc)  # all whole, all digests right
        stored = {u for u, _, _, _ in recs}
        fetched = {checks.url_of(r) for r in sw.settle_log()}
        # everything reachable was fetched and stored; nothing stored was not fetched
        assert reachable <= stored <= fetched


def _mount_tmpfs(path: Path, options: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                             capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=20)


class LimitedWorkers(Workers):
    """Workers whose files may grow to at most `fsize` bytes (RLIMIT_FSIZE: a
    write past it fails with EFBIG, as on a full disk) when no tmpfs can be
    mounted here."""

    fsize = None

    def start(self, n=1, seeds=True):
        if self.fsize is None:
            return super().start(n, seeds)
        import resource
        real = subprocess.Popen

        def limited(*a, **kw):
            kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                          (self.fsize, self.fsize))
            return real(*a, **kw)

        subprocess.Popen = limited
        try:
            return super().start(n, seeds)
        finally:
            subprocess.Popen = real


STORE_ERROR_LINE = ("crawlproj: the crawl stopped on an error: a store cannot write (finish "
                    "reason store_error); the log says what failed (exit status 6)")


def _single_store_error(log: str) -> None:
    """One error line names the store, and the worker's last line says it
    stopped on it (its exit status is 6)."""
    assert "'finish_reason': 'store_error'" in log
    errors = [ln for ln in log.splitlines() if "cannot write" in ln and "ERROR" in ln]
    assert len(errors) == 1, errors
    assert "Traceback" not in log
    assert log.strip().splitlines()[-1] == STORE_ERROR_LINE


def test_full_disk_stops_the_crawl_and_loses_nothing(redis_url, tmp_path):
    small = tmp_path / "small"
    mounted = _mount_tmpfs(small, "size=96k")
    try:
        with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
            seeds = sw.web.seeds(2)
            reachable = sw.web.reachable(seeds, obey_robots=True)
            (tmp_path / "w1").mkdir()
            first = LimitedWorkers(sw, redis_url, tmp_path / "w1", seeds, "full", FAST)
            if not mounted:
                first.fsize = 96 * 1024
            (p,) = _start_with_data_dir(first, small)
            assert p.wait(120) == 6  # stopped on a store error
            log = first.log(0)
            _single_store_error(log)
            assert "No space left on device" in log or "File too large" in log
            # the files the failing worker left are whole up to the failure
            recover(LocalStorage(small / "warc"))
            stored_first = {u for u, *_ in warc_records(small / "warc")}
            # a worker with room finishes the crawl: nothing queued was lost
            (tmp_path / "w2").mkdir()
            second = Workers(sw, redis_url, tmp_path / "w2", seeds, "full", FAST)
            (q,) = second.start(1, seeds=False)
            assert q.wait(300) == 0
            assert "'finish_reason': 'finished'" in second.log(0)
            stored = stored_first | {u for u, *_ in warc_records(tmp_path / "w2" / "data" / "warc")}
            assert reachable <= stored
            assert stored_first and len(stored_first) < len(reachable)
    finally:
        if mounted:
            _umount(small)


def _start_with_data_dir(workers: Workers, data_dir: Path):
    """Start one worker whose CRAWL_DATA_DIR is data_dir."""
    real = subprocess.Popen

    def popen(cmd, *a, env=None, **kw):
        env = dict(env or os.environ, CRAWL_DATA_DIR=str(data_dir))
        return real(cmd, *a, env=env, **kw)

    subprocess.Popen = popen
    try:
        return workers.start(1)
    finally:
        subprocess.Popen = real


def test_unwritable_output_directory_stops_before_crawling(redis_url, tmp_path):
    ro = tmp_path / "ro"
    mounted = _mount_tmpfs(ro, "ro,size=64k")
    data_dir = ro
    if not mounted:
        ro.mkdir(exist_ok=True)
        ro.chmod(0o555)
        probe = ro / "probe"
        try:
            probe.write_text("x")
            probe.unlink()
            # root without mount: permissions refuse root nothing; a path
            # under a regular file refuses everyone
            (tmp_path / "plain").write_text("a file, not a directory")
            data_dir = tmp_path / "plain" / "data"
        except OSError:
            pass
    try:
        with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
            seeds = sw.web.seeds(2)
            reachable = sw.web.reachable(seeds, obey_robots=True)
            (tmp_path / "w1").mkdir()
            first = Workers(sw, redis_url, tmp_path / "w1", seeds, "ro", FAST)
            (p,) = _start_with_data_dir(first, data_dir)
            assert p.wait(120) == 6  # stopped on a store error
            _single_store_error(first.log(0))
            fetched_before = len(sw.settle_log())
            assert fetched_before == 0
            # it took nothing from the frontier: a worker with a writable
            # directory (and the same seeds) crawls everything
            (tmp_path / "w2").mkdir()
            second = Workers(sw, redis_url, tmp_path / "w2", seeds, "ro", FAST)
            (q,) = second.start(1)
            assert q.wait(300) == 0
            stored = {u for u, *_ in warc_records(tmp_path / "w2" / "data" / "warc")}
            assert reachable <= stored
    finally:
        if mounted:
            _umount(ro)
        else:
            ro.chmod(0o755)


def test_a_link_segment_that_cannot_be_written_stops_the_crawl_and_trims_nothing(
        redis_url, tmp_path):
    """The compaction's process finds the disk full: the worker stops on it
    (exit status 6, one error line naming the link store), and every page
    stays in Redis's working set, none trimmed for a segment never written."""
    links = tmp_path / "links"
    if not _mount_tmpfs(links, "size=4k"):
        # CI runs as root: there the test must run, never skip
        assert os.geteuid() != 0, "root could not mount a tmpfs for the full disk"
        pytest.skip("a full disk is a tmpfs here, and mounting one needs root (CI has it)")
    try:
        with SimWebServer(WEB) as sw:
            workers = Workers(sw, redis_url, tmp_path, sw.web.seeds(2), "linksfull", {
                **FAST, "LINKSTORE_DIR": str(links), "LINKSTORE_SEGMENT_PAGES": 50})
            (p,) = workers.start(1)
            assert p.wait(120) == 6
            log = workers.log(0)
        _single_store_error(log)
        assert "link store" in next(ln for ln in log.splitlines() if "cannot write" in ln)
        assert "No space left on device" in log
        r = redis_lib.Redis.from_url(redis_url)
        keyspace = Keyspace.existing(r, "linksfull")
        assert r.llen(keyspace.link_segments(0)) == 0
        assert r.llen(keyspace.links(0)) >= 50
        assert not [f for f in links.iterdir() if f.suffix in (".parquet", ".tmp")]
    finally:
        _umount(links)
