"""What a page says to crawlers besides robots.txt: robots meta tags, the
X-Robots-Tag header, link relations, canonical URLs and refreshes.

robots.txt (RFC 9309) says which URLs a crawler may fetch; what it may do
with a page it fetched is said by the page: ``<meta name="robots"
content="noindex, nofollow">`` in its HTML, or ``X-Robots-Tag: noindex`` in
its response head (Google's robots meta specification, which Bing, Nutch,
StormCrawler and Heritrix read alike), and per link ``rel="nofollow"`` (and
its kinds ``ugc`` and ``sponsored``, HTML's link types registry). Mercator
§3 counts honouring such requests among a courteous crawler's duties.

This module reads those values; crawlproj/extract.py finds the tags in its
one pass over a page's tree, the web spider acts on what they say. Nothing
here raises on bad input: a value that cannot be read says nothing.

Directives that concern this crawler (:class:`Directives`):

* ``noindex``: the page is kept (WARC) but not indexed for search;
* ``nofollow``: the page's links are recorded, marked, and not followed;
* ``none``: both of those; ``all``, ``index``, ``follow``: nothing (the
  default, and never a reason to undo a restrictive directive: when values
  disagree, the more restrictive one applies, as Google reads them);
* ``noarchive``: the page is not served from the crawl's archive (left out
  of the CDXJ index that replay reads, marked in its WARC record);
* ``nosnippet``: recorded in the item;
* ``unavailable_after: DATE``: noindex once the date has passed.

Other directives (``max-snippet: 20``, ``noimageindex``, ``notranslate``, ...)
are read so that their values are not taken for a user agent, then ignored.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from crawlproj.urls import resolve

__all__ = [
    "Directives",
    "NOTHING",
    "NOFOLLOW_RELS",
    "agent_tokens",
    "obeyed_agents",
    "parse_content",
    "parse_x_robots_tag",
    "link_header_canonical",
    "with_link_header",
    "with_head",
    "refresh_url",
    "is_nofollow_rel",
]

# The names a crawler's directives may be addressed by: robots (every
# crawler) and this crawler's product token (RFC 9309 §2.2.1).
ROBOTS = "robots"
PRODUCT = "crawlproj"

# Link types whose links a crawler does not follow (HTML's link types:
# nofollow; Google's ugc and sponsored, which imply it).
NOFOLLOW_RELS = frozenset({"nofollow", "ugc", "sponsored"})

# Directives known to Google's, Bing's and Yandex' specifications, so that one
# followed by ":" is never read as a user agent's name.
_VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview",
                     "max-video-preview"})
_KNOWN = _VALUED | frozenset({
    "all", "none", "index", "noindex", "follow", "nofollow", "noarchive", "nocache",
    "nosnippet", "noimageindex", "notranslate", "noodp", "noydir", "indexifembedded",
    "noai", "noimageai",
})

_WS = " \t\n\r\f"
# the start of a comma-separated part: a name and a colon ("crawlproj:",
# "unavailable_after:", "max-snippet:")
_NAME_COLON = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*:(.*)\Z", re.S)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Directives:
    """The restrictive directives that apply to this crawler; | combines."""

    noindex: bool = False
    nofollow: bool = False
    noarchive: bool = False
    nosnippet: bool = False

    def __or__(self, other: Directives) -> Directives:
        if not other:
            return self
        if not self:
            return other
        return Directives(self.noindex or other.noindex, self.nofollow or other.nofollow,
                          self.noarchive or other.noarchive, self.nosnippet or other.nosnippet)

    def __bool__(self) -> bool:
        return self.noindex or self.nofollow or self.noarchive or self.nosnippet

    def names(self) -> list[str]:
        """The directives as the page item lists them (item["robots"])."""
        return [n for n in ("noindex", "nofollow", "noarchive", "nosnippet") if getattr(self, n)]


NOTHING = Directives()


def agent_tokens(bot_name: str | None, user_agent: str | None) -> frozenset[str]:
    """The names this crawler answers to in meta tags and X-Robots-Tag, lower
    case: crawlproj, the project's BOT_NAME, and the product token of the
    User-Agent robots.txt is matched with (ROBOTSTXT_USER_AGENT or
    USER_AGENT: the word before its first "/", RFC 9309 §2.2.1)."""
    names = {PRODUCT}
    for value in (bot_name, (user_agent or "").split("/", 1)[0]):
        value = (value or "").strip().lower()
        if value and re.fullmatch(r"[a-z0-9_.-]+", value):
            names.add(value)
    return frozenset(names)


def obeyed_agents(settings) -> frozenset[str] | None:
    """The names this crawler answers to (:func:`agent_tokens`) as a crawl's
    settings give them, or None when ROBOTS_META_OBEY is off."""
    if not settings.getbool("ROBOTS_META_OBEY"):
        return None
    return agent_tokens(settings.get("BOT_NAME"),
                        settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT"))


def _date(value: str) -> float | None:
    """Epoch seconds of an unavailable_after date (RFC 822, RFC 850, ISO
    8601, the forms Google reads); None when it is none of them."""
    value = value.strip().strip("\"'")
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _apply(flags: dict[str, bool], parts: list[str], now: float) -> None:
    """Set flags from one agent's comma-separated parts."""
    i = 0
    while i < len(parts):
        part = parts[i].strip(_WS).lower()
        i += 1
        if not part:
            continue
        m = _NAME_COLON.match(part)
        if m is not None and m.group(1) in _VALUED:
            if m.group(1) == "unavailable_after":
                value = m.group(2)
                when = _date(value)
                # an RFC 850 date has a comma of its own ("Sunday, 06-Nov-94 ...")
                if when is None and i < len(parts):
                    when = _date(value + "," + parts[i])
                    if when is not None:
                        i += 1
                if when is not None and when <= now:
                    flags["noindex"] = True
            continue
        # "noindex nofollow": spaces where commas belong, a common slip
        for word in _SPACES.split(part) if " " in part or "\t" in part else (part,):
            if word == "none":
                flags["noindex"] = flags["nofollow"] = True
            elif word in ("noindex", "nofollow", "noarchive", "nosnippet"):
                flags[word] = True
            elif word == "nocache":  # Bing's name for noarchive
                flags["noarchive"] = True


