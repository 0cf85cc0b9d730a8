"""One indexed page: what the crawl knows of it that a query can find.

A document is keyed by the canonical URL of the URL its content came from
(crawlproj.due.canonical, the DUE's own form), so that a page fetched again,
by any worker, replaces its earlier version instead of adding a second one.
A page that names a canonical URL (``<link rel="canonical">``, RFC 6596) is
keyed by that URL's form instead: pages that name one canonical URL are one
document, one search result (the indexer prefers the canonical page itself).

A page that said noindex (crawlproj/robots/meta.py) is a document too, with
``noindex`` set and no text: it tells the indexer to take the page out of
the index, where an earlier fetch may have put it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import msgpack

from crawlproj.due.canonical import canonicalize
from crawlproj.extract import HTML_TYPES
from crawlproj.urls import InvalidURL, host_of


def document_key(url: str) -> str:
    """The index key of a page: its canonical URL (the URL itself if it has none)."""
    try:
        return canonicalize(url)
    except (InvalidURL, ValueError):
        return url


@dataclass
class Document:
    url: str
    title: str
    text: str
    fetched_at: float
    # [(target URL, anchor text), ...]: where this page's links point (those
    # it followed: a nofollow link vouches for nothing)
    outlinks: list = field(default_factory=list)
    # the canonical URL the page names, "" for none (or itself)
    canonical: str = ""
    # the page said noindex: out of the index
    noindex: bool = False

    @cached_property
    def _key_host(self) -> tuple[str, str]:
        try:
            key = canonicalize(self.canonical or self.url)
        except (InvalidURL, ValueError):
            try:
                return self.url, host_of(self.url)
            except (InvalidURL, ValueError):
                return self.url, ""
        # a canonical URL is scheme://host/...: its host is the URL's host_of,
        # read off without parsing the URL a second time
        return key, key.split("/", 3)[2]

    @property
    def key(self) -> str:
        return self._key_host[0]

    @property
    def host(self) -> str:
        return self._key_host[1]

    @property
    def own_key(self) -> str:
        """The key of the page's own URL (the key, unless it names a canonical URL)."""
        return document_key(self.url) if self.canonical else self.key

    def pack(self) -> bytes:
        # the fields by hand: dataclasses.asdict copies every link pair
        # (20 times the packing itself)
        d = {"url": self.url, "title": self.title, "text": self.text,
             "fetched_at": self.fetched_at, "outlinks": self.outlinks}
        if self.canonical:
            d["canonical"] = self.canonical
        if self.noindex:
            d["noindex"] = True
        return msgpack.packb(d, use_bin_type=True)

    @classmethod
    def unpack(cls, data: bytes) -> Document:
        d = msgpack.unpackb(data, raw=False)
        return cls(url=str(d["url"]), title=str(d.get("title") or ""), text=str(d.get("text") or ""),
                   fetched_at=float(d.get("fetched_at") or 0.0),
                   outlinks=[(str(u), str(a)) for u, a in d.get("outlinks") or ()],
                   canonical=str(d.get("canonical") or ""), noindex=bool(d.get("noindex")))

    @classmethod
    def of_page(cls, url: str, title: str, text: str, fetched_at: float, outlinks: list,
                canonical: str | None, robots) -> Document:
        """The document of a parsed page: robots, the directives it obeyed
        (names, crawlproj/robots/meta.py); outlinks, (url, anchor) pairs of
        the links it followed."""
        if "noindex" in robots:
            # no text: the document only takes the page out of the index
            return cls(url=url, title="", text="", fetched_at=fetched_at, outlinks=outlinks,
                       canonical=_other(canonical, url), noindex=True)
        return cls(url=url, title=title, text=text, fetched_at=fetched_at, outlinks=outlinks,
                   canonical=_other(canonical, url))

    @classmethod
    def from_item(cls, item) -> Document | None:
        """The document of a page item, or None for what is not indexed: a
        content-seen duplicate [Mercator §3, step 4] (its first URL is indexed
        already), an error page, a document that is not HTML."""
        if item.get("duplicate_of") or not 200 <= int(item.get("status") or 0) < 300:
            return None
        ctype = item.get("content_type") or ""
        # no Content-Type: the spider parsed it if it sniffed as HTML
        if ctype not in HTML_TYPES and not (ctype == "" and (item.get("title") or item.get("text"))):
            return None
        return cls.of_page(item.get("final_url") or item["url"], item.get("title") or "",
                           item.get("text") or "", float(item.get("fetch_time") or 0.0),
                           [(o["url"], o.get("anchor") or "") for o in item.get("outlinks") or ()
                            if not o.get("nofollow")],
                           item.get("canonical"), item.get("robots") or ())


def _other(canonical: str | None, url: str) -> str:
    """canonical, unless it is none or the page's own URL: ""."""
    if not canonical or canonical == url or document_key(canonical) == document_key(url):
        return ""
    return canonical
