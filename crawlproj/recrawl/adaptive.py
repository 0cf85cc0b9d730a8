"""Apache Nutch's AdaptiveFetchSchedule, the per-page rule most crawls run today.

Read from Nutch's description and defaults (nutch-default.xml), written anew:
after a fetch that found the page changed, the page's fetch interval is
multiplied by 1 - dec_rate (0.8), after one that found it unchanged by
1 + inc_rate (1.4). With sync_delta, the crawler also aims the next fetch at
the time of change: delta = now - (the time the page was last known modified);
an interval shorter than delta is raised to delta, and the next fetch is due
at now - sync_delta_rate * delta + interval. The interval stays within
[min_interval, max_interval] (60 s, and db.fetch.interval.max = 90 days), and
so does the wait until the next fetch. delta is taken at most max_interval:
without that bound a page unchanged for longer than max_interval /
sync_delta_rate would fall due at once, fetch after fetch (NUTCH-1564, whose
test requires min_interval <= wait <= max_interval).

The rule settles where changed and unchanged fetches balance the factors, at a
fixed number of fetches per change whatever the page's rate: a proportional
allocation, which Cho & Garcia-Molina prove worse than uniform (Edwards et al.
§2.1). ``steady_frequency`` measures where it settles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crawlproj.recrawl.buckets import DAY

INC_RATE = 0.4
DEC_RATE = 0.2
SYNC_DELTA_RATE = 0.3
MIN_INTERVAL = 60.0
MAX_INTERVAL = 90 * DAY
DEFAULT_INTERVAL = 30 * DAY      # db.fetch.interval.default: a page's first interval


@dataclass(frozen=True)
class AdaptiveSchedule:
    inc_rate: float = INC_RATE
    dec_rate: float = DEC_RATE
    sync_delta: bool = True
    sync_delta_rate: float = SYNC_DELTA_RATE
    min_interval: float = MIN_INTERVAL
    max_interval: float = MAX_INTERVAL

    def next_fetch(self, interval: float, now: float, modified: float | None,
                   changed: bool | None) -> tuple[float, float, float]:
        """One fetch's update: (new interval, next fetch time, modified time).

        ``interval`` the page's current interval (0 = none yet: the default),
        ``now`` the fetch time, ``modified`` the time the page was last known
        modified (None = unknown: taken as now), ``changed`` True/False, or None
        when the fetch could not tell (an error: the interval stays)."""
        interval = interval or DEFAULT_INTERVAL
        modified = now if modified is None or modified > now else modified
        if changed is True:
            interval *= 1.0 - self.dec_rate
            modified = now                     # the change is seen at this fetch
        elif changed is False:
            interval *= 1.0 + self.inc_rate
        ref = now
        if self.sync_delta:
            delta = min(now - modified, self.max_interval)
            interval = max(interval, delta)
            ref = now - self.sync_delta_rate * delta
        interval = min(self.max_interval, max(self.min_interval, interval))
        wait = min(self.max_interval, max(self.min_interval, ref + interval - now))
        return interval, now + wait, modified

    def steady_frequency(self, rates, fetches: int = 4000, seed: int = 0) -> np.ndarray:
        """The long-run fetch frequency (per second) the rule gives pages of the
        given Poisson change rates (per second): one page per rate, simulated
        for ``fetches`` fetches from a seeded generator; the frequency of the
        second half. Vectorised over the rates."""
        lam = np.asarray(rates, dtype=float)
        rng = np.random.default_rng(seed)
        interval = np.full(lam.shape, DEFAULT_INTERVAL)
        now = np.zeros(lam.shape)
        modified = np.zeros(lam.shape)
        due = now + interval
        half_start = now
        for i in range(fetches):
            if i == fetches // 2:
                half_start = now.copy()
            gap = due - now
            # the page changed during the gap with probability 1 - exp(-lam gap)
            changed = rng.random(lam.shape) < -np.expm1(-lam * gap)
            now = now + gap
            interval, due, modified = self._step(interval, now, modified, changed)
        return (fetches - fetches // 2) / (now - half_start)

    def _step(self, interval, now, modified, changed):
        """next_fetch over arrays."""
        interval = np.where(changed, interval * (1.0 - self.dec_rate),
                            interval * (1.0 + self.inc_rate))
        modified = np.where(changed, now, modified)
        ref = now
        if self.sync_delta:
            delta = np.minimum(now - modified, self.max_interval)
            interval = np.maximum(interval, delta)
            ref = now - self.sync_delta_rate * delta
        interval = np.clip(interval, self.min_interval, self.max_interval)
        wait = np.clip(ref + interval - now, self.min_interval, self.max_interval)
        return interval, now + wait, modified
