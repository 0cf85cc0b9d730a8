"""Continuous crawling, the worker's side: what becomes of a page when it is done.

WebFountain (Edwards, McCurley & Tomlin 2001, §3-4) keeps, per site, the URLs
never crawled and the URLs to crawl again; a fetched page is not finished, it
goes back to its site with a time at which it is due again, from its
change-rate bucket (§4: one byte of the page's metadata) and the plan of the
policy in force (crawlproj.recrawl.policies). The frontier keeps both queues
per host (lua/sync.lua: q:<host> and d:<host>) and spends RECRAWL_BUDGET
fetches per second over them (a token bucket in the same script).

A scheduled page's payload carries what the next fetch needs (meta "rc"):
    [state (crawlproj.recrawl.state, 36 bytes), ETag, Last-Modified (Unix
     seconds, 0 = none), content digest (8 bytes of the body's SHA-1)]
packed in one binary field (crawlproj/recrawl/record.py, pack_payload).
The validators make the next fetch conditional (crawlproj/recrawl/middleware.py); a
304 is "unchanged", a 2xx is "changed" when its digest differs [WebFountain
§4: change detection by checksum], or with RECRAWL_CHANGE a threshold when
its resemblance to the last capture is at most that (record.py). Every
fetch updates the state (the estimators of Cho & Garcia-Molina,
crawlproj.recrawl.estimate).

Times: the recrawl model counts in seconds of the crawl's clock, wall-clock
seconds times RECRAWL_TIME_SCALE (1 on the real web; a simulated web whose
day lasts a few seconds runs at 86400 / day_seconds), so that buckets from a
year to a minute fit the simulated rates. The frontier's due times are wall
milliseconds.

Bad input (docs/recrawl.md, "The live crawl"): a redirect (3xx) or a page
gone (404, 410, and other 4xx but 408 and 429) leaves the schedule; a server
error, a timeout or no answer keeps the page, its state unchanged, due again
after its bucket's interval; an unusable Last-Modified or an unstable ETag is
the state's business (crawlproj/recrawl/state.py).

No Scrapy beyond request meta; Redis only to read the schedule's population.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

import numpy as np
from scrapy import Request
from twisted.internet import task, threads

from crawlproj.errors import CrawlprojError
from crawlproj.frontier import codec
from crawlproj.frontier.leases import Schedule
from crawlproj.recrawl import buckets
from crawlproj.recrawl.estimate import parse_http_date, server_clock_ratio
from crawlproj.recrawl.policies import POLICIES, Plan, PolicyError, plan
from crawlproj.recrawl.population import Population
from crawlproj.recrawl.record import (
    HELD,
    OBSERVED,
    STORED,
    ChangeSettingError,
    Fetch,
    change_threshold,
    pack_payload,
)
from crawlproj.recrawl.record import changed as changed_since
from crawlproj.recrawl.state import (
    CLOCK_SKEW,
    REPORTED,
    SCHEDULED,
    WALL_DATES,
    Observation,
    RecrawlState,
    update,
)
from crawlproj.recrawl.state import rebase as rebase_state
from crawlproj.sitemaps.discovery import HOP, SITEMAP

logger = logging.getLogger(__name__)

# The plan's intervals start a quarter shorter than the budget allows: pages
# come due a little faster than the token bucket lets them go, so that the
# budget is what limits the crawl and it is spent (steer() follows the spend
# and the backlog).
BOOST_START = 1.25
# At most this: a boost divides every interval alike, and past a few it makes
# every page overdue, which is a uniform crawl whatever the plan
# (bench/recrawl_sim.py --policies uniform,oracle --boost B, the plan on the
# true rates, log-uniform web, 500 pages, 100 days, seeds 1-3: boost 1
# 0.5054, 16 0.4761; uniform 0.4577-0.4592). A crawl the
# schedule cannot make spend its budget (politeness, a slow worker) spends
# less rather than lose its plan.
MAX_BOOST = 4.0
# Due pages waiting longer than this many tokens' time: the budget binds.
BACKLOG = 2.0
# The probability that a page the plan would give nothing changes slower
# than its cut-off, above which it is fetched still (Recrawl.bucket_for).
GUARD = 0.1
# statuses after which a page leaves the schedule: redirects and gone pages
_GONE = frozenset(range(300, 400)) | (frozenset(range(400, 500)) - {408, 429})


class RecrawlSettingsError(CrawlprojError):
    pass


def scheduled_states(frontier, batch: int = 500):
    """(URL, RecrawlState) of every page in the crawl's recrawl schedule,
    read from the payloads its recrawl queues name (a scan: for a command or
    a benchmark, not a worker's loop); frontier: the crawl's Frontier."""
    for host, payload in frontier.scheduled_payloads(batch):
        try:
            request = codec.decode(payload, host=host)
            state = RecrawlState.unpack(request.meta[STORED][0])
        except (codec.BadPayload, KeyError, ValueError, TypeError):
            continue
        yield request.url, state


def live_bucket(state: RecrawlState) -> int:
    """The page's change-rate bucket for the plan: 0 before a second fetch,
    then the median of its rate given what its fetches showed, with a prior
    flat in log rate from once a year to once a minute (estimate.posterior).
    Not the point estimate: a page changed at every visit is only known to
    change faster than it was visited, and Cho & Garcia-Molina's
    bias-reduced estimate, log(2n + 1) / I, puts it just below its visits'
    rate, where the optimal plan gives about the most of any page; a page
    never seen changed is only known to change slower, and its median
    falls as it stays unchanged (bench/recrawl_sim.py --bias)."""
    if state.fetches == 0:
        return buckets.UNKNOWN
    return buckets.bucket_of(state.rate_quantile(0.5))


def scheduled_bucket(state: RecrawlState) -> int:
    """The bucket a page is counted in, in the schedule's population: the
    one the frontier scheduled it in (Recrawl.bucket_for), or for a state
    updated since (a sitemap's report) the bucket of its estimate."""
    return state.bucket if state.flags & SCHEDULED else live_bucket(state)


def observed_by_bucket(states) -> dict[int, dict[str, float]]:
    """Per scheduled bucket, the estimate against what the pages' fetches
    showed: pages, visits (observed intervals), visits that saw a change,
    the visits the bucket's rate expects to see one (each page's mean
    interval t: visits x (1 - e^(-rate t))), and the dated changes and the
    time they were observed in (a trusted Last-Modified, a sitemap's
    lastmod). states: (URL, RecrawlState) pairs (scheduled_states)."""
    out: dict[int, dict[str, float]] = {}
    for _, st in states:
        k = scheduled_bucket(st)
        row = out.setdefault(k, {"pages": 0, "visits": 0, "changed": 0, "expected": 0.0,
                                 "dated": 0, "dated_time": 0.0})
        row["pages"] += 1
        row["visits"] += st.fetches
        row["changed"] += st.changes
        if k >= buckets.FIRST and st.fetches:
            gap = (st.t_changed + st.t_unchanged) / st.fetches
            row["expected"] += st.fetches * -math.expm1(-buckets.rate_of(k) * gap)
        if st.lm_usable:
            row["dated"] += st.lm_changes
            row["dated_time"] += st.lm_exposure
    return out


def check_settings(settings) -> None:
    """RECRAWL_* as a worker needs them; RecrawlSettingsError in one line."""
    policy = settings.get("RECRAWL_POLICY")
    if policy not in POLICIES:
        raise RecrawlSettingsError(f"RECRAWL_POLICY {policy!r} is not one of {', '.join(POLICIES)}")
    for name, low in (("RECRAWL_BUDGET", 0.0), ("RECRAWL_TIME_SCALE", 0.0),
                      ("RECRAWL_MIN_INTERVAL", 0.0), ("RECRAWL_PLAN_INTERVAL", 0.0)):
        try:
            value = settings.getfloat(name)
        except ValueError:
            raise RecrawlSettingsError(f"{name} must be a number, not "
                                       f"{settings.get(name)!r}") from None
        if not value > low or not math.isfinite(value):
            raise RecrawlSettingsError(f"{name} must be > {low:g}, not {value!r}")
    try:
        change_threshold(settings.get("RECRAWL_CHANGE"))
    except ChangeSettingError as exc:
        raise RecrawlSettingsError(str(exc)) from None
    share = settings.getfloat("RECRAWL_NEW_SHARE")
    if not 0.0 <= share < 1.0:
        raise RecrawlSettingsError(f"RECRAWL_NEW_SHARE must be in [0, 1), not {share!r}")
    if settings.getfloat("RECRAWL_MAX_INTERVAL") < settings.getfloat("RECRAWL_MIN_INTERVAL"):
        raise RecrawlSettingsError("RECRAWL_MAX_INTERVAL must be >= RECRAWL_MIN_INTERVAL")
    if settings.getint("RECRAWL_WEBFOUNTAIN_STRATEGY") not in (1, 2, 3):
        raise RecrawlSettingsError("RECRAWL_WEBFOUNTAIN_STRATEGY must be 1, 2 or 3, not "
                                   f"{settings.get('RECRAWL_WEBFOUNTAIN_STRATEGY')!r}")


@dataclass(frozen=True)
class RecrawlConfig:
    """RECRAWL_* as a Recrawl uses them (budget in fetches per crawl-second)."""

    policy: str
    budget: float
    new_share: float
    scale: float
    min_interval: float
    max_interval: float
    strategy: int
    period: float
    periods: int
    change: float | None            # resemblance threshold; None: the digest
    # a sitemap is read for what it says of its pages, not kept fresh for
    # its own sake: fetched again on a schedule of its own, outside the
    # plan's population (crawlproj/sitemaps/lastmod.py)
    sitemap_refresh: float
    plan_interval: float            # seconds between plans (a worker's re-plan loop)


class Recrawl:
    """The plan in force and each page's next due time."""

    def __init__(self, frontier, policy: str, budget: float, new_share: float = 0.2,
                 scale: float = 1.0, min_interval: float = 60.0,
                 max_interval: float = 90 * buckets.DAY, strategy: int = 1,
                 period: float = buckets.DAY, periods: int = 14,
                 change: float | None = None, sitemap_refresh: float = buckets.DAY,
                 plan_interval: float = 60.0):
        self.frontier = frontier
        self.config = RecrawlConfig(policy, budget / scale, new_share, scale, min_interval,
                                    max_interval, strategy, period, periods, change,
                                    sitemap_refresh, plan_interval)
        self.pages = 0                       # in the schedule, at the last plan
        # Feedback on the spend: the plan's intervals are divided by boost,
        # raised while the crawl spends less than the budget (intervals the
        # bounds clamp, pages gone, a first pass) and lowered slowly while the
        # token bucket binds, so that the budget is spent and the plan's
        # proportions between buckets are kept.
        self.boost = BOOST_START
        self._leased: tuple[float, int] | None = None  # (wall time, leases) at the last plan
        self.spent = 0.0                     # fetches per wall second, between the last plans
        self._interval: dict[int, float] = {}  # bucket -> seconds (crawl clock)
        self._starved: frozenset[int] = frozenset()  # buckets the plan gives nothing
        # pages scheduled after their first fetch since the last plan: the
        # schedule has grown by that much since its population was read
        self._firsts = 0
        self._known = 0                      # pages scheduled and never crawled, at the last plan
        self._loop = None                    # the re-plan's LoopingCall, in a worker

    @classmethod
    def from_settings(cls, settings, frontier) -> Recrawl | None:
        if not settings.getbool("RECRAWL_ENABLED"):
            return None
        check_settings(settings)
        return cls(frontier, settings.get("RECRAWL_POLICY"), settings.getfloat("RECRAWL_BUDGET"),
                   settings.getfloat("RECRAWL_NEW_SHARE"), settings.getfloat("RECRAWL_TIME_SCALE"),
                   settings.getfloat("RECRAWL_MIN_INTERVAL"),
                   settings.getfloat("RECRAWL_MAX_INTERVAL"),
                   settings.getint("RECRAWL_WEBFOUNTAIN_STRATEGY"),
                   settings.getfloat("RECRAWL_WEBFOUNTAIN_PERIOD"),
                   settings.getint("RECRAWL_WEBFOUNTAIN_PERIODS"),
                   change_threshold(settings.get("RECRAWL_CHANGE")),
                   settings.getfloat("SITEMAP_REFRESH"),
                   settings.getfloat("RECRAWL_PLAN_INTERVAL"))

    # -- the re-plan loop (a worker's) --------------------------------------

    def start(self) -> None:
        """Plan now, and again every RECRAWL_PLAN_INTERVAL seconds."""
        self._loop = task.LoopingCall(self._replan)
        self._loop.start(self.config.plan_interval, now=True)
        logger.info("Continuous crawl: policy %s, budget %g fetches/s", self.config.policy,
                    self.config.budget * self.config.scale)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def _replan(self):
        """The recrawl plan again, from the schedule's population (a read of
        Redis, in a thread)."""
        d = threads.deferToThread(self.replan)
        d.addErrback(lambda f: logger.warning("recrawl plan not renewed: %s", f.getErrorMessage()))
        return d

    def now(self) -> float:
        return time.time() * self.config.scale

    # -- the plan ---------------------------------------------------------

    def steer(self, leased: int, at: float, waited: float = 0.0) -> None:
        """Adjust boost from the leases of the whole crawl since the last call
        and how long due pages wait. While due pages wait for the budget's
        tokens (longer than BACKLOG tokens take) the budget binds: boost falls
        back towards 1. A boost that only rose with a spend below the budget
        ratchets up on the spend's noise (it measured +-20% between plans 2 s
        apart) to where every page is overdue: pages then go in order of due
        time, every interval is stretched by the same backlog, and the plan's
        proportions between buckets are lost (a high boost is a uniform crawl)."""
        last, self._leased = self._leased, (at, leased)
        if last is None or at - last[0] <= 0:
            return
        spent = (leased - last[1]) / (at - last[0])        # fetches per wall second
        budget = self.config.budget * self.config.scale
        self.spent = spent
        if waited > BACKLOG / budget:
            self.boost = max(1.0, self.boost * 0.9)
        elif spent < 0.97 * budget:
            self.boost = min(MAX_BOOST, self.boost * min(1.25, budget / max(spent, budget / 2.0)))

    def replan(self) -> None:
        """The plan of the policy in force for the schedule as it is now
        (read from Redis: call it off the reactor thread); its terms go to
        the crawl's record of them, for `scrapy recrawl plan --crawl-id`."""
        counts, new = self.frontier.schedule_population()
        leased, waited = self.frontier.recrawl_progress()
        self.steer(leased, time.time(), waited)
        self.set_plan(counts, new)
        logger.info("Recrawl plan: %d pages scheduled, %d never crawled; spent %.4g of %g "
                    "fetches/s, intervals / %.3g", self.pages, new, self.spent,
                    self.config.budget * self.config.scale, self.boost)
        self.frontier.redis.hset(self.frontier.keyspace.recrawl_terms, mapping=self.terms())

    # The terms a plan is made of, beside the population: what a reader of the
    # crawl needs to make the same plan (plan_in_force).
    TERMS = ("policy", "budget", "new_share", "scale", "min_interval", "max_interval",
             "strategy", "period", "periods", "boost")

    def terms(self) -> dict[str, str]:
        values = {"budget": self.config.budget * self.config.scale, "new_share": self.frontier.new_share,
                  "boost": self.boost}
        return {k: str(values[k] if k in values else getattr(self.config, k))
                for k in self.TERMS} | {"at": str(time.time())}

    @classmethod
    def from_terms(cls, terms: dict[str, str], frontier) -> Recrawl:
        """The planner of a crawl as its workers last recorded it; frontier:
        the crawl's Frontier (its new_share is set from the terms)."""
        t = {k: terms[k] for k in cls.TERMS}
        frontier.new_share = float(t["new_share"])
        r = cls(frontier, t["policy"], float(t["budget"]), float(t["new_share"]),
                float(t["scale"]), float(t["min_interval"]), float(t["max_interval"]),
                int(t["strategy"]), float(t["period"]), int(t["periods"]))
        r.boost = float(t["boost"])
        return r

    def plan_in_force(self) -> tuple[Plan | None, int, float]:
        """(the plan of the known buckets as the frontier applies it, pages
        with no estimate yet, their fetches per page per crawl-second), from
        the schedule in Redis: per bucket the frequency of its pages' due
        times, the bounds and the spend's boost applied."""
        counts, new = self.frontier.schedule_population()
        self.set_plan(counts, new)
        known = sorted(k for k, n in counts.items() if k >= buckets.FIRST and n > 0)
        unknown = counts.get(buckets.UNKNOWN, 0)
        unknown_f = self.boost / self.interval(buckets.UNKNOWN)
        if not known:
            return None, unknown, unknown_f
        pop = Population(np.array(known), np.array([float(counts[k]) for k in known]),
                         np.array([buckets.rate_of(k) for k in known]), np.ones(len(known)), new)
        freq = np.array([self.boost / self.interval(k) for k in known])
        new_rate = self.config.budget * self.frontier.new_share if new else 0.0
        return Plan(self.config.policy, pop, freq, new_rate, self.config.budget), unknown, unknown_f

    def set_plan(self, counts: dict[int, int], new: int) -> None:
        total = sum(counts.values())
        self.pages = total
        self._known = total + new
        self._firsts = 0
        known = sorted(k for k in counts if k >= buckets.FIRST)
        # RECRAWL_NEW_SHARE of the budget goes to never-crawled URLs while any wait
        part = 1.0 - self.frontier.new_share if new else 1.0
        recrawl_budget = self.config.budget * part
        uniform = total / recrawl_budget if total else self.config.min_interval
        intervals = {buckets.UNKNOWN: self._clamp(uniform)}
        if known:
            pages = np.array([float(counts[k]) for k in known])
            # the unknown bucket's pages share the budget at the uniform rate
            unknown = counts.get(buckets.UNKNOWN, 0)
            budget = self.config.budget * (1.0 - unknown / total) if total else self.config.budget
            budget *= part
            pop = Population(np.array(known), pages, np.array([buckets.rate_of(k) for k in known]),
                             np.ones(len(known)), new)
            # The bounds change what the plan spends (a bucket given nothing
            # is still fetched every RECRAWL_MAX_INTERVAL): the plan is made
            # again for the budget less that, so that its clamped intervals
            # spend the budget, not more (webfountain, slow to solve: once).
            # A bucket the plan gives nothing faster than every bucket it
            # crawls changes too fast for the budget (optimal's cut-off, and
            # what webfountain's settled cycle leaves out) and waits
            # RECRAWL_MAX_INTERVAL. webfountain also leaves out slower
            # buckets, and while never-crawled pages take its cycle it may
            # leave out any: those are due again after one cycle, not parked
            # for the rest of the crawl on a plan of the first pass.
            wf = self.config.policy == "webfountain"
            rest = self.config.period * self.config.periods if wf else math.inf
            aim = budget
            for _ in range(1 if wf else 4):
                try:
                    p = plan(self.config.policy, pop, max(aim, 1e-12), new_share=0.0,
                             strategy=self.config.strategy, period=self.config.period,
                             periods=self.config.periods)
                except (PolicyError, ValueError) as exc:
                    logger.warning("recrawl plan failed (%s): uniform intervals meanwhile", exc)
                    p = plan("uniform", pop, max(aim, 1e-12))
                starved = too_fast(pop.rate, p.frequency) & (not (wf and new))
                clamped = np.array([self._clamp(1.0 / f if f > 0 else math.inf if cut else rest)
                                    for f, cut in zip(p.frequency, starved)])
                spend = float((pages / clamped).sum())
                if abs(spend - budget) <= 0.01 * budget:
                    break
                aim *= budget / spend
            for k, interval in zip(known, clamped):
                intervals[k] = float(interval)
            self._starved = frozenset(k for k, cut in zip(known, starved) if cut)
            if self.config.policy == "webfountain" and p.new_rate > 0 and new:
                self.frontier.new_share = min(0.95, p.new_rate / (p.new_rate + budget))
        self._interval = intervals

    def _clamp(self, interval: float) -> float:
        return min(self.config.max_interval, max(self.config.min_interval, interval))

    def _planned(self, bucket: int) -> int:
        """The bucket of the plan that stands for this one: itself, or for a
        bucket that was empty at the last plan the nearest that was not (the
        plan is smooth in the rate: a page is planned like its neighbours)."""
        if bucket == buckets.UNKNOWN or bucket in self._interval:
            return bucket
        known = [k for k in self._interval if k != buckets.UNKNOWN]
        if not known:
            return buckets.UNKNOWN
        return min(known, key=lambda k: (abs(k - bucket), k))

    def starved(self, bucket: int) -> bool:
        """Does the plan give this bucket's pages nothing? They change too
        fast for the budget (optimal's cut-off): a fetch of one known to have
        changed would be stale again before long."""
        return self._planned(bucket) in self._starved

    def interval(self, bucket: int) -> float:
        """Seconds (crawl clock) until a page of the bucket is due again. A
        page fetched once is due again after its share of the budget among
        every page the crawl knows, scheduled or never crawled, at least: a
        uniform turn over the known web before its second visit. Among the
        scheduled pages alone, the first pages of a crawl came due again and
        again while the rest of the web waited (and at a crawl's start the
        plan knows no page at all)."""
        got = self._interval.get(self._planned(bucket))
        if got is None or bucket == buckets.UNKNOWN:
            known = max(self._known, self.pages + self._firsts)
            got = max(got or 0.0, self._clamp(known / self.config.budget))
        return got

    # -- a page done ------------------------------------------------------

    def after(self, request: Request, recrawl: bool, stats=None) -> Schedule | None:
        """What becomes of the page of a lease (recrawl: from the recrawl
        queue) now that the engine is done with it; None: done, as in a
        crawl that is not continuous (a never-crawled URL that failed)."""
        held = request.meta.get(HELD) if recrawl else None
        fetch: Fetch | None = request.meta.get(OBSERVED)
        prev = RecrawlState.unpack(held[0]) if held else RecrawlState()
        old = scheduled_bucket(prev) if held and SITEMAP not in request.meta else -1
        outcome = "error" if fetch is None else self._outcome(fetch.status, held)
        if stats is not None and (held or outcome == "fetched"):
            stats.inc_value(f"recrawl/{outcome if held else 'first'}")
        if outcome == "gone":
            return Schedule(0.0, b"", old, -1) if held else None
        if outcome == "error":
            if not held:
                return None
            return self._schedule(request, prev, held, old)
        # a 2xx, or a 304 to a conditional GET
        etag, lm = fetch.etag, fetch.last_modified
        # a change was counted since the last fetch without a fetch (a
        # sitemap's lastmod): this fetch is the page's new baseline
        rebase = bool(prev.flags & REPORTED)
        if fetch.status == 304:
            changed, digest = False, held[3]
            etag = etag or held[1]
        else:
            digest = fetch.kept
            changed = bool(held) and not rebase and changed_since(held[3], fetch, self.config.change)
        lm_at = parse_http_date(lm)
        date = parse_http_date(fetch.date) or fetch.at    # none: the worker's own clock
        if lm_at is None or lm_at > date + CLOCK_SKEW:
            lm_at = None                    # not sent back as If-Modified-Since
        if fetch.status == 304 and lm is None and held:
            lm_at = held[2] or None
        validator = (etag != held[1]) if held and etag and held[1] else None
        if stats is not None and held:
            stats.inc_value("recrawl/not_modified" if fetch.status == 304
                            else "recrawl/reported" if rebase
                            else "recrawl/changed" if changed else "recrawl/unchanged")
        now = fetch.at * self.config.scale
        server_lm = parse_http_date(lm)
        if server_lm is None and fetch.status == 304 and held and held[2]:
            server_lm = float(held[2])      # a 304 without Last-Modified: the one held stands
        observed_lm, prev, ratio = self.on_crawl_clock(prev, held[2] if held else 0, now, date,
                                                       server_lm)
        if observed_lm is None:
            observed_lm = lm
        if rebase:
            state = rebase_state(prev, now)
        else:
            state = update(prev, Observation(now, changed, observed_lm, validator, ratio))
        record = [state.pack(), etag, int(lm_at or 0), digest]
        return self._schedule(request, state, record, old)

    def on_crawl_clock(self, prev: RecrawlState, held_lm: float, now: float, date: float,
                       server_lm: float | None) -> tuple[float | None, RecrawlState, float]:
        """(the server's Last-Modified on the crawl clock, the page's state
        as the update needs it, crawl seconds per second of the server's
        clock). The page's age by the server's own clock (Date -
        Last-Modified), set back from the fetch: the server's calendar need
        not be the crawl's (a simulated web's starts in 2001), and a server's
        clock may be off. Its seconds need not be the crawl's either: a
        simulated web may date its pages by the machine's clock while the
        crawl's runs RECRAWL_TIME_SCALE times as fast, and there an age taken
        as crawl seconds is that many times too short: every page seen
        changed looks that much faster than it is and gets nothing from the
        plan. Which clock the server counts is told once, at the second fetch
        with a trusted Last-Modified, by how far its Date moved since the
        first against the crawl clock (estimate.server_clock_ratio; the
        first fetch's Date is its Last-Modified plus the age then taken in
        the server's seconds), and kept (WALL_DATES); the first fetch's age
        is then put in crawl seconds."""
        if prev.flags & WALL_DATES:
            ratio = self.config.scale
        elif prev.fetches == 0 and prev.last_fetch > 0.0 and held_lm and prev.lm_usable:
            first_date = held_lm + prev.last_change_age
            ratio = server_clock_ratio(date - first_date, now - prev.last_fetch, self.config.scale)
            if ratio != 1.0:
                prev = replace(prev, flags=prev.flags | WALL_DATES,
                               last_change_age=prev.last_change_age * ratio)
        else:
            ratio = 1.0
        if server_lm is None:
            return None, prev, ratio
        return now - ratio * (date - server_lm), prev, ratio

    @staticmethod
    def _outcome(status: int, held) -> str:
        if 200 <= status < 300 or (status == 304 and held):
            return "fetched"
        if status in _GONE:
            return "gone"
        return "error"

    def bucket_for(self, state: RecrawlState) -> int:
        """The bucket to schedule a page in: its estimate's, but not one the
        plan gives nothing unless the page's rate is likely above them all.
        Giving a page nothing is a decision its fetches can no longer
        correct, and an estimate from a few observations is often several
        times too high (a page changing daily has the median of its first
        two dated changes above the cut-off of Gamma-distributed rates at
        0.2 fetches per page per day with probability 0.47): there the page
        goes to the bucket of its rate's lower GUARD quantile, and is fetched
        again until its rate is known well enough (bench/recrawl_sim.py)."""
        k = live_bucket(state)
        if self.starved(k):
            low = buckets.bucket_of(state.rate_quantile(GUARD))
            if not self.starved(low):
                return low
        return k

    def place(self, state: RecrawlState, first: bool) -> int:
        """The bucket a page goes to in the schedule now (bucket_for),
        counting the pages scheduled after their first fetch since the
        last plan (first: this is one)."""
        new = self.bucket_for(state)
        if first and new == buckets.UNKNOWN:
            self._firsts += 1
        return new

    def _schedule(self, request: Request, state: RecrawlState, record, old: int) -> Schedule:
        new = self.place(state, old < 0)
        state = replace(state, flags=state.flags | SCHEDULED, bucket=new)
        record = [state.pack(), *record[1:]]
        host = self.frontier_host(request.url)
        https = request.url.startswith("https://")
        origin = ("https://" if https else "http://") + host
        # a sitemap keeps what makes it one (crawlproj/sitemaps), which the
        # packed form has no room for
        sitemap = {k: request.meta[k] for k in (SITEMAP, HOP) if k in request.meta}
        if not sitemap and request.url.startswith(origin) \
                and request.url[len(origin):len(origin) + 1] in ("/", "?"):
            payload = pack_payload(request.url[len(origin):], https, request.meta.get("depth", 0),
                                   record)
        else:   # a URL whose host key is not its origin's (a port, userinfo): as a request
            meta = {STORED: record, **sitemap}
            if request.meta.get("depth"):
                meta["depth"] = request.meta["depth"]
            payload = codec.encode(Request(request.url, meta=meta), host=host)
        if SITEMAP in sitemap:
            return Schedule(self.config.sitemap_refresh / self.config.scale, payload, -1, -1)
        return Schedule(self.interval(new) / self.boost / self.config.scale, payload, old, new)

    @staticmethod
    def frontier_host(url: str) -> str:
        from crawlproj.urls import host_of
        return host_of(url)


def too_fast(rate: np.ndarray, frequency: np.ndarray) -> np.ndarray:
    """The buckets a plan gives nothing that change faster than every bucket
    it crawls (Cho & Garcia-Molina's cut-off: fetching them buys no freshness
    within the budget)."""
    crawled = frequency > 0
    fastest = rate[crawled].max() if crawled.any() else -np.inf
    return ~crawled & (rate > fastest)
