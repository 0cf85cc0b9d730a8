"""The per-URL recrawl state: what the estimators and the adaptive rule keep
between fetches, packed in 36 bytes.

    offset size  field
    0      1     flags (LM_UNUSABLE, VALIDATOR_UNSTABLE, REPORTED, SCHEDULED, WALL_DATES)
    1      1     bucket: WebFountain's one-byte change-rate class (0 = no estimate)
    2      2     fetches: intervals observed (u16)
    4      2     changes: intervals that saw a change (u16)
    6      2     lm_changes: changes dated by a trusted Last-Modified (u16)
    8      8     last_fetch: epoch seconds (f64)
    16     4     last_change_age: last_fetch minus the last known change time (f32)
    20     4     t_changed: seconds of the intervals that saw a change (f32)
    24     4     t_unchanged: seconds of the intervals that did not (f32)
    28     4     lm_exposure: seconds known without a change, from Last-Modified (f32)
    32     4     interval: the adaptive (Nutch) rule's fetch interval, seconds (f32)

Little-endian, no padding. Sums are f32: 24 bits of precision, plenty for an
estimate. The counters halve (with their sums) when one would overflow, so the
estimate keeps following a page whose rate drifts.

Bad input [docs/recrawl.md]: a Last-Modified that cannot be parsed, lies in
the future, stays put while the content changed, or moves while it did not,
makes Last-Modified unusable for that page for good (LM_UNUSABLE): the rate
then comes from the changed/unchanged estimator alone. A validator (ETag or
Last-Modified) that changes while the content does not sets VALIDATOR_UNSTABLE
(conditional GET cannot save anything there); the change signal is always the
content, so the estimate is unaffected. A page that changes at every fetch gets
a finite estimate (log(2n + 1) / interval), which grows with n: its true rate
is only known to be above the fetch rate.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import numpy as np

from crawlproj.recrawl import buckets
from crawlproj.recrawl.adaptive import AdaptiveSchedule
from crawlproj.recrawl.estimate import (
    changed_rate,
    last_modified_rate,
    parse_http_date,
    posterior,
)

FORMAT = struct.Struct("<BBHHHdfffff")
SIZE = FORMAT.size                  # 36
LM_UNUSABLE = 0x01
VALIDATOR_UNSTABLE = 0x02
# A change was counted since the last fetch without a fetch: the site
# reported it (a sitemap's lastmod, crawlproj/sitemaps/lastmod.py). The next
# fetch starts the next interval instead of counting one (rebase).
REPORTED = 0x04
# The bucket byte is the one the page is scheduled in (the frontier's choice,
# crawlproj/recrawl/schedule.py), counted in the schedule's population; clear:
# the bucket of the estimate. update() clears it.
SCHEDULED = 0x08
# The server's dates count the wall clock while the crawl clock runs
# RECRAWL_TIME_SCALE times as fast: its seconds of age are that many crawl
# seconds (crawlproj/recrawl/schedule.py, Recrawl.on_crawl_clock).
WALL_DATES = 0x10
CLOCK_SKEW = 60.0                   # a Last-Modified this far past the fetch time is in the future
COUNT_MAX = 0xFFFF
ADAPTIVE = AdaptiveSchedule()


@dataclass(frozen=True)
class Observation:
    """One fetch of a page, as the crawler saw it.

    changed: True/False by content (digest or resemblance; a 304 is False),
    None when the fetch told nothing (an error). last_modified: the raw
    Last-Modified header, or None, or the time it gives on the fetch's clock
    (seconds, as fetched_at). validator_changed: whether the ETag (or
    Last-Modified) differs from the previous fetch's, None when not known."""
    fetched_at: float
    changed: bool | None
    last_modified: str | bytes | float | None = None
    validator_changed: bool | None = None
    # crawl seconds per step of the server's dates (HTTP dates count whole
    # seconds of the server's clock): a Last-Modified within a step of the
    # last fetch neither contradicts nor confirms a change
    resolution: float = 1.0


@dataclass(frozen=True)
class RecrawlState:
    flags: int = 0
    bucket: int = buckets.UNKNOWN
    fetches: int = 0
    changes: int = 0
    lm_changes: int = 0
    last_fetch: float = 0.0
    last_change_age: float = 0.0
    t_changed: float = 0.0
    t_unchanged: float = 0.0
    lm_exposure: float = 0.0
    interval: float = 0.0

    def pack(self) -> bytes:
        return FORMAT.pack(self.flags, self.bucket, self.fetches, self.changes, self.lm_changes,
                           self.last_fetch, self.last_change_age, self.t_changed,
                           self.t_unchanged, self.lm_exposure, self.interval)

    @classmethod
    def unpack(cls, data: bytes) -> RecrawlState:
        if len(data) != SIZE:
            raise ValueError(f"recrawl state is {SIZE} bytes, not {len(data)}")
        return cls(*FORMAT.unpack(data))

    @property
    def lm_usable(self) -> bool:
        return not self.flags & LM_UNUSABLE

    @property
    def rate(self) -> float:
        """The estimated change rate (per second); 0.0 when none is known."""
        if self.lm_usable and self.lm_changes > 0:
            return last_modified_rate(self.lm_changes, self.lm_exposure)
        return changed_rate(self.fetches, self.changes, self.t_changed, self.t_unchanged)

    def rate_quantile(self, q: float) -> float:
        """The rate (per second) below which the page's rate lies with
        probability q, on what its fetches showed (estimate.posterior)."""
        grid = buckets.rates()
        p = posterior(grid, self.fetches, self.changes, self.t_changed, self.t_unchanged,
                      self.lm_changes if self.lm_usable else 0,
                      self.lm_exposure if self.lm_usable else 0.0)
        return float(grid[min(len(grid) - 1, int(np.searchsorted(np.cumsum(p), q)))])

    @property
    def next_fetch(self) -> float:
        """When the adaptive rule would fetch the page next (epoch seconds)."""
        return self.last_fetch + self.interval


