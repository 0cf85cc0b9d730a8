"""URL canonicalisation (crawlproj.due.canonical) against the WHATWG URL test data.

What canonicalisation must keep, from the reference vectors in
shared/data/url/ (web-platform-tests' urltestdata.json, toascii.json and
IdnaTestV2.json): every valid http(s) URL there stays a valid URL that denotes
the same resource as the URL Standard's own parse; every invalid one is
rejected with a reason. What it must change, from hand-written cases.

"The same resource" is checked here independently of the implementation: the
canonical URL is parsed again and compared field by field with the expected
parse in the test data, up to the equivalences canonicalisation is allowed
(RFC 3986 §6.2.2 percent-encoding, query order, '+' for a space in a query,
tracking parameters, fragment, credentials).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote_plus

import ada_url
import pytest

from crawlproj.due.canonical import STRIP_PARAMS, Canonicalizer, InvalidURL, canonicalize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "url"
if not DATA.exists():
    DATA = Path("/work/shared/data/url")


def _load(name):
    return [e for e in json.loads((DATA / name).read_text(encoding="utf-8")) if isinstance(e, dict)]


URLTESTS = _load("urltestdata.json")
HTTP = ("http:", "https:")


# -- an independent notion of "the same resource" ------------------------------

_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# ASCII that RFC 3986 allows in no path or query: raw or escaped, one spelling.
_NOT_IN_URI = set("[\\]^`{|}")


def norm_escapes(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "%" and re.fullmatch(r"[0-9A-Fa-f]{2}", s[i + 1:i + 3]):
            c = chr(int(s[i + 1:i + 3], 16))
            out.append(c if c in _UNRESERVED else s[i:i + 3].upper())
            i += 3
        else:
            out.append(f"%{ord(s[i]):02X}" if s[i] in _NOT_IN_URI else s[i])
            i += 1
    return "".join(out)


def tracking(name: str) -> bool:
    name = unquote_plus(name).lower()
    return name in STRIP_PARAMS or name.startswith("utm_")


def query_params(search: str, drop_tracking: bool) -> list[tuple[str, str]]:
    pairs = []
    for p in search.lstrip("?").split("&"):
        if not p:
            continue
        k, eq, v = norm_escapes(p).replace("%20", "+").partition("=")
        if drop_tracking and tracking(k):
            continue
        pairs.append((k, eq + v))
    return sorted(pairs)


def without_root_dot(host: str) -> str:
    """host. is host: the DNS root's one trailing dot is no other server."""
    return host[:-1] if host.endswith(".") and not host.endswith("..") and len(host) > 1 else host


def assert_same_resource(canonical: str, expected: dict):
    u = ada_url.URL(canonical)  # raises if canonicalisation made it invalid
    assert u.protocol == expected["protocol"]
    assert u.hostname == without_root_dot(expected["hostname"])
    assert u.port == expected["port"]
    assert norm_escapes(u.pathname) == norm_escapes(expected["pathname"])
    assert query_params(u.search, False) == query_params(expected["search"], True)
    assert (u.username, u.password, u.hash) == ("", "", "")


# -- the reference vectors -----------------------------------------------------

def _id(e):
    return repr(e["input"])[:60] + (f" @ {e['base'][:30]}" if e.get("base") else "")


@pytest.mark.parametrize("entry", [e for e in URLTESTS if not e.get("failure")
                                   and e["protocol"] in HTTP], ids=_id)
def test_valid_http_urls_keep_their_resource(entry):
    base = entry.get("base")
    c = canonicalize(entry["input"], base)
    assert_same_resource(c, entry)
    # the serialised form canonicalises to the same string, and canonical is a fixpoint
    assert canonicalize(entry["href"]) == c
    assert canonicalize(c) == c


def test_other_schemes_are_refused_with_a_reason():
    others = [e for e in URLTESTS if not e.get("failure") and e["protocol"] not in HTTP]
    assert len(others) > 200
    for e in others:
        with pytest.raises(InvalidURL) as info:
            canonicalize(e["input"], e.get("base"))
        assert info.value.reason == "scheme", e
        assert e["protocol"][:-1] in str(info.value)


