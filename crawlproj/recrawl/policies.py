"""Recrawl policies: from a bucket population and a budget (fetches per second
for the whole crawl) to a plan, per bucket the fetch frequency of its pages,
and the share of the budget for never-crawled pages.

- ``uniform``: every known page at the same interval [Cho & Garcia-Molina:
  better than proportional whatever the rates, Edwards et al. §2.1];
- ``adaptive``: Nutch's AdaptiveFetchSchedule (crawlproj.recrawl.adaptive),
  each bucket at the frequency the rule settles at for its rate, scaled to the
  budget (the frontier spends RECRAWL_BUDGET whatever the policy);
- ``optimal``: the freshness-optimal allocation [Cho & Garcia-Molina, §2.1]:
  maximise sum_i n_i w_i F(lam_i, f_i) subject to sum_i n_i f_i = budget, by a
  Lagrange multiplier mu: w_i dF/df = mu, i.e. g(lam_i / f_i) = mu lam_i / w_i
  with g(r) = 1 - (1 + r) e^-r < 1, so pages with mu lam_i >= w_i (changing too
  fast for the budget) get nothing;
- ``webfountain``: the time-period model (crawlproj.recrawl.webfountain),
  settled over cycles (each from the obsolete pages the last one left, as
  the paper's crawler updates the model between cycles, §6), its crawls per
  cycle as frequencies and its z_t as the new-page share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crawlproj.recrawl import webfountain as wf
from crawlproj.recrawl.adaptive import AdaptiveSchedule
from crawlproj.recrawl.buckets import DAY
from crawlproj.recrawl.freshness import freshness, marginal_inverse
from crawlproj.recrawl.population import Population

POLICIES = ("uniform", "adaptive", "optimal", "webfountain")


class PolicyError(ValueError):
    pass


@dataclass
class Plan:
    policy: str
    population: Population
    frequency: np.ndarray         # fetches per second of each page, per bucket
    new_rate: float               # fetches per second for never-crawled pages
    budget: float

    @property
    def freshness(self) -> np.ndarray:
        return freshness(self.population.rate, self.frequency)

    @property
    def obsolete(self) -> np.ndarray:
        """Expected obsolete pages per bucket (time-averaged)."""
        return self.population.pages * (1.0 - self.freshness)

    @property
    def fetches_per_day(self) -> np.ndarray:
        return self.population.pages * self.frequency * DAY

    def mean_freshness(self, weighted: bool = False) -> float:
        p = self.population
        w = p.pages * (p.weight if weighted else 1.0)
        return float((w * self.freshness).sum() / w.sum())


def recrawl_budget(budget: float, population: Population, new_share: float) -> tuple[float, float]:
    """(recrawl rate, new-page rate): new_share of the budget for never-crawled
    pages while there are any."""
    new = budget * new_share if population.new_pages > 0 else 0.0
    return budget - new, new


def uniform(population: Population, budget: float) -> np.ndarray:
    return np.full(population.pages.shape, budget / max(population.total, 1e-300))


def optimal(population: Population, budget: float, weighted: bool = True) -> np.ndarray:
    """The Lagrange allocation (per-page frequencies per bucket)."""
    lam, n = population.rate, population.pages
    w = population.weight if weighted else np.ones_like(lam)
    changing = (lam > 0) & (n > 0)
    f = np.zeros_like(lam)
    if budget <= 0 or not changing.any():
        return f

    def alloc(log_mu: float) -> np.ndarray:
        g = np.exp(log_mu) * lam[changing] / w[changing]
        out = np.zeros(changing.sum())
        live = g < 1.0
        out[live] = lam[changing][live] / marginal_inverse(g[live])
        return out

    lo, hi = -80.0, 80.0           # log mu: spend falls as mu rises
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if (n[changing] * alloc(mid)).sum() > budget:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    f[changing] = alloc(hi)
    return f


def adaptive(population: Population, budget: float, seed: int = 0) -> np.ndarray:
    natural = AdaptiveSchedule().steady_frequency(population.rate, seed=seed)
    spend = (population.pages * natural).sum()
    return natural * (budget / spend) if spend > 0 else natural


def webfountain_model(population: Population, budget: float, strategy: int, period: float,
                      periods: int, new_per_period: float = 0.0) -> wf.Model:
    """The model of a population: pages per bucket, a_i from the rates over a
    period of ``period`` seconds, the budget's fetches per period as Cconst
    (one fetch = one unit of cconst and dconst), obsolete pages at the start as
    under a uniform crawl at the same budget."""
    lam = population.rate
    cap = budget * period
    start = population.pages * (1.0 - freshness(lam, uniform(population, budget)))
    # a page crawled at a uniform time in the period is still up to date at
    # its end with probability (1 - e^-lam P) / (lam P): without this, a page
    # changing many times a period looks as well kept by one crawl as a slow one
    lp = lam * period
    kept = np.where(lp > 1e-12, -np.expm1(-lp) / np.maximum(lp, 1e-300), 1.0)
    return wf.Model(pages=population.pages, change=-np.expm1(-lam * period),
                    recrawled_stale=1.0 - kept,
                    capacity=np.full(periods, cap), weights=wf.strategy_weights(strategy, periods),
                    obsolete=start, new_pages=float(population.new_pages),
                    new_per_period=new_per_period)


def plan(policy: str, population: Population, budget: float, *, new_share: float = 0.0,
         strategy: int = 3, period: float = DAY, periods: int = 14,
         weighted: bool = True) -> Plan:
    """The plan of ``policy`` for ``population`` within ``budget`` fetches per second."""
    if policy not in POLICIES:
        raise PolicyError(f"unknown recrawl policy {policy!r} (one of {', '.join(POLICIES)})")
    if not budget > 0:
        raise PolicyError(f"the recrawl budget must be > 0 fetches per second, not {budget!r}")
    if policy == "webfountain":
        sol = wf.settle(webfountain_model(population, budget, strategy, period, periods))
        freq = sol.crawls_per_cycle() / (period * periods)
        new_rate = float(sol.new_crawled.sum()) / (period * periods)
        return Plan(policy, population, freq, new_rate, budget)
    recrawl, new_rate = recrawl_budget(budget, population, new_share)
    if policy == "uniform":
        freq = uniform(population, recrawl)
    elif policy == "adaptive":
        freq = adaptive(population, recrawl)
    else:
        freq = optimal(population, recrawl, weighted=weighted)
    return Plan(policy, population, freq, new_rate, budget)
