"""What a simulated host answers: shared by the model (model.py) and the trap
hosts (traps.py)."""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["HTML", "TEXT", "Response"]


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes
    location: str | None = None
    # Wall-clock time until which this exact response stays valid (pages that
    # change over time expire at their next version); lets the server cache.
    expires: float = math.inf
    # Pages of a web with a change process (change_dist) only: the version
    # served, its ETag, and Last-Modified as Unix seconds of the HTTP
    # calendar (the version's change time; see change.py).
    version: int | None = None
    etag: str | None = None
    last_modified: float | None = None
    # Trap hosts (simweb/traps.py): more header lines, as (name, value); a
    # Content-Length among them replaces the body's
    headers: tuple = ()
    # ... and how the server sends it, if not at once: "drip" (the body a byte
    # at a time), "drip_head" (the head likewise), "endless" (body bytes until
    # the client leaves), "endless_head" (header lines likewise), "silent"
    # (nothing at all)
    stream: str | None = None


HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