def _directives(flags: dict[str, bool]) -> Directives:
    if not flags:
        return NOTHING
    return Directives(**flags)


def parse_content(value: str | None, now: float | None = None) -> Directives:
    """The directives of a robots meta tag's content ("noindex, nofollow"):
    comma-separated, any case and spacing; unknown words are ignored."""
    if not value:
        return NOTHING
    flags: dict[str, bool] = {}
    _apply(flags, value.split(","), time.time() if now is None else now)
    return _directives(flags)


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def parse_x_robots_tag(values, agents: frozenset[str], now: float | None = None) -> Directives:
    """The directives for this crawler in X-Robots-Tag header values (each
    header line one value; several allowed).

    A value may be addressed to a crawler: ``otherbot: noindex, nofollow``
    applies to otherbot alone, ``crawlproj: noindex`` to this one (its
    ``agents``, see :func:`agent_tokens`); without a name, to every crawler.
    A name switches the crawler addressed for the rest of its value
    (``a: noindex, b: nofollow``). A name is any word before a colon that is
    not a directive (``unavailable_after: ...`` and ``max-snippet: ...`` are
    directives)."""
    now = time.time() if now is None else now
    flags: dict[str, bool] = {}
    for raw in values or ():
        mine: list[str] = []
        applies = True
        for part in _text(raw).split(","):
            m = _NAME_COLON.match(part)
            if m is not None:
                name = m.group(1).lower()
                if name not in _KNOWN:
                    applies = name in agents
                    part = m.group(2)
            if applies:
                mine.append(part)
        _apply(flags, mine, now)
    return _directives(flags)


def is_nofollow_rel(rel: str) -> bool:
    """Whether a link's rel attribute (space-separated link types, any case)
    asks crawlers not to follow it."""
    rel = rel.lower()
    # most rel values (noopener, noreferrer, bookmark, tag) contain none of
    # the words: three substring tests before any split (it runs per link)
    if "nofollow" not in rel and "ugc" not in rel and "sponsored" not in rel:
        return False
    return not NOFOLLOW_RELS.isdisjoint(rel.split())


