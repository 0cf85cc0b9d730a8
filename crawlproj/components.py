"""Per-crawler components: one object of a class per Crawler, found by its class.

Several parts of a worker share one object per crawl without owning it: the
Redis guard that the frontier and the stores both report to, the stores'
group commit, the book of each page's pending writes, the worker's id, and
the frontier's parts that the middlewares ask (the lease check, the recent
links, the robots.txt hand-back). Scrapy's components reach each other
through the Crawler; this keeps them in one registry per Crawler, in one
attribute that only this module touches, instead of an attribute each. Not
in a table keyed weakly by the Crawler: most components hold their crawler,
and a weak-keyed table whose values hold their keys keeps every crawler and
its components alive (tests/test_frontier_api.py); an attribute of the
Crawler goes with it.

    component(crawler, StoreGuard)          built once (cls(crawler), or build(crawler))
    register(crawler, downloads)            put by its owner (the scheduler)
    registered(crawler, Downloads)          looked up: None when nobody put one

Typed: each call returns an instance of the class it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_ATTRIBUTE = "_crawlproj_components"


def _of(crawler) -> dict[type, object]:
    found = crawler.__dict__.get(_ATTRIBUTE)
    if found is None:
        found = crawler.__dict__[_ATTRIBUTE] = {}
    return found


def component(crawler, cls: type[T], build: Callable[[object], T] | None = None) -> T:
    """The crawler's one cls, built on first use by build(crawler) (default:
    cls(crawler))."""
    found = _of(crawler)
    obj = found.get(cls)
    if obj is None:
        obj = (build or cls)(crawler)
        if not isinstance(obj, cls):
            raise TypeError(f"{build!r} built a {type(obj).__name__}, not a {cls.__name__}")
        found[cls] = obj
    return obj


def register(crawler, obj: T, cls: type[T] | None = None) -> T:
    """Make obj the crawler's cls (default: its own class), replacing any."""
    cls = cls or type(obj)
    if not isinstance(obj, cls):
        raise TypeError(f"a {type(obj).__name__} is not a {cls.__name__}")
    _of(crawler)[cls] = obj
    return obj


def registered(crawler, cls: type[T]) -> T | None:
    """The crawler's cls if one was built or registered, else None."""
    found = crawler.__dict__.get(_ATTRIBUTE)
    return None if found is None else found.get(cls)  # type: ignore[return-value]
