"""Requests to and from the bytes kept in the frontier: msgpack, never pickle.

A worker must not execute what it reads from a shared server, so callbacks
travel by name and everything else as plain data. Fields equal to a fresh
Request's defaults are left out, and the three every link has get one-letter
keys: "u" the URL, "m" its meta (usually just the depth) and "r" its Referer
header as [n, tail]: the first n bytes of the URL, then tail. Most links stay
on their page's host, so a Referer costs a few bytes instead of a second URL.
The payload is kept under its host's key, so "u" leaves out "http://<host>"
when the URL starts so ("s" marks https://<host>). Together ~70 bytes less per
queued URL in Redis (docs/benchmarks.md). Payloads with the full field names
("url", "meta", "headers") are read too.
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


def encode(request: Request, spider=None, host: str | None = None) -> bytes:
    """host: the frontier's host key (crawlproj.urls.host_of) the payload is kept under."""
    d = request.to_dict(spider=spider)
    d["meta"] = _clean_meta(d.get("meta") or {})
    small = {k: v for k, v in d.items() if k == "url" or v != _DEFAULTS.get(k)}
    if small.get("callback") == "parse":
        del small["callback"]  # the spider's default callback
    url = small.pop("url")
    out = {"u": url}
    if "meta" in small:
        out["m"] = small.pop("meta")
    headers = small.pop("headers", None)
    if headers:
        referer = headers.get(b"Referer")
        if referer and len(referer) == 1:
            del headers[b"Referer"]
            full, ref = url.encode(), referer[0]
            n = len(os.path.commonprefix([full, ref]))
            out["r"] = [n, ref[n:]]
        if headers:
            out["h"] = headers
    if host is not None:
        for scheme, mark in (("http://", None), ("https://", 1)):
            origin = scheme + host
            if url.startswith(origin) and url[len(origin):len(origin) + 1] in ("/", "?", ""):
                out["u"] = url[len(origin):]
                if mark:
                    out["s"] = mark
                break
    out.update(small)
    return msgpack.packb(out, use_bin_type=True)


def decode(payload: bytes, spider=None, host: str | None = None) -> Request:
    """host: the host key the payload was kept under (for a URL stored without it)."""
    d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if "u" in d:
        url = d.pop("u")
        if not url.startswith(("http://", "https://")):
            if host is None:
                raise ValueError(f"payload URL {url!r} needs its host")
            url = ("https://" if d.pop("s", None) else "http://") + host + url
        d["url"] = url
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
