"""URL filters: which URLs the user wants crawled, by regular expressions.

Mercator §3 (step 6) tests every extracted URL "against a user-supplied URL
filter" before the DUE. Here the user supplies up to three filters, and a URL
enters the frontier only when each one given admits it:

* ``URLFILTER_EXCLUDE``: patterns; a URL one of them matches is refused
  (counted as ``urlfilter/refused/exclude/<i>``, i its index in the list);
* ``URLFILTER_INCLUDE``: patterns; when there are any, a URL none of them
  matches is refused (``urlfilter/refused/include``);
* ``URLFILTER_FILE``: a file of rules in the form of Nutch's
  regex-urlfilter.txt, one a line: ``+regex`` admits, ``-regex`` refuses,
  ``#`` starts a comment, blank lines are skipped, leading and trailing
  blanks are ignored. The first rule whose regex matches decides (a refusal
  counts as ``urlfilter/refused/file/<line>``); a URL no rule matches is
  refused (``urlfilter/refused/file/unmatched``), as Nutch refuses it.

A pattern matches when Python's ``re.search`` finds it anywhere in the URL
(Nutch's ``find``, and Scrapy's LinkExtractor allow/deny): anchor it with
``^`` and ``$`` to match a whole URL. Matching is case-sensitive unless the
pattern says ``(?i)``. The URL is the one the frontier queues: the WHATWG URL
Standard's serialisation (scheme and host in lower case, IDNA hosts, percent-
encoded path and query), without its fragment. The filters are checked in
that order, so an exclude wins over an include.

Every URL that would enter the frontier passes here (admission.py): seeds,
links, redirect targets, sitemap URLs, ``scrapy seed``. robots.txt requests
are a host's prerequisite, not URLs of the crawl, and are not filtered. A
refused URL is not marked seen: a later run with other filters may admit it.

The patterns are compiled once, when the worker starts; one that does not
compile, or a file that cannot be read, is a :class:`URLFilterError` naming
the setting (and line), which ``scrapy crawl`` prints in one line before it
starts anything.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable

from crawlproj.errors import CrawlprojError

__all__ = ["URLFilter", "URLFilterError"]

logger = logging.getLogger(__name__)

# Rules whose first refusal was logged at INFO; the rest go to DEBUG.
_LOGGED_MAX = 10_000


class URLFilterError(CrawlprojError):
    """A filter setting or file that cannot be used; the message is one line."""


# A leading ".*" (or "^.*", greedy or lazy) changes nothing a search finds in
# a URL, which holds no newline, but makes it try every start against every
# end: Nutch's rule "-.*(/[^/]+)/[^/]+\1/[^/]+\1/" took 13.5 µs a URL as
# written and 0.54 without it (bench/urlfilter_bench.py). Possessive ".*+"
# is left alone: it does change what matches.
_SEARCH_PREFIX = re.compile(r"\^?\.\*\??(?!\+)")


class Pattern:
    """A compiled pattern: ``search(url)``, and its text as the user gave it."""

    __slots__ = ("text", "search")

    def __init__(self, text: str, where: str):
        if not isinstance(text, str):
            raise URLFilterError(f"{where}: {text!r} is not a string")
        try:
            compiled = re.compile(text)
        except re.error as exc:
            raise URLFilterError(f"{where}: {text!r} is not a regular expression: {exc}") \
                from None
        self.text = text
        self.search = compiled.search
        prefix = _SEARCH_PREFIX.match(text)
        if prefix:
            try:
                self.search = re.compile(text[prefix.end():]).search
            except re.error:
                pass


def _patterns(settings, name: str) -> list[Pattern]:
    """The compiled patterns of a list setting. A list from a settings module
    is taken as it is; a string (``-s``, the environment) is a JSON list when
    it starts with ``[``, else one pattern: Scrapy's getlist would split it at
    commas, which regular expressions hold (``\\d{1,3}``)."""
    value = settings.get(name)
    if value is None or value == "":
        return []
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise URLFilterError(
                    f"{name}: {value!r} is neither a JSON list of patterns nor one pattern: "
                    f"{exc.msg} at position {exc.pos} "
                    "(a list is given as JSON: '[\"a\", \"b\"]')") from None
        else:
            value = [value]
    if not isinstance(value, (list, tuple)):
        raise URLFilterError(f"{name}: {value!r} is not a list of patterns")
    return [Pattern(p, f"{name}[{i}]") for i, p in enumerate(value)]


def read_rules(path: str) -> list[tuple[bool, Pattern, int]]:
    """(admits, pattern, line number) of each rule of a regex-urlfilter.txt file."""
    where = f"URLFILTER_FILE {path}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise URLFilterError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise URLFilterError(f"{where}: a directory, not a file") from None
    except OSError as exc:
        raise URLFilterError(f"{where}: {exc.strerror or exc}") from None
    rules = []
    for lineno, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise URLFilterError(f"{where}: not UTF-8 text (line {lineno})") from None
        if not line or line.startswith("#"):
            continue
        if line[0] not in "+-":
            raise URLFilterError(f"{where}:{lineno}: a rule starts with + (include) or - "
                                 f"(exclude), a comment with #: {line[:80]!r}")
        rules.append((line[0] == "+", Pattern(line[1:], f"{where}:{lineno}"), lineno))
    if not rules:
        raise URLFilterError(f"{where} has no rule")
    return rules


class URLFilter:
    """``refusal(url)``: (rule, message) when a filter refuses url, else None.
    Built once per worker (:meth:`from_settings`, None when no filter is set),
    its patterns compiled once."""

    __slots__ = ("excludes", "includes", "rules", "_logged")

    def __init__(self, excludes: Iterable[Pattern] = (), includes: Iterable[Pattern] = (),
                 rules: Iterable[tuple[bool, Pattern, int]] | None = None):
        self.excludes = tuple(excludes)
        self.includes = tuple(includes)
        self.rules = None if rules is None else tuple(rules)
        self._logged: set[str] = set()

    @classmethod
    def from_settings(cls, settings) -> URLFilter | None:
        excludes = _patterns(settings, "URLFILTER_EXCLUDE")
        includes = _patterns(settings, "URLFILTER_INCLUDE")
        path = settings.get("URLFILTER_FILE")
        rules = read_rules(str(path)) if path else None
        if not excludes and not includes and rules is None:
            return None
        return cls(excludes, includes, rules)

    def refusal(self, url: str) -> tuple[str, str] | None:
        for i, pattern in enumerate(self.excludes):
            if pattern.search(url):
                return f"exclude/{i}", f"URLFILTER_EXCLUDE[{i}] {pattern.text!r} matches"
        if self.includes:
            for pattern in self.includes:
                if pattern.search(url):
                    break
            else:
                return "include", "no pattern of URLFILTER_INCLUDE matches"
        if self.rules is not None:
            for admits, pattern, lineno in self.rules:
                if pattern.search(url):
                    if admits:
                        return None
                    return f"file/{lineno}", f"URLFILTER_FILE line {lineno} " \
                                             f"'-{pattern.text}' matches first"
            return "file/unmatched", "no rule of URLFILTER_FILE matches"
        return None

    def log(self, rule: str, url: str, message: str) -> None:
        """The first refusal of each rule at INFO, the rest at DEBUG: a filter
        refuses what it was given to refuse, often many URLs a page."""
        if rule not in self._logged and len(self._logged) < _LOGGED_MAX:
            self._logged.add(rule)
            logger.info("URL filter refused %s: %s; further refusals by this rule are counted "
                        "as urlfilter/refused/%s", url[:200], message, rule)
        else:
            logger.debug("URL filter refused %s: %s", url[:200], message)

    def __repr__(self) -> str:
        return (f"URLFilter(excludes={len(self.excludes)}, includes={len(self.includes)}, "
                f"file rules={len(self.rules) if self.rules is not None else None})")
