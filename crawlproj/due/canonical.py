"""Canonical URLs, so that one resource has one fingerprint (Mercator §3.2).

Scheme and host lower-cased, the host in IDNA form, the default port dropped,
the fragment dropped, dot-segments resolved, percent-encoding normalised, query
parameters sorted (w3lib.url.canonicalize_url does the last three), and session
and tracking parameters removed.
"""

from __future__ import annotations

import posixpath
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

# Parameters that name a session or a campaign, not a resource.
TRACKING_PARAMS = frozenset({
    "gclid", "fbclid", "msclkid", "dclid", "yclid", "mc_cid", "mc_eid",
    "sessionid", "session_id", "jsessionid", "phpsessid", "sid", "aspsessionid",
    "cfid", "cftoken", "_ga", "_gl", "igshid",
})
TRACKING_PREFIXES = ("utm_",)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    """A URL that cannot name a fetchable resource."""


def _strip_params(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs
            if k.lower() not in TRACKING_PARAMS and not k.lower().startswith(TRACKING_PREFIXES)]
    return query if len(kept) == len(pairs) else urlencode(kept)


def canonicalize(url: str) -> str:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"unsupported scheme {scheme!r}")
    host = parts.hostname
    if not host:
        raise InvalidURL("no host")
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(str(exc)) from None
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError as exc:
        raise InvalidURL(f"host not IDNA-encodable: {exc}") from None
    if ":" in host:
        host = f"[{host}]"
    # user:password@ is dropped: credentials are not part of a resource's identity
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = parts.path or "/"
    if "/." in path:
        trailing = path.endswith(("/", "/.", "/.."))
        path = posixpath.normpath(path)
        path = "/" + path.lstrip("/")
        if trailing and not path.endswith("/"):
            path += "/"
    query = _strip_params(parts.query) if parts.query else ""
    return canonicalize_url(urlunsplit((scheme, netloc, path, query, "")))
