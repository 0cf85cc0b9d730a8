"""Canonical URLs, so that one resource has one fingerprint (Mercator §3.2).

Mercator's DUE compares fingerprints of URLs, so two spellings of one resource
must become one string first. The URL is parsed by the WHATWG URL Standard (the
``ada_url`` parser, the one browsers' rules describe), which already gives:
scheme and host lower-cased, the host in IDNA (UTS #46) form, IPv4 numbers in
dotted-decimal form and IPv6 compressed, the default port dropped, dot-segments
resolved, and characters that must be percent-encoded encoded. On top of it:

* the fragment and the user:password@ part are dropped (neither names a
  different resource on the server);
* percent-encoding is normalised as RFC 3986 §6.2.2.2 says: escapes of
  unreserved characters are decoded (``%7E`` -> ``~``), other escapes get
  upper-case hex digits; in the query a space is ``+`` (as w3lib's
  canonicalize_url and HTML forms write it);
* query parameters are sorted by name, then value, and empty ones dropped;
* session and tracking parameters are removed: a configurable list of names
  (DUE_STRIP_PARAMS) and name prefixes (DUE_STRIP_PARAM_PREFIXES, ``utm_``).

w3lib.url.canonicalize_url does the last three on a urllib.parse split, which
does not follow the URL Standard (``http://0x7f.1/`` is 127.0.0.1 to every
browser) and takes ~12 us a URL; this takes ~3 us, and every link goes through it.
A URL that is not a valid http(s) URL raises :class:`InvalidURL` with a reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import ada_url

try:  # the C API under ada_url.URL: one parse, one string, offsets (~2.5 us)
    from ada_url._ada_wrapper import ffi as _ffi
    from ada_url._ada_wrapper import lib as _lib

    _lib.ada_get_components  # noqa: B018
except (ImportError, AttributeError):  # pragma: no cover - the wrapper changed: ada_url.URL
    _lib = None

__all__ = ["InvalidURL", "Canonicalizer", "canonicalize", "STRIP_PARAMS", "STRIP_PREFIXES"]

# Parameters that name a session or a campaign, not a resource.
STRIP_PARAMS = (
    "gclid", "gbraid", "wbraid", "fbclid", "msclkid", "dclid", "yclid", "twclid", "ttclid",
    "mc_cid", "mc_eid", "igshid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok",
    "sessionid", "session_id", "jsessionid", "phpsessid", "aspsessionid", "sid",
    "cfid", "cftoken",
)
STRIP_PREFIXES = ("utm_",)

_SCHEMES = ("http:", "https:")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_SCHEME = re.compile(r"^[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")
# The URL Standard's forbidden host code points (plus % for an opaque check).
_FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|%") | {chr(c) for c in range(0x20)} | {"\x7f"}


class InvalidURL(ValueError):
    """A URL that cannot name a fetchable resource; ``reason`` is a short code."""

    def __init__(self, message: str, reason: str = "invalid"):
        super().__init__(message)
        self.reason = reason


def _escape(m: re.Match) -> str:
    c = int(m.group(1), 16)
    return chr(c) if c in _UNRESERVED else "%" + m.group(1).upper()


def _normalise_escapes(s: str) -> str:
    return _ESCAPE.sub(_escape, s) if "%" in s else s


def _param_name(segment: str) -> str:
    name = segment.split("=", 1)[0].replace("+", " ")
    if "%" in name:
        name = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)
    return name.lower()


def diagnose(url: str, base: str | None = None) -> InvalidURL:
    """Why the URL Standard rejects url: the first problem found, as an InvalidURL."""
    m = _SCHEME.match(url)
    if not m:
        if base is None:
            return InvalidURL(f"not an absolute URL: {url[:100]!r}", "relative")
        return InvalidURL(f"cannot be resolved against {base[:100]!r}", "malformed")
    scheme = m.group(1).lower()
    if scheme + ":" not in _SCHEMES:
        return InvalidURL(f"unsupported scheme {scheme!r}", "scheme")
    rest = url[m.end():].lstrip("/\\\t\n\r")
    authority = re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        host, _, port = hostport.partition("]")
        host += "]"
        port = port[1:] if port.startswith(":") else port
        if port and not hostport.split("]", 1)[1].startswith(":"):
            return InvalidURL(f"junk after IPv6 address {host!r}", "invalid_host")
    else:
        host, _, port = hostport.partition(":")
    if port.strip("\t\n\r") and (not port.isdigit() or int(port) > 65535):
        return InvalidURL(f"invalid port {port[:20]!r}", "invalid_port")
    if not host:
        return InvalidURL("no host", "no_host")
    if host.startswith("["):
        return InvalidURL(f"invalid IPv6 address {host[:60]!r}", "invalid_host")
    bad = sorted({c for c in host if c in _FORBIDDEN_HOST} - {"%"})
    if bad:
        return InvalidURL(f"forbidden character {bad[0]!r} in host {host[:60]!r}", "invalid_host")
    return InvalidURL(
        f"invalid host {host[:60]!r} (percent-decoding, IDNA or IPv4 rules of the URL Standard)",
        "invalid_host")


class Canonicalizer:
    """canonicalize(url) with a crawl's list of parameters to strip."""

    def __init__(self, strip_params: Iterable[str] = STRIP_PARAMS,
                 strip_prefixes: Iterable[str] = STRIP_PREFIXES):
        self.strip_params = frozenset(p.lower() for p in strip_params)
        self.strip_prefixes = tuple(p.lower() for p in strip_prefixes)

    def _keep(self, segment: str) -> bool:
        name = _param_name(segment)
        return name not in self.strip_params and not name.startswith(self.strip_prefixes)

    def _query(self, search: str) -> str:
        params = [_normalise_escapes(p).replace("%20", "+") for p in search[1:].split("&") if p]
        params = [p for p in params if self._keep(p)]
        if not params:
            return ""
        if len(params) > 1:
            params.sort(key=lambda p: p.partition("="))
        return "?" + "&".join(params)

    def __call__(self, url: str, base: str | None = None) -> str:
        """The canonical form of url (resolved against base first, if given)."""
        scheme, host, path, search = _parse(url, base)
        if scheme not in _SCHEMES:
            raise InvalidURL(f"unsupported scheme {scheme[:-1]!r}", "scheme")
        if not host:
            raise InvalidURL("no host", "no_host")
        path = _normalise_escapes(path)
        return f"{scheme}//{host}{path}{self._query(search) if search else ''}"


