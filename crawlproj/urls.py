"""The one URL rule: which links a worker follows, which URLs it can fetch,
and the host each belongs to.

Every component that resolves a link, checks a URL or asks for its host asks
here: the extractor (:func:`resolve`), the seeds and the frontier's admission
(:func:`refusal`), the crawl scope (:func:`hostname`, :func:`parse_host`), the
frontier, the stores and the reports (:func:`host_of`), and the DUE's
canonical form (:func:`split`). Mercator §3 (steps 5-6): the link extractor
makes every link absolute, then one URL filter decides what enters the
frontier. With one rule, a URL the extractor yields is never refused by
admission for its host, and a URL admission refuses is never yielded.

The rule is the WHATWG URL Standard (https://url.spec.whatwg.org/), parsed by
ada (``ada_url``), so that the crawler fetches what a browser fetches for the
same link. A link is resolved against the page's base URL as a browser does
(``///test`` on ``http://example.org/`` is ``http://test/``; ``https:x.com/``
is ``https://x.com/``); it is followable when the result is an http(s) URL;
the URL sent is the Standard's serialisation, fragment removed.

Host names. A host is valid when the Standard's host parser accepts it for
an http(s) URL, and nothing more is asked of it:

* characters DNS allows but LDH host names (RFC 952/1123) do not, such as
  ``_`` in ``my_host.example``: browsers fetch them. LDH constrains what
  registries hand out, not what resolvers look up (RFC 2181 §11: any octet),
  and such names exist on hosting services and intranets. A name that does
  not resolve fails at its fetch, like any unresolvable name;
* labels and names are not held to DNS lengths (the Standard's UTS #46 step
  runs with VerifyDnsLength false): a browser tries them; the lookup fails;
* a percent-encoded host is decoded first (``%41.com`` is ``a.com``);
* internationalised names become IDNA by UTS #46 non-transitional processing,
  as in browsers: ``faß.de`` is ``xn--fa-hia.de``, not ``fass.de`` (Python's
  idna codec and w3lib give the latter, another server);
* a host whose last label is a number is an IPv4 address, in any form the
  Standard reads (``0x7f.1`` is ``127.0.0.1``), or invalid
  (``256.256.256.256``, ``foo.09``); IPv6 is compressed, in brackets;
* a trailing dot is kept: ``example.com.`` is another origin to a browser
  (the crawl scope counts it as the same site);
* refused: an empty host, spaces, control characters and the Standard's
  forbidden code points (``<>^|`` ...), and names IDNA rejects.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache

from ada_url import join_url, normalize_url, parse_url

__all__ = [
    "InvalidURL", "diagnose", "split", "resolve", "refusal", "host_of", "hostname",
    "parse_host", "valid_hostname",
]

_SCHEMES = ("http:", "https:")
# A scheme at the start of a URL, after the C0 controls and spaces the parser strips.
_SCHEME = re.compile(r"^[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")
# The URL Standard's forbidden host code points (plus % for an opaque check).
_FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|%") | {chr(c) for c in range(0x20)} | {"\x7f"}
_SURROGATE = re.compile("[\ud800-\udfff]")


class InvalidURL(ValueError):
    """A URL that cannot name a fetchable resource; ``reason`` is a short code,
    ``host`` the host as written when the host is at fault."""

    def __init__(self, message: str, reason: str = "invalid", host: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.host = host


def _ada(function, *args):
    """function(*args) of ada_url, None where the URL Standard fails to parse
    them; a lone surrogate is read as U+FFFD (as a USVString gets it)."""
    try:
        return function(*args)
    except ValueError:
        usv = tuple(_SURROGATE.sub("\ufffd", a) if isinstance(a, str) else a for a in args)
        if usv == args:
            return None
        try:
            return function(*usv)
        except ValueError:
            return None


def _href(url: str, base: str | None = None) -> str | None:
    """The URL Standard's serialisation of url (against base), or None."""
    return _ada(normalize_url, url) if base is None else _ada(join_url, base, url)


_SPLIT = ("href", "protocol", "host", "pathname")


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
        host, sep, port = hostport.partition("]")
        host += sep
        port = port[1:] if port.startswith(":") else port
        if port and not hostport.split("]", 1)[1].startswith(":"):
            return InvalidURL(f"junk after IPv6 address {host!r}", "invalid_host", host)
    else:
        host, _, port = hostport.partition(":")
    if port.strip("\t\n\r") and (not port.isdigit() or int(port) > 65535):
        return InvalidURL(f"invalid port {port[:20]!r}", "invalid_port")
    if not host:
        return InvalidURL("no host", "no_host")
    if host.startswith("["):
        return InvalidURL(f"invalid IPv6 address {host[:60]!r}", "invalid_host", host)
    bad = sorted({c for c in host if c in _FORBIDDEN_HOST} - {"%"})
    if bad:
        return InvalidURL(f"forbidden character {bad[0]!r} in host {host[:60]!r}", "invalid_host",
                          host)
    return InvalidURL(
        f"invalid host {host[:60]!r} (percent-decoding, IDNA or IPv4 rules of the URL Standard)",
        "invalid_host", host)


def split(url: str, base: str | None = None) -> tuple[str, str, str, str]:
    """(scheme with ':', host with a non-default port, path, search with '?')
    of url by the URL Standard (resolved against base, if given), or raise
    InvalidURL."""
    p = _ada(parse_url, url if base is None else _href(url, base) or "", _SPLIT)
    if p is None:
        raise diagnose(url, base)
    # the search as serialised, "?" alone included (ada's search getter gives
    # "" for an empty query): a serialised URL has no "?" before its query
    # nor "#" before its fragment
    href = p["href"]
    q, h = href.find("?"), href.find("#")
    search = href[q:h if h >= 0 else len(href)] if q >= 0 and (h < 0 or q < h) else ""
    return p["protocol"], p["host"], p["pathname"], search


