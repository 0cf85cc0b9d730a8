"""Seed URLs: the `-a seeds=PATH_OR_URLS` argument of the `web` spider.

The argument is either

* the path of a text file (UTF-8) with one URL per line; blank lines and
  lines starting with ``#`` are skipped, so are trailing ``  # comments``
  after a URL; or
* comma-separated URLs: ``-a seeds=https://a.example/,https://b.example/``.

It is read as a path when a file of that name exists, or when it has neither
``://`` nor a comma and contains a path separator, ends in ``.txt`` or is one
bare word (no dot, no colon: ``myseeds`` names a file, not the host
``http://myseeds/``); otherwise as URLs. A path that does not exist, and an
argument that gives no usable URL at all, raise :class:`SeedsError` (one
line, for the commands to print).

Every entry is checked; a bad one is skipped and reported as a problem naming
where it was (``seeds.txt:7: not an http(s) URL: 'ftp://x'``, or
``seeds[2]: ...`` for the second comma-separated item). A bare host name such
as ``example.com`` or ``example.com:8080/path`` is accepted as ``http://`` +
the entry (the usual result of pasting a domain list); ``//host/`` likewise.
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


class SeedsError(CrawlprojError):
    """The seeds argument cannot be used at all (e.g. a missing file)."""


def looks_like_path(arg: str) -> bool:
    """Whether the seeds argument names a file rather than listing URLs."""
    if os.path.exists(arg):
        return True
    if "://" in arg or "," in arg:
        return False
    return os.sep in arg or (os.altsep is not None and os.altsep in arg) or (
        arg.lower().endswith(".txt")
    ) or not any(c in arg for c in ".:[")  # a host name alone has a dot or a port


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
    for i, item in enumerate(arg.split(","), 1):
        item = item.strip()
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