# RFC 8288 §3: Link = #( "<" URI-Reference ">" *( ";" link-param ) )
_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,<]*)*)")
_PARAM = re.compile(r"""([A-Za-z0-9!#$&+.^_`|~-]+\*?)\s*=\s*("(?:[^"\\]|\\.)*"|[^;,\s]*)""")


def link_header_canonical(values, base: str) -> str | None:
    """The canonical URL a Link header names (``Link: <url>; rel="canonical"``,
    RFC 6596 and RFC 8288, the form Google reads for non-HTML documents),
    resolved against base; None when none does, or when they disagree."""
    found: set[str] = set()
    for raw in values or ():
        for m in _LINK.finditer(_text(raw)):
            for name, value in _PARAM.findall(m.group(2)):
                if name.lower() != "rel":
                    continue
                rels = value.strip('"').lower().split()
                if "canonical" in rels:
                    url = resolve(m.group(1).strip(_WS), base)
                    if url is not None:
                        found.add(url)
    return found.pop() if len(found) == 1 else None


def with_link_header(canonical: str | None, values, base: str) -> str | None:
    """The canonical URL of a page whose tags name canonical (None: none)
    and whose Link headers are values: one URL if they agree, else None
    (RFC 6596 §5: a page names one canonical URL)."""
    if not values:
        return canonical
    named = link_header_canonical(values, base)
    if named is None:
        return canonical
    return named if canonical in (None, named) else None


def with_head(header, url: str, agents: frozenset[str] | None, robots: Directives = NOTHING,
              canonical: str | None = None, refresh: str | None = None
              ) -> tuple[Directives, str | None, str | None]:
    """(robots, canonical, refresh) of a page fetched from url: what its tags
    said (crawlproj/extract.py) with what its response head adds, header(name)
    giving that header's values (a list): X-Robots-Tag for this crawler
    (agents; None: robots directives are not obeyed, NOTHING), the Link
    header's canonical URL, the Refresh header where the page has no refresh
    of its own. A refresh to the page itself leads nowhere new (None)."""
    if agents is None:
        robots = NOTHING
    else:
        values = header("X-Robots-Tag")
        if values:
            robots = robots | parse_x_robots_tag(values, agents)
    canonical = with_link_header(canonical, header("Link"), url)
    if refresh is None:
        values = header("Refresh")
        if values:
            refresh = refresh_url(values[0], url)
    return robots, canonical, None if refresh == url else refresh


_ASCII_DIGITS = "0123456789"


def refresh_url(value: str | bytes | None, base: str) -> str | None:
    """The URL a refresh leads to (``<meta http-equiv="refresh" content="5;
    url=/next">`` or the Refresh header), resolved against base: HTML's
    "shared declarative refresh steps". None for a refresh of the page
    itself, a value that does not parse, or a URL that is not http(s)."""
    if not value:
        return None
    s = _text(value)
    i, n = 0, len(s)
    while i < n and s[i] in _WS:
        i += 1
    start = i
    while i < n and s[i] in _ASCII_DIGITS:
        i += 1
    if i == start and not (i < n and s[i] == "."):
        return None
    while i < n and (s[i] in _ASCII_DIGITS or s[i] == "."):
        i += 1
    if i < n and s[i] not in ";," and s[i] not in _WS:
        return None
    while i < n and s[i] in _WS:
        i += 1
    if i < n and s[i] in ";,":
        i += 1
    while i < n and s[i] in _WS:
        i += 1
    if i >= n:
        return None
    url = s[i:]
    if url[:3].lower() == "url":
        j = 3
        while j < len(url) and url[j] in _WS:
            j += 1
        if j < len(url) and url[j] == "=":
            j += 1
            while j < len(url) and url[j] in _WS:
                j += 1
            url = url[j:]
    if url[:1] in ("'", '"'):
        quote = url[0]
        url = url[1:].split(quote, 1)[0]
    url = url.strip(_WS)
    if not url:
        return None
    return resolve(url, base)
