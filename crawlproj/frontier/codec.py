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

A payload read back is no more trusted than a URL from the web: anyone who can
write to the server can write one. decode() builds a Request from the fields
a queued request has and nothing else: no class by name (Scrapy's
request_from_dict would import the module a payload names), callbacks only
among the methods of the spider's own classes, http and https URLs only, on
the host whose queue held it, payloads of bounded size, and none of the meta
keys that decide where or how a download is made (a proxy, a size limit, a
robots.txt exemption), no request header but those the spider keeps
(FRONTIER_HEADERS), and a URL judged as it was stored, before a host is put in
front of it. A payload that breaks a rule raises BadPayload, with the rule's
name as its reason.
"""

from __future__ import annotations

import inspect
import logging
import os
import struct

import msgpack
from scrapy import Request, Spider
from scrapy.http import FormRequest, JsonRequest

from crawlproj.recrawl.record import PACKED, STORED, unpack_payload

logger = logging.getLogger(__name__)

# meta keys that describe one download, not the URL: never stored.
_TRANSIENT_META = ("download_slot", "download_latency", "download_timeout", "proxy",
                   "_auth_proxy", "crawlproj_lease", "frontier_score", "link_context",
                   "link_text")

# meta keys a payload may not set on decode: where or how a download is made
# (a proxy, a bind address, the size limits, the robots.txt exemption, the
# retries of a host), on top of the transient ones above and those starting
# with "_".
_UNTRUSTED_META = ("bindaddress", "download_maxsize", "download_warnsize",
                   "dont_obey_robotstxt", "max_retry_times")
# The request headers a queued URL keeps: those the spider names in its
# ``frontier_headers`` attribute, Referer by default (the page the link was
# found on, which a site may use). Every other header is the fetching worker's
# own, set by its downloader middlewares when it downloads: its User-Agent,
# its default headers. A request that went through another worker's
# middlewares (a retry, a redirect) would otherwise carry that worker's, and
# a payload written by anyone could set any header.
FRONTIER_HEADERS = ("Referer",)
# headers a payload may never set, whatever the spider allows: credentials,
# and what names the server
_UNTRUSTED_HEADERS = {b"host", b"authorization", b"proxy-authorization", b"cookie"}
# A payload is a URL, a Referer tail, a little meta: 64 KiB is far above any.
MAX_PAYLOAD = 64 * 1024
# The Request classes a payload may name (Request.to_dict writes "_class" for
# a subclass); any other name is refused, never imported.
_CLASSES = {f"{cls.__module__}.{cls.__name__}": cls for cls in (Request, FormRequest, JsonRequest)}
_METHODS = {"GET", "HEAD", "POST"}

_DEFAULTS = Request("http://x").to_dict()
_DEFAULT_KEPT = frozenset(n.lower().encode() for n in FRONTIER_HEADERS)
PACKED_BYTE = bytes((PACKED,))


class BadPayload(ValueError):
    """A payload read from the frontier that no worker may act on."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


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


def _kept_headers(spider) -> frozenset[bytes]:
    """The lower-cased names of the headers a queued request of spider keeps."""
    if spider is None:
        return _DEFAULT_KEPT
    kept = spider.__dict__.get("_crawlproj_kept_headers")
    if kept is None:
        names = getattr(spider, "frontier_headers", FRONTIER_HEADERS)
        kept = frozenset(_lower(n) for n in names if isinstance(n, (str, bytes))) - _UNTRUSTED_HEADERS
        spider.__dict__["_crawlproj_kept_headers"] = kept
    return kept


def _headers(headers: dict, kept: frozenset[bytes]) -> dict:
    return {k: v for k, v in headers.items() if isinstance(k, (bytes, str)) and _lower(k) in kept}


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
        headers = _headers(headers, _kept_headers(spider))
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


