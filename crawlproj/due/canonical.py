"""Canonical URLs, so that one resource has one fingerprint (Mercator §3.2).

Mercator's DUE compares fingerprints of URLs, so two spellings of one resource
must become one string first. The URL is parsed by the crawl's URL rule
(crawlproj.urls: the WHATWG URL Standard, by ada, as browsers), which already gives:
scheme and host lower-cased, the host in IDNA (UTS #46) form, IPv4 numbers in
dotted-decimal form and IPv6 compressed, the default port dropped, dot-segments
resolved, and characters that must be percent-encoded encoded. On top of it:

* the DNS root's trailing dot is dropped (``host.`` is ``host``, as for the
  politeness key, crawlproj.urls.server_key);
* the fragment and the user:password@ part are dropped (neither names a
  different resource on the server);
* percent-encoding is normalised as RFC 3986 §6.2.2.2 says: escapes of
  unreserved characters are decoded (``%7E`` -> ``~``), other escapes get
  upper-case hex digits; in the query a space is ``+`` (as w3lib's
  canonicalize_url and HTML forms write it); the characters RFC 3986 allows
  in no path or query and the URL Standard leaves as they are there
  (``[ ] \\ ^ ` { | }``) are percent-encoded, as Scrapy's Request sends them,
  so that a link and the page fetched for it have one fingerprint;
* query parameters are sorted by name, then value, and empty ones dropped;
* session and tracking parameters are removed: a configurable list of names
  (DUE_STRIP_PARAMS) and name prefixes (DUE_STRIP_PARAM_PREFIXES, ``utm_``),
  from the query and from the parameters of path segments (``;name=value``,
  RFC 3986 §3.3), where servlet containers put a session id
  (``/item.jsp;jsessionid=...``) and the Internet Archive's canonicaliser
  strips it; other path parameters belong to the resource and are kept.

w3lib.url.canonicalize_url does the last three on a urllib.parse split, which
does not follow the URL Standard (``http://0x7f.1/`` is 127.0.0.1 to every
browser) and costs several times as much, where every link goes through this.
A URL that is not a valid http(s) URL raises :class:`InvalidURL` with a reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from crawlproj.urls import InvalidURL, server_key, split

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
# ASCII the URL Standard leaves unescaped in a path or query but RFC 3986 forbids there
_NOT_IN_URI = re.compile(r"[\[\\\]^`{|}]")


def _escape(m: re.Match) -> str:
    c = int(m.group(1), 16)
    return chr(c) if c in _UNRESERVED else "%" + m.group(1).upper()


def _encode(m: re.Match) -> str:
    return f"%{ord(m.group()):02X}"


def _normalise_escapes(s: str) -> str:
    return _ESCAPE.sub(_escape, s) if "%" in s else s


def _param_name(segment: str) -> str:
    name = segment.split("=", 1)[0].replace("+", " ")
    if "%" in name:
        name = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)
    return name.lower()


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

    def _path_params(self, path: str) -> str:
        out = []
        for segment in path.split("/"):
            if ";" in segment:
                name, *params = segment.split(";")
                segment = ";".join([name, *(p for p in params if self._keep(p))])
            out.append(segment)
        return "/".join(out)

    def __call__(self, url: str, base: str | None = None) -> str:
        """The canonical form of url (resolved against base first, if given)."""
        scheme, host, path, search = split(url, base)
        if scheme not in _SCHEMES:
            raise InvalidURL(f"unsupported scheme {scheme[:-1]!r}", "scheme")
        if not host:
            raise InvalidURL("no host", "no_host")
        host = server_key(host)  # host. is host, for the DUE as for politeness
        # of _NOT_IN_URI, the URL Standard leaves only [ ] | raw in a path
        if "[" in path or "]" in path or "|" in path:
            path = _NOT_IN_URI.sub(_encode, path)
        if search and _NOT_IN_URI.search(search):
            search = _NOT_IN_URI.sub(_encode, search)
        path = _normalise_escapes(path)
        if ";" in path:
            path = self._path_params(path)
        return f"{scheme}//{host}{path}{self._query(search) if search else ''}"


_default = Canonicalizer()


def canonicalize(url: str, base: str | None = None) -> str:
    """Canonical form of url with the default parameter lists (see Canonicalizer)."""
    return _default(url, base)
