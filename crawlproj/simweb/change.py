"""Pages that change: one change process per page, on a simulated clock.

The incremental-crawling literature models a page's changes as a Poisson
process with a rate of its own (Cho & Garcia-Molina; Brewington & Cybenko,
as summarised in WebFountain §2), the rates spread over a distribution: a
Gamma fit (Cho & Garcia-Molina) or a wide log scale, from yearly to every
few minutes (WebFountain §2.2).  Brewington & Cybenko also measured that most
changes fall in US working hours, 5am-5pm Monday to Friday: the optional
work-week profile makes the process non-homogeneous in that way, with the
same mean rate.

Everything is a function of the spec: the rate of page v and the i-th gap
between its changes are hashed from (seed, v, i), so every process (server,
test, benchmark) agrees on every change time without sharing state.

Two clocks:

* *simulated days* ``s``: the unit of rates and change times.  Day 0 begins
  at wall-clock time ``epoch`` and a day lasts ``day_seconds`` of wall time:
  ``s = (t - epoch) / day_seconds``.
* *HTTP dates*: simulated day 0 is Monday 2001-01-01 00:00:00 GMT, and a
  simulated day is 86,400 seconds of the HTTP calendar.  Last-Modified and
  Date headers are on this calendar, so ``Date - Last-Modified`` is a page's
  age in simulated time, and working hours are 05:00-17:00 on it.
"""

from __future__ import annotations

import bisect
import email.utils
import itertools
import math
import random
from array import array
from collections.abc import Callable

__all__ = ["ChangeClock", "ChangeProcess", "WorkWeek", "parse_dist", "HTTP_DAY0"]

#: HTTP-calendar seconds (Unix time) of simulated day 0: Monday 2001-01-01 00:00 GMT.
HTTP_DAY0 = 978307200
DAY = 86400.0
#: What a web's HTTP dates count: the simulated calendar, or the machine's clock.
HTTP_CLOCKS = ("simulated", "wall")
#: Weekday working hours on the simulated clock, as fractions of a day.
WORK_START, WORK_END = 5 / 24, 17 / 24
#: A page whose rate is 0 was last modified this many days before day 0.
STATIC_AGE = 365.0
#: Gaps are drawn this many at a time, from one generator seeded by
#: (seed, page, chunk): random access without a state per page, and about a
#: microsecond per change.
CHUNK = 64


def parse_dist(text: str) -> tuple[str, tuple[float, ...]]:
    """'fixed:R', 'loguniform:LO:HI' or 'gamma:SHAPE:SCALE' (rates per
    simulated day) -> (kind, parameters); ValueError on anything else."""
    kind, *rest = str(text).strip().lower().split(":")
    try:
        p = tuple(float(x) for x in rest)
    except ValueError:
        raise ValueError(f"change_dist {text!r}: parameters must be numbers") from None
    need = {"fixed": 1, "loguniform": 2, "gamma": 2}
    if kind not in need:
        raise ValueError(f"change_dist {text!r}: say fixed:R, loguniform:LO:HI or gamma:SHAPE:SCALE")
    if len(p) != need[kind] or any(not math.isfinite(x) or x < 0 for x in p):
        raise ValueError(f"change_dist {text!r}: {kind} takes {need[kind]} non-negative numbers")
    if kind == "loguniform" and not 0 < p[0] <= p[1]:
        raise ValueError(f"change_dist {text!r}: need 0 < LO <= HI")
    if kind == "gamma" and not (p[0] > 0 and p[1] > 0):
        raise ValueError(f"change_dist {text!r}: need SHAPE > 0 and SCALE > 0")
    return kind, p


class WorkWeek:
    """Piecewise-constant intensity over the simulated week (day 0 a Monday)
    with mean 1: a share `share` of the week's changes falls in weekday
    working hours.  Changes of a homogeneous Poisson process in *operational
    time* L, mapped through the inverse of L(s) = integral of the intensity,
    are the non-homogeneous process with this profile."""

    def __init__(self, share: float):
        if not 0 < share < 1:
            raise ValueError("change_workweek must be in (0, 1), or 0 for a homogeneous process")
        work = 5 * (WORK_END - WORK_START)          # days of working hours per week
        hi, lo = share * 7 / work, (1 - share) * 7 / (7 - work)
        self.bounds = [0.0]   # segment starts in days since Monday 00:00
        self.level = []       # intensity on each segment
        for d in range(7):
            if d < 5:
                for _start, b, w in ((0, WORK_START, lo), (WORK_START, WORK_END, hi), (WORK_END, 1, lo)):
                    self.bounds.append(d + b)
                    self.level.append(w)
            else:
                self.bounds.append(d + 1.0)
                self.level.append(lo)
        self.cum = [0.0]      # L at each segment start
        for i, w in enumerate(self.level):
            self.cum.append(self.cum[-1] + w * (self.bounds[i + 1] - self.bounds[i]))
        self.cum[-1] = 7.0    # exact, whatever the rounding

    def cumulative(self, s: float) -> float:
        """L(s): operational time at simulated day s."""
        weeks, r = divmod(s, 7.0)
        i = bisect.bisect_right(self.bounds, r) - 1
        return weeks * 7.0 + self.cum[i] + self.level[i] * (r - self.bounds[i])

    def inverse(self, L: float) -> float:
        """The simulated day s with L(s) = L."""
        weeks, r = divmod(L, 7.0)
        i = min(bisect.bisect_right(self.cum, r) - 1, len(self.level) - 1)
        return weeks * 7.0 + self.bounds[i] + (r - self.cum[i]) / self.level[i]