def decode(payload: bytes, spider=None, host: str | None = None,
           max_url_length: int | None = None) -> Request:
    """host: the host key the payload was kept under (for a URL stored without
    it, and the URL's host must be it); max_url_length: FRONTIER_MAX_URL_LENGTH.
    Raises BadPayload (or msgpack's errors) for a payload that breaks a rule."""
    if len(payload) > MAX_PAYLOAD:
        raise BadPayload("size", f"payload of {len(payload)} bytes (at most {MAX_PAYLOAD})")
    if payload[:1] == PACKED_BYTE:   # a page in a recrawl queue (crawlproj/recrawl/record.py)
        try:
            tail, https, depth, record = unpack_payload(payload)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise BadPayload("malformed", f"packed recrawl payload: {exc}") from None
        d = {"u": tail, "m": {STORED: record} | ({"depth": depth} if depth else {})}
        if https:
            d["s"] = 1
    else:
        d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if not isinstance(d, dict):
        raise BadPayload("malformed", f"payload is a {type(d).__name__}, not a map")
    if "u" in d:
        url = _str(d.pop("u"), "u")
        if not url.startswith(("http://", "https://")):
            # stored without its origin, a URL is a path or a query (encode):
            # anything else (file:///etc/passwd) is judged as it was read
            if url[:1] not in ("/", "?", ""):
                _check_url(url, None, max_url_length)
                raise BadPayload("malformed", f"payload URL {url[:100]!r} is neither absolute "
                                              "nor a path")
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
    request = _build(d, _kept_headers(spider))
    _check_url(request.url, host, max_url_length)
    # No callback stays None, so Scrapy calls spider._parse as it does for a
    # fresh Request. A named one is resolved once per spider and kept: Scrapy
    # checks each callback for generator return values (an AST parse of its
    # source) and caches that by the callable object, so a new bound method
    # per response would redo the parse every time.
    for key, name in names.items():
        setattr(request, key, _method(spider, name))
    return request


def _str(value, field: str) -> str:
    if not isinstance(value, str):
        raise BadPayload("malformed", f"payload field {field!r} is not a string")
    return value


def _build(d: dict, kept: frozenset[bytes]) -> Request:
    """A Request of the fields a queued request has, checked."""
    name = d.pop("_class", None)
    if name is not None and name not in _CLASSES:
        raise BadPayload("class", f"payload names the class {str(name)[:100]!r}")
    cls = _CLASSES.get(name, Request)
    unknown = set(d) - set(cls.attributes) - {"url"}
    if unknown:
        raise BadPayload("malformed", f"payload fields {sorted(map(str, unknown))[:5]} unknown")
    method = d.get("method", "GET")
    if method not in _METHODS:
        raise BadPayload("method", f"payload method {str(method)[:20]!r}")
    meta = d.get("meta") or {}
    if not isinstance(meta, dict):
        raise BadPayload("malformed", "payload meta is not a map")
    d["meta"] = {k: v for k, v in meta.items() if isinstance(k, str) and not (
        k in _TRANSIENT_META or k in _UNTRUSTED_META or k.startswith("_"))}
    headers = d.get("headers") or {}
    if not isinstance(headers, dict):
        raise BadPayload("malformed", "payload headers are not a map")
    d["headers"] = _headers(headers, kept)
    try:
        return cls(**d)
    except (TypeError, ValueError, LookupError, AttributeError) as exc:
        raise BadPayload("malformed", f"payload fields refused: {exc}") from None


def _lower(key) -> bytes:
    return (key.encode("latin-1", "replace") if isinstance(key, str) else key).lower()


def _check_url(url: str, host: str | None, max_url_length: int | None) -> None:
    from crawlproj.urls import host_of, refusal

    bad = refusal(url, max_url_length or MAX_PAYLOAD)
    if bad is not None:
        raise BadPayload(bad[0], f"payload URL {url[:100]!r}: {bad[1]}")
    if host is not None and host_of(url) != host:
        # a URL under another host's key would be fetched without that
        # host's lease: no politeness, and any host at all
        raise BadPayload("host", f"payload URL {url[:100]!r} is not on {host}")


def _method(spider, name: str):
    """The spider's method called name, if it is one of its own: defined by a
    class of the spider's (Spider subclasses, Scrapy's CrawlSpider too), not
    by Spider itself or object, and a plain function there (not a
    classmethod, a property, an attribute)."""
    methods = spider.__dict__.setdefault("_crawlproj_methods", {}) if spider is not None else {}
    method = methods.get(name)
    if method is None:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise BadPayload("callback", f"callback {str(name)[:100]!r} is not a method name")
        own = [cls for cls in type(spider).__mro__
               if issubclass(cls, Spider) and cls is not Spider] if spider is not None else []
        if not any(inspect.isfunction(vars(cls).get(name)) for cls in own):
            raise BadPayload("callback", f"callback {name!r} not found in spider {spider!r}")
        method = getattr(spider, name)
        methods[name] = method
    return method
