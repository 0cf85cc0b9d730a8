"""The table of crawlproj's settings, laid under every crawler and command.

settings/base.py is the one place a crawlproj setting is defined, documented
and given its default; code reads a setting with no fallback of its own
(``settings.getfloat("FRONTIER_DELAY_FACTOR")``). A project whose settings
module is settings.base or a profile importing it has the table already. So
that nothing runs without it (a settings module of one's own, a Scrapyd job,
a test's crawler), the table is also laid under whatever else is set, at
Scrapy's "default" priority, where any other source wins:

- every crawler of the web spider, by ``WebSpider.update_settings``, which
  Scrapy calls on a new crawler's settings whatever the settings module;
- every crawler of another spider whose settings list :class:`Addon` in
  ``ADDONS`` (settings/base.py does);
- every crawlproj command, by its ``default_settings``
  (:class:`CommandSettings`).

No one Scrapy hook reaches all three: most commands build no crawler, add-ons
run only when a crawler is configured, and then after its spider is built
(the web spider reads CRAWL_SCOPE and PAGE_TEXT_MAX_CHARS when it is).

A name with a crawlproj prefix that the table does not define is a typo: the
``crawl`` command (in one line, before anything starts), the web spider and
the add-on refuse it, naming the closest known name. So is a name close to a
setting of Scrapy's or crawlproj's (``DEPTH_LIMT``) unless something of the
crawl reads it: a component the settings name, the spider, or the user, who
lists it in CRAWL_CUSTOM_SETTINGS (:func:`_check_names`). They refuse a value
alike when it is not of its setting's kind, the kind of its default in the
table: a number (never negative), a whole number, a boolean, a list.

The environment sets any setting, crawlproj's or Scrapy's, as
``CRAWLPROJ_<NAME>=value`` (``CRAWLPROJ_FRONTIER_PRIORITIZER=pagerank``): the
way a container, a Scrapyd server or a shell gives every process it starts
the same settings. Scrapy reads only ``SCRAPY_SETTINGS_MODULE`` and a few
``SCRAPY_`` names from the environment; these values are laid where the
table is, at the settings module's priority ("project"), after it: they win
over the settings module and lose to ``-s`` (and so to a Scrapyd job's
settings) and to a spider's own. The value is a string, as with ``-s``. A
``CRAWLPROJ_`` name that names no setting is refused like a misspelt one.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
from collections.abc import Mapping
from importlib import import_module
from typing import Any

from scrapy.settings import BaseSettings
from scrapy.settings import default_settings as scrapy_defaults

from crawlproj.contact import lay_user_agent
from crawlproj.errors import CrawlprojError
from crawlproj.internals import NEWER_SCRAPY_SETTINGS

TABLE = "settings.base"

# The prefixes of crawlproj's setting names; every name in the table has one
# (tests/test_settings_table.py), so a misspelt name is recognised as ours.
PREFIXES = ("FRONTIER_", "DUE_", "CONTENTSEEN_", "RANKER_", "PAGERANK_", "PRIORITIZER_",
            "RECRAWL_", "WARC_", "LINKSTORE_", "PAGEMETA_", "CRAWLLOG_", "CRAWL_", "SITEMAP_",
            "REDIS_", "GC_", "PAGE_", "ADDRESS_GUARD_", "INDEX_", "SEARCH_", "UI_",
            "ROBOTS_", "TRAPGUARD_", "MONITOR_", "SIMILARITY_", "REALTIME_",
            "URLFILTER_", "DNS_")

# CRAWLPROJ_<NAME> in the environment sets NAME.
ENVIRONMENT_PREFIX = "CRAWLPROJ_"


class UnknownSetting(CrawlprojError):
    """A setting named like crawlproj's is not in the table; the message is one line."""


class InvalidSetting(CrawlprojError):
    """A crawlproj setting's value is not of its kind; the message is one line."""


class MissingTable(CrawlprojError):
    """Settings without crawlproj's table reached a component that needs it."""


def table() -> dict[str, Any]:
    """crawlproj's own settings and their defaults: the names settings/base.py
    defines that Scrapy does not (Scrapy's own are Scrapy's to default)."""
    module = import_module(TABLE)
    return {name: getattr(module, name) for name in dir(module)
            if name.isupper() and not hasattr(scrapy_defaults, name)
            and name not in NEWER_SCRAPY_SETTINGS}


