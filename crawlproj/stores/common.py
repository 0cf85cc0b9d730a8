"""Small things every store needs: the error type, the worker id, paths."""

from __future__ import annotations

import os
import re
import socket
import uuid
from pathlib import Path

from crawlproj.errors import CrawlprojError


class StoreError(CrawlprojError):
    """An output store cannot write: the message names the path and the reason."""


def describe_os_error(exc: BaseException) -> str:
    """'No space left on device' rather than '[Errno 28] No space left on device: ...'."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def data_dir(settings) -> Path:
    return Path(settings.get("CRAWL_DATA_DIR"))


def warc_dir(settings) -> Path:
    """WARC_DIR; unset, CRAWL_DATA_DIR/warc."""
    return Path(settings.get("WARC_DIR") or data_dir(settings) / "warc")


def crawllog_dir(settings) -> Path:
    """CRAWLLOG_DIR; unset, CRAWL_DATA_DIR/logs."""
    return Path(settings.get("CRAWLLOG_DIR") or data_dir(settings) / "logs")


def safe_name(text: str) -> str:
    """A file-name-safe form of a crawl id or host name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:64] or "_"


def worker_id(crawler) -> str:
    """This process's worker id, the same for every store of one crawler.

    The frontier's scheduler names its worker host:pid:random (so that a
    restarted worker with a recycled pid is still a new worker); when it is
    the running scheduler its id is used, so the crawl log and the WARC
    files name the worker the frontier's leases name.
    """
    wid = getattr(crawler, "_crawlproj_worker_id", None)
    if wid:
        return wid
    wid = getattr(getattr(getattr(crawler, "engine", None), "scheduler", None), "worker_id", None)
    if not isinstance(wid, str) or not wid:
        wid = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    crawler._crawlproj_worker_id = wid
    return wid