def test_invalid_urls_are_rejected_with_a_reason():
    failures = [e for e in URLTESTS if e.get("failure")]
    assert len(failures) > 250
    reasons = {}
    for e in failures:
        with pytest.raises(InvalidURL) as info:
            canonicalize(e["input"], e.get("base"))
        assert info.value.reason and str(info.value), e
        reasons[info.value.reason] = reasons.get(info.value.reason, 0) + 1
    # the reasons say what is wrong, not just "invalid"
    assert {"invalid_host", "invalid_port", "no_host", "relative"} <= set(reasons), reasons


def test_known_failures_name_their_cause():
    cases = {
        "http://f:fifty-two/c": ("invalid_port", "fifty-two"),
        "http://f:999999/c": ("invalid_port", "999999"),
        "http://user:pass@/": ("no_host", "no host"),
        "http://a<b": ("invalid_host", "'<'"),
        "http://a b/": ("invalid_host", "' '"),
        "http://[1::2]:3:4": ("invalid_port", "3:4"),
        "http://[google.com]": ("invalid_host", "IPv6"),
        "http://127.0.0.257": ("invalid_host", "127.0.0.257"),  # an IPv4 part over 255
        "/relative/path": ("relative", "absolute"),
        "mailto:someone@example.org": ("scheme", "'mailto'"),
    }
    for url, (reason, words) in cases.items():
        with pytest.raises(InvalidURL) as info:
            canonicalize(url)
        assert info.value.reason == reason, url
        assert words in str(info.value), (url, str(info.value))


@pytest.mark.parametrize("name", ["toascii.json", "IdnaTestV2.json"])
def test_idna_hosts(name):
    """A host is in its IDNA (UTS #46) ASCII form, or the URL is refused."""
    checked = refused = 0
    for e in _load(name):
        host = e["input"]
        if any(c in host for c in "/?#\\:@[]%") or not host.strip():
            continue  # would not be a host in an http URL at all
        url = f"http://{host}/x"
        if e["output"] is None:
            with pytest.raises(InvalidURL):
                canonicalize(url)
            refused += 1
        else:
            try:
                got = canonicalize(url)
            except InvalidURL:
                # valid as a domain, yet not as a special-scheme host (e.g. it
                # ends in a number that is not an IPv4 address): the URL
                # Standard refuses the URL too
                with pytest.raises(ValueError):
                    ada_url.URL(url)
                continue
            assert got == f"http://{without_root_dot(e['output'])}/x", e
            checked += 1
    assert checked > 50 and refused > 10


# -- what it must change -------------------------------------------------------