class ChangeClock:
    """Wall-clock time, simulated days and HTTP dates (see the module doc)."""

    def __init__(self, epoch: float, day_seconds: float, http_clock: str = "simulated"):
        if not day_seconds > 0:
            raise ValueError("day_seconds must be > 0")
        if http_clock not in HTTP_CLOCKS:
            raise ValueError(f"http_clock must be one of {', '.join(HTTP_CLOCKS)}, "
                             f"not {http_clock!r}")
        self.epoch, self.day_seconds = float(epoch), float(day_seconds)
        self.wall_dates = http_clock == "wall"

    def day(self, t: float) -> float:
        """Simulated day at wall-clock time t."""
        return (t - self.epoch) / self.day_seconds

    def wall(self, s: float) -> float:
        """Wall-clock time of simulated day s."""
        return self.epoch + s * self.day_seconds

    def date_seconds(self, s: float) -> float:
        """Simulated day s as this web's Date and Last-Modified give it, in
        Unix seconds: on the simulated calendar, or (http_clock "wall") the
        machine's clock at that moment, as a web that dates its pages by
        the clock it runs on would."""
        return self.wall(s) if self.wall_dates else self.http_seconds(s)

    def date_text(self, s: float) -> str:
        """date_seconds as an IMF-fixdate (rounded down to the second)."""
        return email.utils.formatdate(math.floor(self.date_seconds(s)), usegmt=True)

    @staticmethod
    def http_seconds(s: float) -> float:
        """Simulated day s on the HTTP calendar, in Unix seconds."""
        return HTTP_DAY0 + s * DAY

    @staticmethod
    def http_date(s: float) -> str:
        """IMF-fixdate of simulated day s (rounded down to the second)."""
        return email.utils.formatdate(math.floor(HTTP_DAY0 + s * DAY), usegmt=True)

    @staticmethod
    def parse_http_date(text: str) -> float | None:
        """Unix seconds of an HTTP date (any of the three forms), or None."""
        try:
            parts = email.utils.parsedate_tz(text)
            return None if parts is None else float(email.utils.mktime_tz(parts))
        except (TypeError, ValueError, OverflowError):
            return None


class ChangeProcess:
    """Change times of every page, in simulated days.

    Page v changes at T_1 < T_2 < ... (all > 0); its version at day s is the
    number of changes up to s, so version k is current on [T_k, T_k+1).  T_0,
    the last change before day 0, is drawn from the same process run backwards
    (for a stationary Poisson process, the time since the last change is
    exponential with the page's rate), so Last-Modified of version 0 is as
    informative as any other.  Times are generated lazily, as far as asked.
    """

    def __init__(self, seed: int, dist: str, workweek: float, unit: Callable[..., float],
                 mix: Callable[..., int], salt_rate: int, salt_gap: int):
        self.seed = seed
        self.kind, self.params = parse_dist(dist)
        self.week = WorkWeek(workweek) if workweek else None
        self._unit, self._mix = unit, mix
        self._s_rate, self._s_gap = salt_rate, salt_gap
        self._rates: dict[int, float] = {}
        self._times: dict[int, array] = {}
        self._ops: dict[int, float] = {}   # operational time of the last change generated

    def rate(self, node: int) -> float:
        """Mean changes per simulated day of a page (drawn once, from the spec)."""
        r = self._rates.get(node)
        if r is None:
            k, p = self.kind, self.params
            if k == "fixed":
                r = p[0]
            elif k == "loguniform":
                u = self._unit(self.seed, node, self._s_rate)
                r = math.exp(math.log(p[0]) + u * (math.log(p[1]) - math.log(p[0])))
            else:
                r = random.Random(self._mix(self.seed, node, self._s_rate)).gammavariate(p[0], p[1])
            self._rates[node] = r
        return r

    def _gaps(self, node: int, i: int, rate: float) -> list[float]:
        """Exponential gaps i, i+1, ... to the end of i's chunk, in
        operational days."""
        rnd = random.Random(self._mix(self.seed, node, self._s_gap, i // CHUNK)).random
        gaps = [-math.log(1.0 - rnd()) / rate for _ in range(CHUNK)]
        return gaps[i % CHUNK:]

    def _to_day(self, L: float) -> float:
        return L if self.week is None else self.week.inverse(L)

    def times(self, node: int, until: float) -> array:
        """[T_0, T_1, ...] covering at least up to day `until` (the last
        element is > until unless the page never changes)."""
        ts = self._times.get(node)
        rate = self.rate(node)
        if ts is None:
            if rate > 0:
                L = -self._gaps(node, 0, rate)[0]
                ts = array("d", [self._to_day(L)])
                self._ops[node] = 0.0
            else:
                ts = array("d", [-STATIC_AGE])
            self._times[node] = ts
        if rate > 0 and ts[-1] <= until:
            L = self._ops[node]
            while ts[-1] <= until:
                ops = list(itertools.accumulate(self._gaps(node, len(ts), rate), initial=L))[1:]
                ts.extend(ops if self.week is None else map(self.week.inverse, ops))
                L = ops[-1]
            self._ops[node] = L
        return ts

    def version(self, node: int, s: float) -> int:
        """Version of a page at simulated day s (0 up to its first change)."""
        ts = self.times(node, s)
        return max(0, bisect.bisect_right(ts, s) - 1)

    def changed(self, node: int, v: int) -> float:
        """Simulated day version v began (T_v; inf for a version that never
        comes, i.e. of a page that never changes)."""
        ts = self.times(node, -math.inf)
        if self.rate(node) <= 0:
            return ts[0] if v == 0 else math.inf
        while len(ts) <= v:
            ts = self.times(node, ts[-1])
        return ts[v]

    def next_change(self, node: int, v: int) -> float:
        """Simulated day version v ends (T_v+1)."""
        return self.changed(node, v + 1)