# -- links ---------------------------------------------------------------------


@lru_cache(maxsize=64)
def _query_encoding(encoding: str | None) -> str | None:
    """The encoding a page's links carry their query in, when not UTF-8 (the
    URL Standard's encoding override: a document's encoding, UTF-8 for UTF-16)."""
    if not encoding:
        return None
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    return None if name.startswith("utf") else name


_QUERY_KEEP = frozenset(range(0x21, 0x7F)) - frozenset(b"\"#<>'")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _percent_encode(run: str, encoding: str) -> str:
    """Non-ASCII query characters in the page's encoding, as the Standard's
    "percent-encode after encoding" does: a character the encoding lacks
    becomes an escaped HTML character reference (``%26%23233%3B``)."""
    try:
        data = run.encode(encoding)
    except UnicodeEncodeError:
        if len(run) > 1:
            return "".join(_percent_encode(c, encoding) for c in run)
        return f"%26%23{ord(run)}%3B"
    return "".join(chr(b) if b in _QUERY_KEEP else f"%{b:02X}" for b in data)


def _encode_query(href: str, encoding: str) -> str:
    q = href.find("?")
    h = href.find("#")
    if q < 0 or 0 <= h < q:
        return href
    end = h if h >= 0 else len(href)
    query = href[q + 1:end]
    if query.isascii():
        return href
    query = _NON_ASCII.sub(lambda m: _percent_encode(m.group(), encoding), query)
    return href[:q + 1] + query + href[end:]


def resolve(href: str, base: str | None = None, encoding: str | None = None) -> str | None:
    """The http(s) URL a browser fetches for a link href on a page whose base
    URL is base (href alone when base is None), without its fragment; None
    when there is none (the Standard fails to parse it, or the result is not
    http(s)).

    encoding is the page's: the query of a link on a page that is not in
    UTF-8 is sent in the page's encoding, as browsers do. Never raises."""
    if not href.isascii():
        enc = _query_encoding(encoding)
        if enc is not None:
            href = _encode_query(href, enc)
    if href.startswith(("http://", "https://")):
        # "http://" then the authority, whatever the base (URL Standard, special
        # authority slashes): no parse of the base (half of all links)
        base = None
    url = _href(href, base)
    if url is None or not url.startswith(_SCHEMES):
        return None
    cut = url.find("#")  # a serialised URL has no "#" before its fragment
    return url if cut < 0 else url[:cut]


# -- admission -----------------------------------------------------------------

# diagnose()'s reasons as admission reports them (stats frontier/refused/<reason>)
_REFUSED = {"scheme": "scheme", "invalid_host": "invalid_host"}


def refusal(url: str, max_length: int) -> tuple[str, str] | None:
    """(reason, message) when url must not enter the frontier, else None.

    Reasons: url_too_long, scheme (not http(s)), invalid_host (the host
    rule above), malformed (anything else the Standard rejects)."""
    if len(url) > max_length:
        return "url_too_long", f"URL longer than {max_length} characters"
    p = _ada(parse_url, url, ("protocol",))
    if p is None:
        exc = diagnose(url)
        return _REFUSED.get(exc.reason, "malformed"), str(exc)
    if p["protocol"] not in _SCHEMES:
        return "scheme", f"unsupported scheme {p['protocol'][:-1]!r}"
    return None


# -- hosts ---------------------------------------------------------------------


def host_of(url: str) -> str:
    """The politeness key: one name per server, for its back queue, its lease
    and its robots.txt entry. The URL Standard's host of url (lower case,
    IDNA, IP addresses in one form), without the DNS root's trailing dot
    (``host.`` is ``host``), with its port unless it is the scheme's default
    (``www.example.com``, ``xn--bcher-kva.de:8080``, ``[::1]:8080``); "" for
    a URL that does not parse or has no host."""
    p = _ada(parse_url, url, ("host",))
    return server_key(p["host"]) if p is not None else ""


def server_key(host: str) -> str:
    """A URL Standard host (with its port) as the politeness key: a fully
    qualified name's one trailing dot, the DNS root, dropped."""
    name, colon, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    # one dot only: without it `foo.09..` would end in a number, which the URL
    # Standard refuses as a host
    if name.endswith(".") and not name.endswith("..") and len(name) > 1:
        return name[:-1] + colon + port
    return host


def hostname(url: str) -> str:
    """The URL Standard's host of url, without the port; "" for a URL that
    does not parse or has no host."""
    p = _ada(parse_url, url, ("hostname",))
    return p["hostname"] if p is not None else ""


# A host given alone: characters that would end it inside a URL.
_HOST_ENDS = re.compile(r"[\x00-\x20/?#\\@]")


def parse_host(host: str) -> str | None:
    """A host name or IP literal given alone, as the URL Standard's host parser
    returns it for an http(s) URL (lower-case, IDNA, IPv4 dotted-decimal, IPv6
    compressed in brackets; brackets may be omitted); None if it is not one."""
    if not host or _HOST_ENDS.search(host):
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal written without brackets
    elif host.startswith("[") and not host.endswith("]"):
        return None  # "[::1]:80" is a host and a port
    p = _ada(parse_url, f"http://{host}/", ("hostname", "port"))
    return p["hostname"] if p is not None and not p["port"] else None


def valid_hostname(host: str) -> bool:
    """Whether host, given alone, is a valid host (see the module docstring)."""
    return parse_host(host) is not None
