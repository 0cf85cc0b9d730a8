"""Requests to and from the bytes kept in the frontier: msgpack, never pickle.

A worker must not execute what it reads from a shared server, so callbacks
travel by name and everything else as plain data. Fields equal to a fresh
Request's defaults are left out: the payload of a typical link is its URL and
its depth, which keeps a queued URL near 100 bytes in Redis.
"""

from __future__ import annotations

import logging

import msgpack
from scrapy import Request
from scrapy.utils.request import request_from_dict

logger = logging.getLogger(__name__)

# meta keys that describe one download, not the URL: never stored.
_TRANSIENT_META = ("download_slot", "download_latency", "download_timeout", "proxy",
                   "_auth_proxy", "crawlproj_lease", "frontier_score", "link_context")

_DEFAULTS = Request("http://x").to_dict()


def _clean_meta(meta: dict) -> dict:
    out = {}
    for key, value in meta.items():
        if key in _TRANSIENT_META or key.startswith("_"):
            continue
        try:
            msgpack.packb(value)
        except (TypeError, ValueError, OverflowError):
            logger.debug("meta key %r is not serialisable; not stored", key)
            continue
        out[key] = value
    return out


def encode(request: Request, spider=None) -> bytes:
    d = request.to_dict(spider=spider)
    d["meta"] = _clean_meta(d.get("meta") or {})
    small = {k: v for k, v in d.items() if k == "url" or v != _DEFAULTS.get(k)}
    if small.get("callback") == "parse":
        del small["callback"]  # the spider's default callback
    return msgpack.packb(small, use_bin_type=True)


def decode(payload: bytes, spider=None) -> Request:
    d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if spider is not None and "callback" not in d and hasattr(spider, "parse"):
        d["callback"] = "parse"
    if "headers" in d:
        d["headers"] = {k: v for k, v in d["headers"].items()}
    return request_from_dict(d, spider=spider)


def url_of(payload: bytes) -> str:
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)["url"]
