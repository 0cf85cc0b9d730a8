"""Running real `scrapy crawl web` workers against the simulated web, for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Workers:
    """Worker processes of one crawl: same CRAWL_ID, same Redis, same web."""

    def __init__(self, sw, redis_url: str, tmp_path: Path, seeds: list[str], crawl_id: str,
                 settings: dict | None = None):
        self.sw, self.redis_url, self.tmp = sw, redis_url, tmp_path
        self.crawl_id = crawl_id
        # The simulated web is crawled broadly: every host, at any depth.
        self.settings = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 16, "CRAWL_SCOPE": "any",
                         "DEPTH_LIMIT": 0, **(settings or {})}
        self.seeds_file = tmp_path / "seeds.txt"
        self.seeds_file.write_text("\n".join(seeds) + "\n")
        self.procs: list[subprocess.Popen] = []

    def start(self, n: int = 1, seeds: bool = True, spider: str = "web",
              settings: dict | None = None) -> list[subprocess.Popen]:
        """Start n workers; settings add to or override the crawl's for these n."""
        started = []
        settings = {**self.settings, **(settings or {})}
        for _ in range(n):
            i = len(self.procs)
            cmd = [sys.executable, "-m", "scrapy", "crawl", spider]
            if seeds:
                cmd += ["-a", f"seeds={self.seeds_file}"]
            for k, v in settings.items():
                cmd += ["-s", f"{k}={v}"]
            env = self.sw.env()
            env.update(REDIS_URL=self.redis_url, CRAWL_ID=self.crawl_id,
                       CRAWL_DATA_DIR=str(self.tmp / "data"), PYTHONUNBUFFERED="1")
            log = open(self.tmp / f"worker{i}.log", "wb")
            p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            self.procs.append(p)
            started.append(p)
        return started

    def wait(self, timeout: float = 300) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill_all()
                raise AssertionError(f"workers did not finish; logs in {self.tmp}") from None
        self.sw.settle_log()  # the web's request log has every request of the crawl
        return codes

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def wait_opened(self, timeout: float = 120) -> None:
        """Until every worker started has opened its frontier (on a loaded
        machine one may still be importing when another has crawled a third
        of the web)."""
        deadline = time.monotonic() + timeout
        for i, p in enumerate(self.procs):
            while "Frontier opened" not in self.log(i):
                if p.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"worker {i} did not open its frontier: {self.log(i)[-2000:]}")
                time.sleep(0.1)

    def log(self, i: int) -> str:
        return (self.tmp / f"worker{i}.log").read_text(errors="replace")

    @staticmethod
    def signal(p: subprocess.Popen, sig=signal.SIGKILL):
        os.kill(p.pid, sig)


def stat(log: str, name: str) -> int:
    """A counter from the stats dump at the end of a worker's log; 0 when the
    dump does not name it (Scrapy dumps only counters that were set)."""
    assert "Dumping Scrapy stats" in log, "the worker did not dump its stats:\n" + log[-2000:]
    for line in log.splitlines():
        line = line.strip().lstrip("{")  # the first counter shares the dump's "{" line
        if line.startswith(f"'{name}':"):
            return int(line.split(":", 1)[1].strip().rstrip(",}"))
    return 0


def warc_records(root: Path, rec_type: str, header: str) -> list[tuple[str, str | None]]:
    """(target URI, value of header) of every record of rec_type in the WARC
    files under root."""
    from warcio.archiveiterator import ArchiveIterator
    out = []
    for path in sorted(root.rglob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == rec_type:
                    out.append((rec.rec_headers.get_header("WARC-Target-URI"),
                                rec.rec_headers.get_header(header)))
    return out


def wait_for(predicate, timeout=60.0, every=0.1) -> bool:
    """Poll predicate() until it holds or timeout seconds pass (a bound on
    the wait, not a claim about time: callers assert what they waited for)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