def _halved(s: RecrawlState) -> RecrawlState:
    return replace(s, fetches=s.fetches // 2, changes=s.changes // 2,
                   lm_changes=s.lm_changes // 2, t_changed=s.t_changed / 2,
                   t_unchanged=s.t_unchanged / 2, lm_exposure=s.lm_exposure / 2)


def reported(state: RecrawlState, obs: Observation) -> RecrawlState:
    """The state after the site reported a change (obs: changed, dated by
    the report's time of change) that no fetch has seen yet."""
    new = update(state, obs)
    return replace(new, flags=new.flags | REPORTED)


def rebase(state: RecrawlState, now: float) -> RecrawlState:
    """The state after the fetch that follows a reported change: that change
    and the time up to its report are in the state already, so the fetch
    only starts the next interval; it counts no interval of its own, since
    whether the page changed again between the report and the fetch cannot
    be told from a digest taken before the report."""
    last_change = state.last_fetch - state.last_change_age
    at = max(now, state.last_fetch)
    return replace(state, flags=state.flags & ~REPORTED, last_fetch=at,
                   last_change_age=max(0.0, at - last_change))


def update(state: RecrawlState, obs: Observation) -> RecrawlState:
    """The state after one more fetch."""
    now = float(obs.fetched_at)
    if obs.changed is None:                     # an error: nothing learnt about change
        return state
    flags = state.flags
    if obs.validator_changed and not obs.changed:
        flags |= VALIDATOR_UNSTABLE
    lm = obs.last_modified
    if not isinstance(lm, (int, float)):
        lm = parse_http_date(lm)
    if lm is None or lm > now + CLOCK_SKEW:
        flags |= LM_UNUSABLE                    # absent, unparsable or in the future
    if state.last_fetch <= 0.0:                 # first fetch: no interval yet
        known_change = lm if not flags & LM_UNUSABLE else now
        interval, _, _ = ADAPTIVE.next_fetch(0.0, now, known_change, None)
        return replace(state, flags=flags, last_fetch=now,
                       last_change_age=max(0.0, now - known_change), interval=interval)
    gap = now - state.last_fetch
    if gap <= 0.0:                              # the same fetch twice, or a clock step back
        return replace(state, flags=flags)
    previous_fetch = state.last_fetch
    if not flags & LM_UNUSABLE:
        if obs.changed and lm <= previous_fetch - obs.resolution:
            flags |= LM_UNUSABLE                # content changed, Last-Modified did not
        elif not obs.changed and lm > previous_fetch + obs.resolution:
            flags |= LM_UNUSABLE                # Last-Modified moved, content did not
    s = state
    if max(s.fetches, s.changes, s.lm_changes) >= COUNT_MAX:
        s = _halved(s)
    fetches = s.fetches + 1
    changes = s.changes + (1 if obs.changed else 0)
    t_changed = s.t_changed + (gap if obs.changed else 0.0)
    t_unchanged = s.t_unchanged + (0.0 if obs.changed else gap)
    lm_changes, lm_exposure = s.lm_changes, s.lm_exposure
    last_change = previous_fetch - s.last_change_age
    if not flags & LM_UNUSABLE and s.fetches == 0 and s.last_change_age > 0.0:
        # The first fetch's Last-Modified, now that a second fetch found it
        # trustworthy: the page's age then is a time without a change that
        # ended a change, as each later dated change is (for a Poisson page
        # the time back to its last change is exponential with its rate).
        # Without it a page seen a few times and never changed looks as fast
        # as the time it was watched allows (bench/recrawl_sim.py).
        lm_changes += 1
        lm_exposure += s.last_change_age
    if not flags & LM_UNUSABLE:
        if obs.changed:
            lm_changes += 1
            lm = min(lm, now)                   # within the clock skew allowed
            lm_exposure += now - lm
            last_change = lm
        else:
            lm_exposure += gap
    elif obs.changed:
        last_change = now
    interval, _, _ = ADAPTIVE.next_fetch(s.interval, now, last_change, obs.changed)
    new = replace(s, flags=flags, fetches=fetches, changes=changes, lm_changes=lm_changes,
                  last_fetch=now, last_change_age=max(0.0, now - last_change),
                  t_changed=t_changed, t_unchanged=t_unchanged, lm_exposure=lm_exposure,
                  interval=interval)
    # round-trip through f32 so that the state in hand is the state stored
    new = RecrawlState.unpack(new.pack())
    return replace(new, flags=new.flags & ~SCHEDULED, bucket=buckets.bucket_of(new.rate))
