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
    if "headers" in d:
        d["headers"] = {k: v for k, v in d["headers"].items()}
    names = {key: d.pop(key) for key in ("callback", "errback") if d.get(key)}
    request = request_from_dict(d)
    # No callback stays None, so Scrapy calls spider._parse as it does for a
    # fresh Request. A named one is resolved once per spider and kept: Scrapy
    # checks each callback for generator return values (an AST parse of its
    # source) and caches that by the callable object, so a new bound method
    # per response would redo the parse every time (4.8 % of a worker's CPU).
    for key, name in names.items():
        setattr(request, key, _method(spider, name))
    return request


def _method(spider, name: str):
    methods = spider.__dict__.setdefault("_crawlproj_methods", {}) if spider is not None else {}
    method = methods.get(name)
    if method is None:
        method = getattr(spider, str(name), None)
        if not callable(method):
            raise ValueError(f"callback {name!r} not found in spider {spider!r}")
        methods[name] = method
    return method


def url_of(payload: bytes) -> str:
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)["url"]
