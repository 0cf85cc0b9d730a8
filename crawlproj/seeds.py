"""Seed URLs: the `-a seeds=PATH_OR_URLS` argument of the `web` spider.

The argument is either

* the path of a text file (UTF-8) with one URL per line; blank lines and
  lines starting with ``#`` are skipped, so are trailing ``  # comments``
  after a URL; or
* comma-separated URLs: ``-a seeds=https://a.example/,https://b.example/``.

It is a file when a file of that name exists; URLs when it has a comma or
starts with a scheme (``http:``); else a file that is missing when it looks
like a file's name (ends in ``.txt``, is one bare word such as ``myseeds``,
or a path whose first part has no dot); anything else is neither (``http//a.
example/``, the colon missing, or ``example.org``) and is refused, with the
URL it may have meant. An argument that names no file, lists a URL without
its scheme, or gives no usable URL at all raises :class:`SeedsError` (one
line, for the commands to print).

Every entry of a file, and every listed URL, is checked; a bad one is
skipped and reported as a problem naming where it was (``seeds.txt:7: not an
http(s) URL: 'ftp://x'``, or ``seeds[2]: ...`` for the second listed item),
and the good ones are crawled. In a file, a bare domain name such as
``example.com`` or ``example.com:8080/path`` is accepted as ``http://`` + the
entry (the usual result of pasting a list of domains), ``//host/`` likewise;
a bare entry whose host has no dot is not a domain name (``http//host/``,
``intranet/x``) and is reported with the URL it may mean.
An empty path becomes ``/``, fragments are removed and exact duplicates
dropped (the frontier's URL-seen test would drop them anyway). A URL that
contains a comma must be given in a file. Every entry goes through the crawl's
URL rule (crawlproj.urls), the one the frontier's admission applies: a seed is
the URL a browser fetches for it (the WHATWG URL Standard's serialisation:
host lower-cased and in IDNA, "/" for an empty path), and a seed the frontier
would refuse is reported here with its line number.
"""

from __future__ import annotations

import os
import re

from crawlproj.errors import CrawlprojError
from crawlproj.urls import diagnose, resolve

__all__ = ["SeedsError", "read_seeds", "check_seed", "looks_like_path", "MAX_URL_LENGTH"]

# The frontier refuses longer URLs (FRONTIER_MAX_URL_LENGTH's default);
# refusing them here tells the user which line is at fault.
MAX_URL_LENGTH = 2083

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# "host:8080" is a host and port, not a URL with scheme "host".
_HOST_PORT_RE = re.compile(r"[^/:?#]+:\d*(?:[/?#]|\Z)")
_WHITESPACE_RE = re.compile(r"\s")
# "http//host/": a scheme without its colon.
_MISSING_COLON_RE = re.compile(r"(?i)(https?)//")


class SeedsError(CrawlprojError):
    """The seeds argument cannot be used at all (e.g. a missing file)."""


def _has_scheme(entry: str) -> bool:
    """``http:...``, ``mailto:...``; not ``host:8080``, nor ``//host/``."""
    m = _SCHEME_RE.match(entry)
    return m is not None and (entry.startswith("//", m.end()) or not _HOST_PORT_RE.match(entry))


def _with_scheme(entry: str) -> str:
    """The URL an entry without a scheme may mean: ``http//a/`` (the colon
    missing) is ``http://a/``; ``//a/`` and ``a.example/x`` are http's."""
    m = _MISSING_COLON_RE.match(entry)
    if m:
        return f"{m.group(1)}://{entry[m.end():]}"
    return "http:" + entry if entry.startswith("//") else "http://" + entry


def looks_like_path(arg: str) -> bool:
    """Whether the seeds argument names a file rather than listing URLs."""
    if os.path.exists(arg):
        return True
    if "," in arg or _has_scheme(arg) or _MISSING_COLON_RE.match(arg) or arg.startswith("//"):
        return False
    first = re.split(r"[/\\]", arg, maxsplit=1)[0]
    return arg.lower().endswith(".txt") or arg.startswith(("/", ".", "~")) or (
        not any(c in first for c in ".:["))  # a host name has a dot or a port; a file need not


