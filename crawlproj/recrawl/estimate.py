"""Change-rate estimators [Cho & Garcia-Molina, "Estimating frequency of change",
cited by Edwards et al. §2.1 as the basis of change-rate driven recrawling].

A page changes as a Poisson process of unknown rate lam. The crawler sees it at
fetch times it chose; at each fetch it learns only whether the page changed
since the previous fetch (the content digest, or a 304), not how many times.

``changed_rate``: the estimator for irregular intervals with only "changed /
unchanged" known. Its maximum-likelihood equation is
    sum over changed intervals t_c / (exp(lam t_c) - 1) = sum of unchanged intervals,
which needs every interval. Kept in a few bytes per page, the changed intervals
are represented by their mean t_c (exact when they are equal); then the
equation solves in closed form, lam = log(1 + T_c / T_u) / t_c, with T_c, T_u
the total time of changed and unchanged intervals. Like Cho & Garcia-Molina's
improved estimator for regular access, -log((n - X + 0.5) / (n + 0.5)) / I,
half an interval t is added to both totals, which removes most of the small-
sample bias and keeps the estimate finite when every fetch saw a change:
    lam = log((T_c + T_u + t/2) / (T_u + t/2)) / t_c,   t = (T_c + T_u) / n.
With equal intervals it is exactly their improved estimator.

``last_modified_rate``: when the server's Last-Modified is trustworthy, each
changed fetch tells when the last change happened; the time from there to the
fetch, and every unchanged interval, is time seen without a change, and the
maximum-likelihood rate is the changes seen per such time, X / T.
"""

from __future__ import annotations

import math
from datetime import timezone
from email.utils import parsedate_to_datetime

import numpy as np


def changed_rate(fetches: int, changes: int, t_changed: float, t_unchanged: float) -> float:
    """Rate (per second) from ``fetches`` observed intervals, ``changes`` of which
    saw a change; t_changed, t_unchanged: the total seconds of those intervals.
    0.0 with no observation or no change seen."""
    if fetches <= 0 or changes <= 0:
        return 0.0
    total = t_changed + t_unchanged
    if total <= 0.0 or t_changed <= 0.0:
        return 0.0
    half = 0.5 * total / fetches
    mean_changed = t_changed / changes
    return math.log((total + half) / (t_unchanged + half)) / mean_changed


def last_modified_rate(changes: int, exposure: float) -> float:
    """Rate (per second) from ``changes`` changes seen in ``exposure`` seconds
    known to be without another change (the Last-Modified estimator)."""
    if changes <= 0 or exposure <= 0.0:
        return 0.0
    return changes / exposure


def posterior(grid, fetches: int, changes: int, t_changed: float, t_unchanged: float,
              lm_changes: int = 0, lm_exposure: float = 0.0):
    """The probability of each rate of ``grid`` (per second, geometric: a
    prior flat in log rate, which claims no scale) given what a page's
    fetches showed. With dated changes (a trusted Last-Modified) the
    likelihood is lam^X e^(-lam T), X changes in T seconds known without
    another; otherwise that of changed/unchanged intervals, the changed ones
    by their mean t_c: (1 - e^(-lam t_c))^X e^(-lam T_u). A page changed at
    every visit is only known to change faster than its visits: its
    posterior spreads over every faster rate, which a point estimate hides."""
    grid = np.asarray(grid, dtype=float)
    ll = np.zeros_like(grid)
    if lm_changes > 0 or lm_exposure > 0.0:
        ll += lm_changes * np.log(grid) - grid * lm_exposure
    else:
        if changes > 0 and t_changed > 0.0:
            ll += changes * np.log(-np.expm1(-grid * (t_changed / changes)))
        ll -= grid * t_unchanged
    p = np.exp(ll - ll.max())
    return p / p.sum()


def server_clock_ratio(server_elapsed: float, crawl_elapsed: float, scale: float) -> float:
    """Crawl-clock seconds per second of a server's dates (Date, Last-Modified)
    from how far its Date moved between two fetches against the crawl clock:
    1 when its dates run with the crawl clock (the real web, where the crawl
    clock is the wall clock; a simulated web dated on its own calendar),
    ``scale`` when they run with the wall clock while the crawl clock runs
    RECRAWL_TIME_SCALE times as fast (a simulated web dated by the machine's
    clock). The nearer of the two on the log scale: at one-second resolution
    the two are told apart after a fraction of a wall second."""
    if scale == 1.0 or not crawl_elapsed > 0.0:
        return 1.0
    if not server_elapsed > 0.0:
        return scale if scale > 1.0 else 1.0
    r = math.log(server_elapsed / crawl_elapsed)
    return 1.0 if abs(r) <= abs(r + math.log(scale)) else scale


def parse_http_date(value) -> float | None:
    """An HTTP date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and
    asctime forms) as epoch seconds; None when absent or unparsable."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1", "replace")
    try:
        parsed = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:       # HTTP dates are GMT
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