def apply_table(settings) -> None:
    """Set each of crawlproj's settings that nothing else has set to its default,
    then USER_AGENT, unless the operator set it, to the one CRAWL_CONTACT gives
    (crawlproj/contact.py)."""
    for name, value in table().items():
        settings.set(name, value, priority="default")
    lay_user_agent(settings)


def _is_setting(name: str, known) -> bool:
    return name in known or (name.isupper() and hasattr(scrapy_defaults, name))


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings ``CRAWLPROJ_<NAME>`` variables of the environment give,
    by NAME. A variable that names no setting (neither in the table nor one
    of Scrapy's) keeps its whole name, for :func:`check_settings` to refuse."""
    environ = os.environ if environ is None else environ
    known = table()
    out = {}
    for variable, value in environ.items():
        if variable.startswith(ENVIRONMENT_PREFIX):
            name = variable[len(ENVIRONMENT_PREFIX):]
            out[name if _is_setting(name, known) else variable] = value
    return out


def apply_environment(settings) -> None:
    """Lay the environment's settings over the settings module's (and the
    User-Agent again: CRAWLPROJ_CRAWL_CONTACT may name the contact)."""
    for name, value in environment().items():
        settings.set(name, value, priority="project")
    lay_user_agent(settings)


class CommandSettings:
    """A crawlproj command's ``default_settings``: the table and the command's
    own, and the environment's settings. Read when Scrapy runs the command,
    not when it loads the class: it loads every command's class (entry-point
    ones in any directory) to list them.

    Scrapy lays a command's defaults at "command" priority, under the settings
    module; a BaseSettings keeps a priority per name (BaseSettings.update), so
    the environment's settings go in at "project" priority: over the module,
    which Scrapy laid before."""

    def __init__(self, **own):
        self.own = own

    def __get__(self, command, cls=None) -> BaseSettings:
        values = BaseSettings({**table(), **self.own}, priority="command")
        apply_environment(values)
        return values


# How close (difflib's ratio) a name must come to a setting of Scrapy's or
# crawlproj's to be taken for its misspelling: a letter or two off in a name
# of ten or so (DEPTH_LIMT 0.95, CONCURENT_REQUESTS 0.97, USERAGENT 0.95).
# The settings of common plugins stay below it (SCHEDULER_PERSIST,
# SPLASH_URL, ZYTE_API_KEY, ...; the closest, DUPEFILTER_KEY of scrapy-redis
# to DUPEFILTER_DEBUG, 0.80: tests/test_setting_typos.py).
TYPO_RATIO = 0.85
# crawlproj's packages (pyproject.toml).
_OWN_PACKAGES = ("crawlproj", "middlewares", "settings")
# A class named in the settings (a component), by its dotted path.
_COMPONENT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\.[A-Z]\w*")


def _lookalike(name: str, names: list[str]) -> str | None:
    """The setting name looks like a misspelling of, or None. A name that is
    a setting's with words added (USER_AGENT_LIST, SCHEDULER_PRIORITY_QUEUE_REDIS)
    names a setting of its own; a lower-case one is its upper case's."""
    if name.upper() in names:
        return name.upper()
    close = difflib.get_close_matches(name, names, n=1, cutoff=TYPO_RATIO)
    if not close:
        return None
    words, real = name.split("_"), close[0].split("_")
    n = len(real)
    if len(words) > n and all(words) and any(words[i:i + n] == real
                                             for i in range(len(words) - n + 1)):
        return None
    return close[0]


def _component_modules(settings, spidercls) -> list:
    """The modules of the components the settings name (middlewares,
    extensions, pipelines, add-ons, handlers as dict keys; classes such as
    SCHEDULER as values) and of the spider's classes, imported."""
    paths: set = set()
    for name in settings:
        value = settings[name]
        for item in (value.keys() if hasattr(value, "keys") else (value,)):
            if isinstance(item, type):
                paths.add(item.__module__)
            elif isinstance(item, str) and _COMPONENT.fullmatch(item):
                paths.add(item.rsplit(".", 1)[0])
    paths.update(c.__module__ for c in getattr(spidercls, "__mro__", ()))
    modules = []
    # crawlproj's own read the table's settings alone (tests/test_settings_table.py)
    for path in sorted(p for p in paths if p.split(".", 1)[0] not in _OWN_PACKAGES):
        try:
            modules.append(import_module(path))
        except Exception:  # a component that cannot load is its own error, later
            continue
    return modules


def _read_by(name: str, modules) -> bool:
    """Whether the source of one of modules names the setting: a component
    of the crawl reads it."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    for module in modules:
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        if word.search(source):
            return True
    return False


def _check_names(settings, spidercls=None) -> None:
    """Raise UnknownSetting when a name set with a crawlproj prefix is not in
    the table, a CRAWLPROJ_ variable of the environment names no setting, or
    a name looks like a misspelt setting of Scrapy's or crawlproj's: close to
    one (TYPO_RATIO), yet read by no component the settings name nor the
    spider, and not listed in CRAWL_CUSTOM_SETTINGS.

    A refusal, not a warning: a misspelt setting is silently not applied
    (DEPTH_LIMT=0 crawls 10 links deep), and a crawl under settings other
    than the ones meant is the harm; a setting of one's own that nothing of
    the crawl reads does nothing either, and one that is read elsewhere is
    named in CRAWL_CUSTOM_SETTINGS."""
    known = table()
    scrapy_names = [n for n in dir(scrapy_defaults) if n.isupper()]
    own = set(settings.getlist("CRAWL_CUSTOM_SETTINGS"))
    modules = None
    parts, lookalikes = [], False
    for name in sorted(settings):
        if name.startswith(ENVIRONMENT_PREFIX):
            # CRAWLPROJ_ and a setting's name: the closest setting, prefixed alike
            names = [ENVIRONMENT_PREFIX + n for n in (*known, *scrapy_names)]
            close = difflib.get_close_matches(name, names, n=1)
        elif name in known or hasattr(scrapy_defaults, name):
            continue
        elif name.startswith(PREFIXES):  # Scrapy's DNS_TIMEOUT has one too
            close = difflib.get_close_matches(name, [*known, *scrapy_names], n=1)
        elif name in own or (meant := _lookalike(name, [*known, *scrapy_names])) is None:
            continue
        else:
            if modules is None:
                modules = _component_modules(settings, spidercls)
            if _read_by(name, modules):
                continue
            close, lookalikes = [meant], True
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    if not parts:
        return
    where = "crawlproj's settings are listed in settings/base.py"
    if lookalikes:
        where += (", Scrapy's in its documentation (a setting of your own: name it in "
                  "CRAWL_CUSTOM_SETTINGS)")
    raise UnknownSetting(f"unknown setting{'s' if len(parts) > 1 else ''} {', '.join(parts)}; "
                         f"{where}")


_KINDS = {bool: ("getbool", "a boolean (True or False)"), int: ("getint", "a whole number"),
          float: ("getfloat", "a number"), list: ("getlist", "a list")}


def _value_problem(settings, name: str, default) -> str | None:
    """Why the value of setting name is not of its default's kind, or None."""
    getter, kind = _KINDS.get(type(default), (None, ""))
    if getter is None:
        return None  # None and strings: the component reading it checks its choices
    try:
        value = getattr(settings, getter)(name)
    except (TypeError, ValueError):
        return f"{name}={settings[name]!r} is not {kind}"
    if getter in ("getint", "getfloat") and not value >= 0:  # NaN is not >= 0
        return f"{name}={settings[name]!r} must be 0 or more"
    return None


def check_values(settings) -> None:
    """Raise InvalidSetting when a crawlproj setting's value is not of the kind
    of its default (settings/base.py), or is a negative number."""
    problems = [p for name, default in table().items() if name in settings
                for p in [_value_problem(settings, name, default)] if p]
    if problems:
        raise InvalidSetting(f"{'; '.join(problems)} (settings/base.py says what each means)")


def check_settings(settings, spidercls=None) -> None:
    """Check the settings against the table: every crawlproj name in it and
    no misspelt name of Scrapy's (UnknownSetting; spidercls, the crawl's
    spider, may read settings of its own), every value of its kind
    (InvalidSetting)."""
    _check_names(settings, spidercls)
    check_values(settings)


def require_table(settings) -> None:
    """Raise MissingTable unless every crawlproj setting is in ``settings``."""
    missing = [name for name in table() if name not in settings]
    if missing:
        raise MissingTable(
            f"crawlproj's settings are missing ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): import settings.base in the settings "
            "module, or add crawlproj.addon.Addon to ADDONS")


class Addon:
    """The Scrapy add-on: the table under the crawler's settings, names checked."""

    def update_settings(self, settings) -> None:
        apply_table(settings)
        apply_environment(settings)
        check_settings(settings)