def check_seed(entry: str, max_length: int = MAX_URL_LENGTH) -> tuple[str | None, str | None]:
    """``(url, None)`` for a usable seed, ``(None, reason)`` otherwise.

    ``entry`` is stripped of surrounding whitespace first. The URL returned
    has ``http://`` prefixed to a bare host name, no fragment, and the URL
    Standard's spelling.
    """
    url = entry.strip()
    if not url:
        return None, "empty"
    if _WHITESPACE_RE.search(url):
        return None, f"contains whitespace: {url!r}"
    if url.startswith("//"):
        url = "http:" + url
    elif "://" not in url:
        m = _SCHEME_RE.match(url)
        if m is None or m.group().lower() not in ("http:", "https:"):
            if m is not None and not _HOST_PORT_RE.match(url):
                return None, f"not an http(s) URL: {url!r}"  # mailto:, javascript:, ...
            host = re.split(r"[/:?#]", url, maxsplit=1)[0]
            if "." not in host and not host.startswith("["):
                # not a domain name: a URL mistyped (http//host/), or a local name
                return None, f"no scheme: {url!r} (did you mean {_with_scheme(url)!r}?)"
            url = "http://" + url
    seed = resolve(url)
    if seed is None:
        exc = diagnose(url)
        if exc.reason == "scheme":
            return None, f"not an http(s) URL: {entry.strip()!r}"
        if exc.reason == "no_host":
            return None, f"no host: {entry.strip()!r}"
        if exc.reason == "invalid_host":
            return None, f"invalid host name {exc.host!r}: {entry.strip()!r}"
        return None, f"invalid URL ({exc}): {entry.strip()!r}"
    if len(seed) > max_length:
        return None, f"URL longer than {max_length} characters: {seed[:60]!r}..."
    return seed, None


def _entries_from_file(path: str):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        hint = "" if path.lower().endswith(".txt") else " (URLs need their scheme: http://...)"
        raise SeedsError(f"seeds file not found: {path!r}{hint}") from None
    except IsADirectoryError:
        raise SeedsError(f"seeds path is a directory, not a file: {path!r}") from None
    except OSError as exc:
        raise SeedsError(f"cannot read seeds file {path!r}: {exc.strerror or exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # UTF-8 byte-order mark (Windows editors)
    for lineno, raw in enumerate(data.splitlines(), 1):
        where = f"{path}:{lineno}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield where, None, "not UTF-8 text"
            continue
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " #" in line or "\t#" in line:
            line = re.split(r"\s#", line, maxsplit=1)[0].strip()
        yield where, line, None


def _entries_from_list(arg: str):
    items = [(i, item.strip()) for i, item in enumerate(arg.split(","), 1)]
    if "," not in arg and not _has_scheme(arg):
        raise SeedsError(f"seeds {arg!r} is neither an existing file nor a URL with a scheme "
                         f"(did you mean {_with_scheme(arg)!r}?)")
    for i, item in items:
        if item and not _has_scheme(item):
            raise SeedsError(f"seeds[{i}] {item!r} is not a URL with a scheme (did you mean "
                             f"{_with_scheme(item)!r}?)")
    for i, item in items:
        if item:
            yield f"seeds[{i}]", item, None


def read_seeds(arg: str, max_length: int = MAX_URL_LENGTH) -> tuple[list[str], list[str]]:
    """``(urls, problems)`` from the seeds argument (see the module docstring).

    ``urls`` keeps the order given, without duplicates; ``problems`` has one
    line per skipped entry. Raises :class:`SeedsError` when the argument names
    a file that cannot be read, or gives no usable URL: a crawl started with
    it would have nothing to do.
    """
    arg = (arg or "").strip()
    if not arg:
        raise SeedsError("the seeds argument is empty")
    entries = _entries_from_file(arg) if looks_like_path(arg) else _entries_from_list(arg)
    urls: list[str] = []
    seen: set[str] = set()
    problems: list[str] = []
    for where, entry, problem in entries:
        if entry is not None:
            url, problem = check_seed(entry, max_length)
            if url is not None:
                if url not in seen:
                    seen.add(url)
                    urls.append(url)
                continue
        problems.append(f"{where}: {problem}")
    if not urls:
        first = f": {problems[0]}" if problems else ": it lists none"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SeedsError(f"no usable seed URL in {arg!r}{first}{more}")
    return urls, problems