@pytest.mark.parametrize("url,canonical", [
    # scheme and host lower-cased, IDNA host
    ("HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),
    ("http://Bücher.DE/", "http://xn--bcher-kva.de/"),
    ("http://faß.de/", "http://xn--fa-hia.de/"),
    # default port dropped, other ports kept
    ("http://a.ex:80/", "http://a.ex/"),
    ("https://a.ex:443/", "https://a.ex/"),
    ("https://a.ex:80/", "https://a.ex:80/"),
    ("http://a.ex:8080/", "http://a.ex:8080/"),
    # the DNS root's trailing dot dropped, as the politeness key drops it (urls.host_of)
    ("http://A.ex./p", "http://a.ex/p"),
    ("http://a.ex.:8080/p", "http://a.ex:8080/p"),
    ("http://user@a.ex.:80/", "http://a.ex/"),
    # fragment and credentials dropped, empty path is /
    ("http://a.ex/p#section-2", "http://a.ex/p"),
    ("http://user:secret@a.ex", "http://a.ex/"),
    # dot-segments resolved
    ("http://a.ex/a/./b/../c", "http://a.ex/a/c"),
    ("http://a.ex/a/%2e%2E/b/.", "http://a.ex/b/"),
    ("http://a.ex/../../x", "http://a.ex/x"),
    # percent-encoding normalised: unreserved decoded, others upper-case
    ("http://a.ex/%7Euser/%41%2f%3a", "http://a.ex/~user/A%2F%3A"),
    ("http://a.ex/a b/ü", "http://a.ex/a%20b/%C3%BC"),
    ("http://a.ex/?q=%7e%2b", "http://a.ex/?q=~%2B"),
    ("http://a.ex/?q=a%20b", "http://a.ex/?q=a+b"),
    # query parameters sorted (by name, then value), empty ones dropped
    ("http://a.ex/s?b=2&a=1&a=0", "http://a.ex/s?a=0&a=1&b=2"),
    ("http://a.ex/s?a-b=1&a=2", "http://a.ex/s?a=2&a-b=1"),
    ("http://a.ex/s?&&b&a=", "http://a.ex/s?a=&b"),
    ("http://a.ex/s?", "http://a.ex/s"),
    # session and tracking parameters removed
    ("http://a.ex/p?id=7&utm_source=news&utm_Medium=x&gclid=abc&fbclid=z",
     "http://a.ex/p?id=7"),
    ("http://a.ex/p?JSESSIONID=1&PHPSESSID=2&sessionid=3&sid=4&q=x", "http://a.ex/p?q=x"),
    ("http://a.ex/p?%75tm_source=x&q=y", "http://a.ex/p?q=y"),
    ("http://a.ex/p?utm_source=x", "http://a.ex/p"),
    # session ids in path parameters, as servlet containers write them (the
    # same list as the query's); other path parameters are the resource's
    ("http://a.ex/shop/item.jsp;jsessionid=0123456789ABCDEF0123456789ABCDEF?id=7",
     "http://a.ex/shop/item.jsp?id=7"),
    ("http://a.ex/a;JSESSIONID=x/b;type=a;sid=9", "http://a.ex/a/b;type=a"),
    ("http://a.ex/p;jsessionid=1;phpsessid=2", "http://a.ex/p"),
    ("http://a.ex/p;v=1.2", "http://a.ex/p;v=1.2"),
    # IPv4 forms the URL Standard accepts, IPv6 compressed
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://[0:0:0:0:0:0:0:1]:8000/", "http://[::1]:8000/"),
    # whitespace around the URL, backslashes as browsers read them
    ("  http://a.ex/x\n", "http://a.ex/x"),
    ("http:\\\\a.ex\\b\\c", "http://a.ex/b/c"),
])
def test_canonical_forms(url, canonical):
    assert canonicalize(url) == canonical
    assert canonicalize(canonical) == canonical


def test_relative_links_resolve_against_a_base():
    assert canonicalize("../b?z=1&y=2#f", "http://A.ex/x/y/z") == "http://a.ex/x/b?y=2&z=1"
    assert canonicalize("//other.ex/", "https://a.ex/") == "https://other.ex/"


def test_strip_lists_are_configurable():
    c = Canonicalizer(strip_params=["ref"], strip_prefixes=["pk_"])
    assert c("http://a.ex/?ref=x&pk_campaign=y&utm_source=z&sid=1") == \
        "http://a.ex/?sid=1&utm_source=z"
    assert Canonicalizer([], [])("http://a.ex/?sid=1") == "http://a.ex/?sid=1"
    # one list for the query and the path parameters
    assert c("http://a.ex/p;ref=x;pk_a=1;sid=2?ref=y") == "http://a.ex/p;sid=2"
    assert Canonicalizer([], [])("http://a.ex/p;jsessionid=1") == "http://a.ex/p;jsessionid=1"


def test_spellings_of_one_resource_share_one_canonical_url():
    spellings = [
        "http://www.example.com/a/b?x=1&y=2",
        "HTTP://WWW.EXAMPLE.COM:80/a/./b?y=2&x=1#top",
        "http://www.example.com/a/c/../b?x=%31&y=2&utm_campaign=spring",
        "http://user@www.example.com/%61/b?y=2&x=1&sessionid=42",
        "http://www.example.com./a/b?x=1&y=2",
        "http://www.example.com/a/b;jsessionid=0123456789ABCDEF0123456789ABCDEF?x=1&y=2",
    ]
    assert len({canonicalize(u) for u in spellings}) == 1


def test_bad_input_types_raise_clearly():
    with pytest.raises(InvalidURL):
        canonicalize("")
    with pytest.raises((TypeError, AttributeError)):
        canonicalize(None)  # type: ignore[arg-type]
