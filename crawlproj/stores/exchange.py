"""What the record middleware captures of one download attempt.

An :class:`Exchange` is a request that got a response: the request head as it
was sent (rebuilt from Scrapy's Request after every downloader middleware has
added its headers), the response head as it came off the wire (Scrapy's
HTTP/1.1 handler, internals.record_response_heads; rebuilt from the Response, and
marked so, where no head was received that way), the body as it came (before
HttpCompressionMiddleware decodes it, de-chunked by Twisted), and when and
how long. A
:class:`FailedAttempt` is a request that got no response (DNS error, refused
connection, timeout, body over DOWNLOAD_MAXSIZE, robots.txt exclusion).

Both carry what Heritrix's crawl.log needs (discovery path, referrer) and the
Request object itself, so that a page a store failed to keep can be put back
in the frontier.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from crawlproj.internals import RESPONSE_HEAD
from crawlproj.robots import ROBOTS_FOR
from crawlproj.sitemaps.discovery import HOP, MANIFEST

# Heritrix fetch status codes for attempts without an HTTP status
# (org.archive.modules.fetcher.FetchStatusCodes).
S_DOMAIN_UNRESOLVABLE = -1
S_CONNECT_FAILED = -2
S_CONNECT_LOST = -3
S_TIMEOUT = -4
S_RUNTIME_EXCEPTION = -5
S_DOMAIN_PREREQUISITE_FAILURE = -6      # Heritrix: the host's DNS lookup had failed
S_UNFETCHABLE_URI = -7
S_BLOCKED_BY_CUSTOM_PROCESSOR = -5002   # a middleware refused the request
S_ROBOTS_PRECLUDED = -9998

# Request headers that are the crawler's own business, not the site's.
_PRIVATE_REQUEST_HEADERS = (b"Proxy-Authorization",)
# A body Twisted has already de-chunked must not claim to be chunked, or a
# WARC reader would try to de-chunk it again (the name is kept, renamed, so
# the record still says how it was sent; wpull and others do the same).
_RENAMED_RESPONSE_HEADERS = {b"transfer-encoding": b"X-Crawlproj-Transfer-Encoding"}


def sha1_form(digest: bytes) -> str:
    """The WARC digest form of a SHA-1 digest (20 bytes): 'sha1:' + its base32."""
    return "sha1:" + base64.b32encode(digest).decode("ascii")


def sha1_b32(data: bytes) -> str:
    """The WARC payload digest of data."""
    return sha1_form(hashlib.sha1(data).digest())


def mime_of(value: bytes | str | None) -> str:
    if not value:
        return ""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value.split(";", 1)[0].strip().lower()


def _header_lines(headers) -> list[tuple[bytes, bytes]]:
    out = []
    for name, values in headers.items():
        for value in values:
            out.append((name, value))
    return out


def request_head(request) -> bytes:
    """`GET /path HTTP/1.1` + Host + the request's headers, as the origin
    server sees them (the WARC convention, also when sent through a proxy)."""
    parts = urlsplit(request.url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    lines = [f"{request.method} {target} HTTP/1.1".encode("latin-1")]
    names = {n.lower() for n in request.headers}
    if b"host" not in names:
        lines.append(b"Host: " + parts.netloc.encode("idna" if not parts.netloc.isascii() else "ascii"))
    for name, value in _header_lines(request.headers):
        if name in _PRIVATE_REQUEST_HEADERS:
            continue
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def received_head(raw: bytes | None, status: int) -> bytes | None:
    """The response head as the server sent it (internals.record_response_heads),
    Transfer-Encoding renamed since the body is stored de-chunked; None when
    there is none, or it is not the head of this status (an interim 1xx)."""
    if not raw:
        return None
    first, _, rest = raw.partition(b"\r\n")
    words = first.split(b" ", 2)
    if len(words) < 2 or words[1] != str(status).encode():
        return None
    lines = [first]
    for line in rest[:-4].split(b"\r\n") if rest[:-4] else ():
        name, sep, value = line.partition(b":")
        renamed = _RENAMED_RESPONSE_HEADERS.get(name.strip().lower())
        lines.append(renamed + sep + value if renamed else line)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def response_head(response) -> bytes:
    """The response head rebuilt from Scrapy's Response: the reason phrase is
    the standard one, headers come grouped by name in canonical case, and
    Content-Length stands for the connection headers Twisted keeps apart."""
    protocol = getattr(response, "protocol", None) or "HTTP/1.1"
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    lines = [f"{protocol} {response.status} {reason}".rstrip().encode("latin-1")]
    for name, value in _header_lines(response.headers):
        name = _RENAMED_RESPONSE_HEADERS.get(name.lower(), name)
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def discovery_path(request) -> str:
    """Heritrix's hop path: L per link hop from a seed, M for the last when it
    was found in a sitemap (Hop.MANIFEST: the sitemaps robots.txt names and
    the URLs they list), R per redirect, P for a prerequisite (robots.txt),
    '-' for a seed; at most the last 50 hops."""
    meta = request.meta
    if is_robots_request(request):
        return "P"
    hops = "L" * int(meta.get("depth") or 0)
    if meta.get(HOP) == MANIFEST:
        hops = hops[:-1] + MANIFEST
    hops += "R" * int(meta.get("redirect_times") or 0)
    return hops[-50:] or "-"


# Request meta key: the download slot the record middleware gave the request
# (the crawl log's thread column); a '_' key, never sent to the frontier.
SLOT = "_crawlproj_slot"


def via(request) -> str:
    """The URL that led to request: the redirecting URL, the referrer, or for
    a robots.txt fetch the page that needed it (Heritrix's via of a
    prerequisite)."""
    needed_by = request.meta.get(ROBOTS_FOR)
    if needed_by is not None:
        return getattr(needed_by, "url", None) or "-"
    redirects = request.meta.get("redirect_urls")
    if redirects:
        return redirects[-1]
    referer = request.headers.get(b"Referer")
    return referer.decode("latin-1") if referer else "-"


def is_robots_request(request) -> bool:
    return bool(request.meta.get("dont_obey_robotstxt")) and urlsplit(request.url).path == "/robots.txt"


@dataclass
class Exchange:
    """A download attempt that got a response."""

    request: Any                 # scrapy Request, for requeueing
    url: str
    status: int
    request_head: bytes
    response_head: bytes
    body: bytes
    content_type: str            # MIME type without parameters, "" if none
    started: float               # epoch seconds: the request went to the downloader
    duration: float              # seconds until the response was complete
    ip: str | None = None        # the server's address (None through a proxy)
    hops: str = "-"
    via: str = "-"
    robots: bool = False
    retries: int = 0
    slot: int = 0                # the worker's download slot (the crawl log's thread)
    head_rebuilt: bool = False   # response_head is rebuilt, not the head as received
    noarchive: bool = False      # the page said noarchive (crawlproj/robots/meta.py)
    _sha1: bytes | None = field(default=None, repr=False)
    _digest: str | None = field(default=None, repr=False)

    @property
    def sha1(self) -> bytes:
        """The payload's SHA-1, computed once per body for every store."""
        if self._sha1 is None:
            self._sha1 = hashlib.sha1(self.body).digest()
        return self._sha1

    @property
    def payload_digest(self) -> str:
        if self._digest is None:
            self._digest = sha1_form(self.sha1)
        return self._digest

    @property
    def digest64(self) -> bytes:
        """8 bytes of the payload's SHA-1: the content digest page metadata keeps."""
        return self.sha1[:8]

    @classmethod
    def capture(cls, request, response, started: float, ended: float) -> Exchange:
        proxied = bool(request.meta.get("proxy"))
        ip = None
        if not proxied and getattr(response, "ip_address", None) is not None:
            ip = str(response.ip_address)
        head = received_head(request.meta.pop(RESPONSE_HEAD, None), response.status)
        return cls(
            request=request, url=response.url, status=response.status,
            request_head=request_head(request), response_head=head or response_head(response),
            head_rebuilt=head is None,
            body=response.body, content_type=mime_of(response.headers.get(b"Content-Type")),
            started=started, duration=max(0.0, ended - started), ip=ip,
            hops=discovery_path(request), via=via(request), robots=is_robots_request(request),
            retries=int(request.meta.get("retry_times") or 0), slot=request.meta.get(SLOT) or 0,
        )


@dataclass
class FailedAttempt:
    """A download attempt that got no response."""

    request: Any
    url: str
    status: int                  # a negative Heritrix code
    reason: str                  # exception class name, for the log's annotations
    started: float
    duration: float
    hops: str = "-"
    via: str = "-"
    robots: bool = False
    retries: int = 0
    slot: int = 0
