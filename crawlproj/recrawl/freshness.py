"""Closed forms of freshness for Poisson-changing pages [Cho & Garcia-Molina 2000a,
cited in Edwards et al. §2.1].

A page that changes as a Poisson process of rate lam and is fetched every 1/f
seconds is fresh (the stored copy equals the live page) a fraction
F(lam, f) = (f/lam) (1 - exp(-lam/f)) of the time, averaged over time. Its
expected number of unseen changes per fetch is lam/f.
"""

from __future__ import annotations

import numpy as np


def freshness(lam, f):
    """Time-averaged freshness of pages of rate ``lam`` fetched at frequency ``f``
    (both per second, arrays broadcast). f = 0 gives 0 (never fresh in the long
    run) unless lam = 0 (never changes: always fresh)."""
    lam = np.asarray(lam, dtype=float)
    f = np.asarray(f, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = lam / f
        # -expm1(-r)/r is the stable form of (1 - e^-r)/r; its limit at r -> 0 is 1
        out = np.where(r > 1e-12, -np.expm1(-r) / np.where(r > 0, r, 1.0), 1.0 - r / 2)
    out = np.where(f > 0, out, np.where(lam > 0, 0.0, 1.0))
    return np.where(lam > 0, out, 1.0)


def marginal(r):
    """g(r) = 1 - (1 + r) e^-r, with r = lam/f: lam * dF/df. Increasing from 0
    (r = 0) to 1 (r -> inf); the Lagrange condition of the optimal allocation is
    g(lam/f) = mu * lam / w."""
    r = np.asarray(r, dtype=float)
    return -np.expm1(-r) - r * np.exp(-r)


def marginal_inverse(g):
    """r with marginal(r) = g, for 0 <= g < 1 (Newton on a bracketed start)."""
    g = np.clip(np.asarray(g, dtype=float), 0.0, 1.0 - 1e-15)
    # start: small-r expansion g ~ r^2/2, large-r g ~ 1 - r e^-r
    r = np.where(g < 0.5, np.sqrt(2 * g), -np.log1p(-g) + np.log(-np.log1p(-g) + 1.0))
    for _ in range(60):
        step = (marginal(r) - g) / np.maximum(r * np.exp(-r), 1e-300)
        r_new = np.maximum(r - step, r / 2)
        if np.all(np.abs(r_new - r) <= 1e-13 * np.maximum(r, 1e-300)):
            r = r_new
            break
        r = r_new
    return r
