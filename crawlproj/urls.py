"""The one URL rule: which URLs a worker can fetch, and the host each belongs to.

Every component that asks "what host is this?" or "may this URL enter the
crawl?" asks here: the extractor, the seeds, the crawl scope, the frontier's
admission, the stores and the reports. Mercator §3 (step 6) runs every
extracted URL through one URL filter before the DUE.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def valid_hostname(host: str) -> bool:
    """A DNS name of LDH labels (after IDNA), or an IP literal."""
    if not host or len(host) > 253:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    return all(_LABEL.match(label) for label in labels) and not labels[-1].isdigit()


def refusal(url: str, max_length: int) -> tuple[str, str] | None:
    """(reason, message) when url must not enter the frontier, else None."""
    if len(url) > max_length:
        return "url_too_long", f"URL longer than {max_length} characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return "malformed", f"malformed URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return "scheme", f"unsupported scheme {parts.scheme!r}"
    try:
        ascii_host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return "invalid_host", f"host {host!r} is not a valid IDNA name"
    if not valid_hostname(ascii_host):
        return "invalid_host", f"host {host!r} is not a valid host name"
    return None


def host_of(url: str) -> str:
    """The politeness key: the lower-cased host name with its port, if any."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host.isascii():
        host = host.encode("idna").decode("ascii")
    return f"{host}:{parts.port}" if parts.port else host