def _parse(url: str, base: str | None) -> tuple[str, str, str, str]:
    """(scheme with ':', host with a non-default port, path, search with '?')
    by the URL Standard, or raise InvalidURL."""
    if _lib is None or base is not None:
        try:
            u = ada_url.URL(url, base) if base is not None else ada_url.URL(url)
        except ValueError:
            raise diagnose(url, base) from None
        return u.protocol, u.host, u.pathname, u.search
    b = url.encode("utf-8", "surrogatepass")
    obj = _lib.ada_parse(b, len(b))
    try:
        if not _lib.ada_is_valid(obj):
            raise diagnose(url, base)
        h = _lib.ada_get_href(obj)
        href = _ffi.unpack(h.data, h.length).decode("utf-8")
        c = _lib.ada_get_components(obj)
        # offsets into href; "absent" is 2^32-1 (see ada's url_components)
        start, path_start, search_start, hash_start = (
            c.host_start, c.pathname_start, c.search_start, c.hash_start)
        scheme = href[:c.protocol_end]
    finally:
        _lib.ada_free(obj)
    if href[start:start + 1] == "@":
        start += 1
    elif href[start:start + 2] == "//":
        start += 2
    end = min(search_start, hash_start, len(href))
    return scheme, href[start:path_start], href[path_start:end], \
        href[search_start:min(hash_start, len(href))] if search_start < len(href) else ""


_default = Canonicalizer()


def canonicalize(url: str, base: str | None = None) -> str:
    """Canonical form of url with the default parameter lists (see Canonicalizer)."""
    return _default(url, base)
