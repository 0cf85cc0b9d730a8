"""The WARC writer process (crawlproj/stores/warcprocess.py): what the worker
sends is in the file, whole; a writer that dies fails its batch, and a
worker that dies leaves the file for recover(); a worker whose writer dies
mid-crawl stops on a store error and loses nothing."""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

import pytest

from crawlproj.simweb.testing import SimWebServer
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import OPEN_SUFFIX, recover
from crawlproj.stores.warcprocess import WarcChild, item
from tests.e2e import Workers
from tests.test_pipelines_e2e import FAST, WEB, warc_records
from tests.test_warc import exchange, records


def order(root: Path, **kw) -> dict:
    return {"storage": None, "root": str(root), "crawl_id": "c1", "worker": "h:1:abc",
            "max_size": 1 << 30, "info": {"robots": "obey"}, "log": {"LOG_LEVEL": "INFO"}, **kw}


def test_the_child_writes_every_exchange_it_is_sent_whole(tmp_path):
    exs = [exchange(f"http://h{i % 3}.example/p{i}.html", body=b"<html>%d</html>" % i * 50)
           for i in range(7)]
    child = WarcChild(order(tmp_path))
    assert child.write_many([item(e, None) for e in exs[:4]]) == [None] * 4
    first = exs[0]
    revisit = {"url": first.url, "date": "2026-01-01T00:00:00Z"}
    assert child.write_many([item(e, None) for e in exs[4:]] + [item(first, revisit)]) == [None] * 4
    published = child.close()
    assert child.proc.returncode == 0
    (path,) = [Path(p) for p in published]
    recs = records(path)  # digests checked
    responses = [(t, u) for t, u, *_ in recs if t in ("response", "revisit")]
    assert responses == [("response", e.url) for e in exs] + [("revisit", first.url)]
    payloads = {u: c for t, u, _, c in recs if t == "response"}
    assert all(payloads[e.url] == e.body for e in exs)
    assert [t for t, *_ in recs].count("request") == 8
    assert not list(tmp_path.rglob("*" + OPEN_SUFFIX))


def test_a_writer_that_died_fails_the_batch_with_an_oserror(tmp_path):
    child = WarcChild(order(tmp_path))
    child.proc.kill()
    child.proc.wait()
    with pytest.raises(OSError, match="WARC writer process .* exited"):
        child.write_many([item(exchange(), None)])


def test_a_worker_gone_leaves_its_file_open_for_recover(tmp_path):
    child = WarcChild(order(tmp_path))
    assert child.write_many([item(exchange(), None)]) == [None]
    child.proc.stdin.close()  # as the pipe of a worker killed with -9
    assert child.proc.wait(30) == 1
    (left,) = list(tmp_path.rglob("*" + OPEN_SUFFIX))
    done = recover(LocalStorage(tmp_path))
    assert [name for name, _ in done] == [left.name[: -len(OPEN_SUFFIX)]]
    assert [u for u, *_ in warc_records(tmp_path)] == ["http://h1.example/p1.html"]


def test_a_directory_it_cannot_write_is_an_oserror_before_anything_is_sent(tmp_path):
    (tmp_path / "plain").write_text("a file, not a directory")
    with pytest.raises(OSError) as info:
        WarcChild(order(tmp_path / "plain" / "warc"))
    assert info.value.errno in (errno.ENOTDIR, errno.EEXIST)


def test_it_ignores_a_stop_meant_for_its_worker(tmp_path):
    """SIGINT and SIGTERM reach the whole process group: the worker closes
    its writer after its last pages, so the writer must outlive them."""
    child = WarcChild(order(tmp_path))
    os.kill(child.pid, signal.SIGTERM)
    os.kill(child.pid, signal.SIGINT)
    time.sleep(0.3)
    assert child.write_many([item(exchange(), None)]) == [None]
    assert len(child.close()) == 1


def _writer_of(pid: int) -> int | None:
    """The pid of worker pid's WARC writer process, if it runs yet."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        for kid in (task / "children").read_text().split():
            try:
                cmd = Path(f"/proc/{kid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"crawlproj.stores.warcprocess" in cmd:
                return int(kid)
    return None


@pytest.mark.e2e
@pytest.mark.faults
def test_a_worker_whose_writer_dies_stops_and_loses_nothing(redis_url, tmp_path):
    with SimWebServer(WEB, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(2)
        reachable = sw.web.reachable(seeds, obey_robots=True)
        (tmp_path / "w1").mkdir()
        first = Workers(sw, redis_url, tmp_path / "w1", seeds, "writer", FAST)
        (p,) = first.start(1)
        first.wait_opened()
        sw.wait_log(len(reachable) // 4, timeout=120)
        writer = _writer_of(p.pid)
        assert writer is not None
        os.kill(writer, signal.SIGKILL)
        assert p.wait(120) == 1  # stopped on a store error
        log = first.log(0)
        assert "'finish_reason': 'store_error'" in log
        assert "WARC writer process" in log and "Traceback" not in log
        recover(LocalStorage(tmp_path / "w1" / "data" / "warc"))
        stored_first = {u for u, *_ in warc_records(tmp_path / "w1" / "data" / "warc")}
        (tmp_path / "w2").mkdir()
        second = Workers(sw, redis_url, tmp_path / "w2", seeds, "writer", FAST)
        (q,) = second.start(1, seeds=False)
        assert q.wait(300) == 0
        stored = stored_first | {u for u, *_ in warc_records(tmp_path / "w2" / "data" / "warc")}
        assert reachable <= stored
        assert len(stored_first) < len(reachable)
