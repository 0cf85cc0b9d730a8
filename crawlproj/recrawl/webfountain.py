"""The WebFountain time-period model [Edwards, McCurley & Tomlin 2001, §4-5].

B buckets of pages with similar change rates, T periods of one crawler cycle.
Per bucket i and period t: b_it pages, y_it of them obsolete, x_it crawled;
n_t new (never crawled) pages known, z_t of them crawled. Equations 1-6:

  (1) sum_i cconst_it x_it + dconst_t z_t <= Cconst_t          bandwidth
  (2) y_it = (1 - x_it / b_i,t-1) ((1 - a_it) y_i,t-1 + a_it b_i,t-1)
  (3) n_t = n_t-1 + sum_i oldnwt_it x_it + (newnwt_t - 1) z_t + nconst
  (4) b_it = b_i,t-1 + p_i z_t
  (5) x_it <= b_i,t-1
  (6) z_t <= n_t-1

minimising sum_t (sum_i oldwt_it y_it + newwt_t n_t). (2) follows the tree of
Figure 2: crawled pages are chosen at random among the bucket's obsolete and
up-to-date pages, a crawled page is up to date at the end of the period, and an
uncrawled one is obsolete if it was already or if it changed (probability a).
Optionally (recrawled_stale) a crawled page is obsolete at the period's end with
the probability that it changed after its crawl within the period: Figure 2's
"up to date" holds for a period short against the page's changes, and without
it a page changing many times a period looks as well kept by one crawl as a
slow one (crawlproj/recrawl/policies.py sets it; the paper's model is the
default, none).

Equation 2 is the only nonlinear one (§5: x_it / b_i,t-1 times y_i,t-1), and it
only defines y: with y substituted, the model is a smooth objective of (x, z)
over the polytope of (1), (3)-(6), the linearly constrained problem MINOS
solves (§5). Here it is solved by sequential linear programming: each step
minimises the objective's linearisation at the current point over the polytope
within a trust region, one HiGHS LP (scipy.optimize.linprog), and a step is
kept when the true objective falls by enough of what the LP predicted. The
gradient comes from the recursion (2) run backwards (an adjoint), exactly. Like
MINOS, this finds a local optimum of a nonconvex problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy import sparse

STRATEGIES = (1, 2, 3)
# Strategy 3: the last period's weight; the others share the rest [§5.1: "a
# high weighting" and "very low weightings"].
STRATEGY3_LAST = 0.9


def strategy_weights(strategy: int, periods: int) -> np.ndarray:
    """Per-period objective weights of the three strategies of §5.1 (summing to
    1): 1 equal weights; 2 all on the last period; 3 most on the last period,
    a little on each other."""
    if strategy == 1:
        return np.full(periods, 1.0 / periods)
    if strategy == 2:
        w = np.zeros(periods)
        w[-1] = 1.0
        return w
    if strategy == 3:
        if periods == 1:
            return np.ones(1)
        w = np.full(periods, (1.0 - STRATEGY3_LAST) / (periods - 1))
        w[-1] = STRATEGY3_LAST
        return w
    raise ValueError(f"WebFountain strategy {strategy!r} is not one of 1, 2, 3")


@dataclass
class Model:
    """The data of equations 1-6. Arrays are per bucket (B), per period (T) or
    per bucket and period (B, T); a scalar stands for the same value everywhere."""
    pages: np.ndarray            # b_i0
    change: np.ndarray           # a_it: fraction of a bucket's pages that change in a period
    capacity: np.ndarray         # Cconst_t: seconds of crawling per period
    weights: np.ndarray          # per-period weights (oldwt_it = newwt_t = weights_t)
    obsolete: np.ndarray | None = None   # y_i0 (default: none obsolete)
    new_pages: float = 0.0       # n_0
    new_per_period: float = 0.0  # nconst
    old_finds_new: float = 0.0   # oldnwt: new pages found per old page crawled
    new_finds_new: float = 0.0   # newnwt: new pages found per new page crawled
    old_cost: float = 1.0        # cconst: seconds per old page
    new_cost: float = 1.0        # dconst: seconds per new page
    new_share: np.ndarray | None = None  # p_i (default: proportional to b_i0)
    # probability that a page crawled in a period changes again before the
    # period ends (default none: Figure 2, where a crawled page is up to date)
    recrawled_stale: np.ndarray | None = None

    def __post_init__(self):
        self.pages = np.asarray(self.pages, dtype=float)
        B = self.pages.size
        self.weights = np.asarray(self.weights, dtype=float)
        T = self.weights.size
        change = np.asarray(self.change, dtype=float)
        if change.ndim == 1:                  # a_i: the same in every period
            change = change[:, None]
        self.change = np.broadcast_to(change, (B, T)).copy()
        self.capacity = np.broadcast_to(np.asarray(self.capacity, dtype=float), (T,)).copy()
        self.obsolete = np.zeros(B) if self.obsolete is None else np.asarray(self.obsolete, float)
        if self.new_share is None:
            total = self.pages.sum()
            self.new_share = self.pages / total if total > 0 else np.full(B, 1.0 / B)
        self.new_share = np.asarray(self.new_share, dtype=float)
        stale = np.zeros(B) if self.recrawled_stale is None else np.asarray(self.recrawled_stale, float)
        if stale.ndim == 1:
            stale = stale[:, None]
        self.recrawled_stale = np.broadcast_to(stale, (B, T)).copy()

    @property
    def shape(self) -> tuple[int, int]:
        return self.pages.size, self.weights.size


@dataclass
class Solution:
    crawled: np.ndarray          # x_it (B, T)
    new_crawled: np.ndarray      # z_t (T)
    obsolete: np.ndarray         # y_it (B, T)
    pages: np.ndarray            # b_it (B, T)
    new_pages: np.ndarray        # n_t (T)
    objective: float
    iterations: int
    lps: int
    start_pages: np.ndarray      # b_i0
    history: list = field(default_factory=list)

    def crawls_per_cycle(self) -> np.ndarray:
        """Crawls per page per cycle in each bucket (Figure 3's quantity)."""
        return self.crawled.sum(axis=1) / np.maximum(self.start_pages, 1e-300)


def _forward(m: Model, x: np.ndarray, z: np.ndarray):
    B, T = m.shape
    b = np.empty((B, T + 1))
    b[:, 0] = m.pages
    b[:, 1:] = m.pages[:, None] + m.new_share[:, None] * np.cumsum(z)[None, :]
    y = np.empty((B, T + 1))
    y[:, 0] = m.obsolete
    s = np.empty((B, T))
    q = np.empty((B, T))
    bprev = np.maximum(b[:, :-1], 1e-300)
    for t in range(T):
        s[:, t] = (1.0 - m.change[:, t]) * y[:, t] + m.change[:, t] * b[:, t]
        q[:, t] = 1.0 - x[:, t] / bprev[:, t]
        y[:, t + 1] = q[:, t] * s[:, t] + x[:, t] * m.recrawled_stale[:, t]
    n = m.new_pages + np.cumsum(m.old_finds_new * x.sum(axis=0) + (m.new_finds_new - 1.0) * z
                                + m.new_per_period)
    J = float((m.weights * y[:, 1:]).sum() + (m.weights * n).sum())
    return J, b, y, s, q, n


def objective(m: Model, x: np.ndarray, z: np.ndarray) -> float:
    return _forward(m, x, z)[0]


def gradient(m: Model, x: np.ndarray, z: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The objective and its exact gradient in (x, z), by the adjoint of (2)-(4)."""
    B, T = m.shape
    J, b, y, s, q, n = _forward(m, x, z)
    w = m.weights
    bprev = np.maximum(b[:, :-1], 1e-300)
    L = np.empty((B, T))                  # dJ/dy_it, total
    L[:, T - 1] = w[T - 1]
    for t in range(T - 2, -1, -1):
        L[:, t] = w[t] + L[:, t + 1] * q[:, t + 1] * (1.0 - m.change[:, t + 1])
    W = np.cumsum(w[::-1])[::-1]          # sum_{t' >= t} w_t': the weight n_t carries forward
    gx = L * (m.recrawled_stale - s / bprev) + m.old_finds_new * W[None, :]
    # through b_i,t-1 in y_it (b_i,t-1 grows with z_1 .. z_t-1, equation 4)
    G = L * (q * m.change + s * x / bprev ** 2)
    col = (m.new_share[:, None] * G).sum(axis=0)          # per period t (uses b_t-1)
    rev = np.cumsum(col[::-1])[::-1]                      # sum over t' >= t
    gz = np.zeros(T)
    gz[:-1] = rev[1:]                                     # z_t moves b_t', t' >= t
    gz += (m.new_finds_new - 1.0) * W
    return J, gx, gz


def _constraints(m: Model):
    """A v <= h for v = (x row-major by bucket, z): equations 1 and 6. Equation
    5 is a bound (see solve)."""
    B, T = m.shape
    nx = B * T
    rows, cols, vals, h = [], [], [], []
    r = 0
    # (1) bandwidth per period
    for t in range(T):
        rows += [r] * B
        cols += list(np.arange(B) * T + t)
        vals += [m.old_cost] * B
        rows.append(r)
        cols.append(nx + t)
        vals.append(m.new_cost)
        h.append(m.capacity[t])
        r += 1
    # (6) z_t - sum_{s < t} (oldnwt sum_i x_is + (newnwt - 1) z_s) <= n_0 + t nconst
    for t in range(T):
        rows.append(r)
        cols.append(nx + t)
        vals.append(1.0)
        for s_ in range(t):
            if m.old_finds_new:
                rows += [r] * B
                cols += list(np.arange(B) * T + s_)
                vals += [-m.old_finds_new] * B
            rows.append(r)
            cols.append(nx + s_)
            vals.append(-(m.new_finds_new - 1.0))
        h.append(m.new_pages + t * m.new_per_period)
        r += 1
    A = sparse.csr_matrix((vals, (rows, cols)), shape=(r, nx + T))
    return A, np.asarray(h, dtype=float)


def _start(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """A feasible start: each period's bandwidth spread over the old pages in
    proportion to the buckets' sizes (a uniform crawl), no new pages."""
    B, T = m.shape
    total = max(m.pages.sum(), 1e-300)
    per = np.minimum(m.capacity / m.old_cost, total)          # pages per period
    x = np.minimum(m.pages[:, None] * (per / total)[None, :], m.pages[:, None])
    return x, np.zeros(T)


def solve(m: Model, *, tol: float = 1e-6, max_iterations: int = 300) -> Solution:
    """Solve the model (a local optimum, as §5's MINOS runs)."""
    # imported here, not with the module: every worker imports the module (the
    # recrawl planner), and scipy.optimize is a large part of its start-up
    from scipy.optimize import linprog

    B, T = m.shape
    A, h = _constraints(m)
    x, z = _start(m)
    v = np.concatenate([x.ravel(), z])
    scale = np.concatenate([np.repeat(np.maximum(m.pages, 1.0), T),
                            np.full(T, max(m.new_pages + T * m.new_per_period,
                                           m.capacity.max() / m.new_cost, 1.0))])
    # (5) as the bound x_it <= b_i0: it implies x_it <= b_i,t-1, buckets only
    # growing (4), and differs from it only for a bucket crawled whole within
    # one period; as bounds it keeps each LP to 2T rows.
    upper = np.concatenate([np.repeat(m.pages, T), np.full(T, np.inf)])
    radius = 0.25
    J, gx, gz = gradient(m, x, z)
    history = [J]
    lps = 0
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        g = np.concatenate([gx.ravel(), gz])
        lo = np.maximum(0.0, v - radius * scale)
        hi = np.minimum(v + radius * scale, upper)
        res = linprog(g, A_ub=A, b_ub=h, bounds=np.column_stack([lo, hi]), method="highs",
                      options={"presolve": False})  # 2T rows: presolve costs more than it saves
        lps += 1
        if res.status != 0:
            raise RuntimeError(f"WebFountain model: LP step failed: {res.message}")
        step = res.x
        predicted = float(g @ (v - step))
        if predicted <= tol * max(abs(J), 1.0):
            break
        xs, zs = step[:B * T].reshape(B, T), step[B * T:]
        J_new, gx_new, gz_new = gradient(m, xs, zs)
        ratio = (J - J_new) / predicted
        if ratio > 0.1:
            v, J, gx, gz = step, J_new, gx_new, gz_new
            history.append(J)
            if ratio > 0.75:
                radius = min(radius * 2.0, 1.0)
        else:
            radius *= 0.25
            if radius < 1e-9:
                break
    x, z = v[:B * T].reshape(B, T), v[B * T:]
    J, b, y, s, q, n = _forward(m, x, z)
    sol = Solution(crawled=x, new_crawled=z, obsolete=y[:, 1:], pages=b[:, 1:], new_pages=n,
                   objective=J, iterations=iterations, lps=lps, start_pages=m.pages.copy(),
                   history=history)
    return sol


def settle(m: Model, *, cycles: int = 8, tol: float = 0.01, **kw) -> Solution:
    """The model solved cycle after cycle, each starting from the obsolete
    pages the last one left, until a cycle leaves what it found (within tol
    of the pages): the paper's crawler updates the model's data between
    cycles (§6) and its obsolete pages stabilise over them (Figure 6). One
    cycle alone, from any start, spends nothing on a slow bucket whose pages
    are fresh at its start; their staleness then builds up over the cycles
    until the model crawls them, and the settled cycle gives them their
    steady share."""
    sol = solve(m, **kw)
    for _ in range(cycles - 1):
        # the share of each bucket obsolete at the cycle's end, on the
        # bucket as it starts (new pages crawled grew it, equation 4)
        end = sol.obsolete[:, -1] * m.pages / np.maximum(sol.pages[:, -1], 1e-300)
        if np.abs(end - m.obsolete).sum() <= tol * max(m.pages.sum(), 1.0):
            break
        m = replace(m, obsolete=end)
        sol = solve(m, **kw)
    return sol
