"""Where sitemaps come from, and which URLs a sitemap may give.

Discovery (sitemaps.org, "Informing search engine crawlers"): a robots.txt
names its host's sitemaps in ``Sitemap:`` lines (RFC 9309 §2.2.4 leaves
such records to other specifications), full URLs, outside every group. When
a host's robots.txt names none, ``/sitemap.xml`` at its root may be tried
(SITEMAP_GUESS, off by default). A sitemap index names further sitemaps.

Which URLs a sitemap may list (sitemaps.org, "Sitemap file location" and
"Sitemaps & Cross Submits"): those on its own origin (scheme, host, port)
under the directory the sitemap sits in; a sitemap named by a host's
robots.txt may list any URL of its own origin, and of the origin of that
robots.txt, which vouches for it (a sitemap kept on another host). The
sitemaps an index names are held to the index's rule, and each is then
held to its own (none of them is named by robots.txt). A URL that breaks
the rule is dropped, and counted by its reason.

A sitemap request carries, in its meta (stored with it in the frontier,
msgpack), ``sitemap: [level, robots origin or ""]``: how many indexes lie
between it and the robots.txt (or guess) that named it, and the origin whose
robots.txt named it. Its URLs and the sitemaps it names carry
``hop: "M"``, the last hop of their discovery path in the crawl log
(Heritrix's Hop.MANIFEST).
"""

from __future__ import annotations

from crawlproj.urls import InvalidURL, resolve, server_key, split

__all__ = ["HOP", "MANIFEST", "SITEMAP", "SitemapScope", "guess_url", "read_meta",
           "sitemap_lines", "sitemap_meta"]

# request meta keys
SITEMAP = "sitemap"
HOP = "hop"
MANIFEST = "M"

# sitemaps.org: a URL "must be less than 2,048 characters"
MAX_URL = 2048


def sitemap_lines(robots_body: bytes | None, origin: str) -> list[str]:
    """The sitemap URLs a robots.txt names, in order, each once. A relative
    value is resolved against the origin; one that is no http(s) URL is left
    out."""
    if not robots_body:
        return []
    out: list[str] = []
    seen: set[str] = set()
    text = robots_body.decode("utf-8", errors="replace").lstrip("\ufeff")
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        field, colon, value = line.partition(":")
        if not colon or field.strip().lower() not in ("sitemap", "site-map"):
            continue
        url = resolve(value.strip(), origin + "/")
        if url and len(url) < MAX_URL and url not in seen:
            seen.add(url)
            out.append(url)
    return out


def guess_url(origin: str) -> str:
    """The sitemap tried at a host's root when its robots.txt names none."""
    return origin + "/sitemap.xml"


def sitemap_meta(level: int, robots_origin: str = "") -> list:
    return [level, robots_origin]


def read_meta(value) -> tuple[int, str] | None:
    """(level, robots origin) of a request's sitemap meta, None when it is
    not one (a payload is no more trusted than a page)."""
    if not (isinstance(value, (list, tuple)) and len(value) == 2):
        return None
    level, origin = value
    if not isinstance(level, int) or isinstance(level, bool) or level < 0 \
            or not isinstance(origin, str) or len(origin) > MAX_URL:
        return None
    return level, origin


def _origin_path(url: str) -> tuple[str, str] | None:
    try:
        scheme, host, path, _ = split(url)
    except InvalidURL:
        return None
    if scheme not in ("http:", "https:") or not host:
        return None
    return f"{scheme}//{server_key(host)}", path or "/"


class SitemapScope:
    """The URLs one sitemap may list (see the module's doc)."""

    __slots__ = ("origins", "directory")

    def __init__(self, sitemap_url: str, robots_origin: str = ""):
        own = _origin_path(sitemap_url) or ("", "/")
        self.origins = {own[0]}
        if robots_origin:
            named = _origin_path(robots_origin + "/")
            if named is not None:
                self.origins.add(named[0])
            self.directory = "/"
        else:
            self.directory = own[1][:own[1].rfind("/") + 1] or "/"

    def check(self, loc: str) -> tuple[str | None, str | None]:
        """(the URL to fetch, None) for an entry's <loc>, or (None, the
        reason it is dropped: malformed, cross_host, outside_path)."""
        if len(loc) >= MAX_URL or not loc[:8].lower().startswith(("http://", "https://")):
            return None, "malformed"  # sitemaps.org: fully qualified, under 2,048 characters
        url = resolve(loc)
        parts = _origin_path(url) if url else None
        if parts is None:
            return None, "malformed"
        origin, path = parts
        if origin not in self.origins:
            return None, "cross_host"
        if not path.startswith(self.directory):
            return None, "outside_path"
        return url, None

    def __repr__(self) -> str:
        return f"SitemapScope({sorted(self.origins)}, {self.directory!r})"
