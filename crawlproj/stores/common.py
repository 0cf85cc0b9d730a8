"""Small things every store needs: the error type, the worker id, paths."""

from __future__ import annotations

import math
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from crawlproj.components import component
from crawlproj.errors import CrawlprojError

# the second utc_second() formatted last: records come many a second, and
# strftime was a tenth of a WARC record's and a crawl log line's Python work
_second: tuple[int, str] = (-1, "")


def utc_second(epoch: float) -> tuple[str, int]:
    """("YYYY-MM-DDTHH:MM:SS", microseconds) of epoch in UTC, rounded as
    datetime.fromtimestamp rounds it (half to even), so that a date written
    here is the one any other writer makes of the same time (a revisit names
    its first capture's record by its date: crawlproj/stores/warc.py)."""
    frac, whole = math.modf(epoch)
    us = round(frac * 1e6)
    if us >= 1_000_000:
        whole, us = whole + 1, us - 1_000_000
    elif us < 0:
        whole, us = whole - 1, us + 1_000_000
    sec = int(whole)
    last = _second
    if last[0] != sec:
        last = _set_second(sec)
    return last[1], us


def _set_second(sec: int) -> tuple[int, str]:
    global _second
    _second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return _second


class StoreError(CrawlprojError):
    """An output store cannot write: the message names the path and the reason."""


def describe_os_error(exc: BaseException) -> str:
    """'No space left on device' rather than '[Errno 28] No space left on device: ...'."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def data_dir(settings) -> Path:
    return Path(settings.get("CRAWL_DATA_DIR"))


def private_dir(path: str | os.PathLike) -> Path:
    """path, made with each missing directory on the way owner-only (0700):
    what a crawl keeps (pages, logs, its index, its Redis) is no other local
    user's to read (docs/hardening.md). A directory that exists keeps the mode
    its owner gave it."""
    path = Path(path)
    missing = []
    at = path
    while not at.is_dir() and at != at.parent:
        missing.append(at)
        at = at.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # another worker made it first
            pass
    return path


def warc_dir(settings) -> Path:
    """WARC_DIR; unset, CRAWL_DATA_DIR/warc."""
    return Path(settings.get("WARC_DIR") or data_dir(settings) / "warc")


def crawllog_dir(settings) -> Path:
    """CRAWLLOG_DIR; unset, CRAWL_DATA_DIR/logs."""
    return Path(settings.get("CRAWLLOG_DIR") or data_dir(settings) / "logs")


def safe_name(text: str) -> str:
    """A file-name-safe form of a crawl id or host name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:64] or "_"


@dataclass(frozen=True)
class WorkerId:
    """A worker's id, host:pid:random (so that a restarted worker with a
    recycled pid is still a new worker)."""

    value: str

    @classmethod
    def new(cls, crawler=None) -> WorkerId:
        return cls(f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}")


def worker_id(crawler) -> str:
    """This process's worker id, the same for every part of one crawler: the
    frontier's scheduler, the crawl log, the WARC files and the heartbeat
    name the same worker (crawlproj.components)."""
    return component(crawler, WorkerId, WorkerId.new).value
