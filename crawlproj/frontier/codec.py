"""Requests to and from the bytes kept in the frontier: msgpack, never pickle.

A worker must not execute what it reads from a shared server, so callbacks
travel by name and everything else as plain data. Fields equal to a fresh
Request's defaults are left out, and the three every link has get one-letter
keys: "u" the URL, "m" its meta (usually just the depth) and "r" its Referer
header as [n, tail]: the first n bytes of the URL, then tail. Most links stay
on their page's host, so a Referer costs a few bytes instead of a second URL
(~50 bytes of every queued URL in Redis; docs/benchmarks.md). Payloads with
the full field names ("url", "meta", "headers") are read too.
"""

from __future__ import annotations

import logging
import os

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
    out = {"u": small.pop("url")}
    if "meta" in small:
        out["m"] = small.pop("meta")
    headers = small.pop("headers", None)
    if headers:
        referer = headers.get(b"Referer")
        if referer and len(referer) == 1:
            del headers[b"Referer"]
            url, ref = out["u"].encode(), referer[0]
            n = len(os.path.commonprefix([url, ref]))
            out["r"] = [n, ref[n:]]
        if headers:
            out["h"] = headers
    out.update(small)
    return msgpack.packb(out, use_bin_type=True)


def decode(payload: bytes, spider=None) -> Request:
    d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if "u" in d:
        d["url"] = d.pop("u")
        if "m" in d:
            d["meta"] = d.pop("m")
        if "h" in d:
            d["headers"] = d.pop("h")
        if "r" in d:
            n, tail = d.pop("r")
            d.setdefault("headers", {})[b"Referer"] = [d["url"].encode()[:n] + tail]
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
