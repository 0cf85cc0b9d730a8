"""The bucket population: how many pages each change-rate bucket holds, their
estimated rate and importance, and how many URLs were never crawled.

The input of every policy. A live crawl's comes from its schedule in Redis
(crawlproj/recrawl/schedule.py: pages per bucket as sync.lua counts them);
otherwise from a JSON file, or generated (``simulate``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from crawlproj.recrawl import buckets
from crawlproj.recrawl.buckets import DAY

DISTRIBUTIONS = ("loguniform", "gamma")


class PopulationError(ValueError):
    pass


@dataclass
class Population:
    bucket: np.ndarray            # bucket numbers (1..255), one row per non-empty bucket
    pages: np.ndarray             # pages in the bucket
    rate: np.ndarray              # estimated change rate, per second
    weight: np.ndarray            # mean importance of its pages (1 = all alike)
    new_pages: int = 0            # URLs known but never crawled

    @property
    def total(self) -> float:
        return float(self.pages.sum())

    @classmethod
    def from_rates(cls, rates, weights=None, new_pages: int = 0) -> Population:
        """Bucket per-page rates: each bucket's rate is the mean of its pages'."""
        rates = np.asarray(rates, dtype=float)
        w = np.ones_like(rates) if weights is None else np.asarray(weights, dtype=float)
        k = buckets.buckets_of(rates).astype(int)
        present = np.unique(k)
        pages = np.bincount(k, minlength=256)[present].astype(float)
        rate = np.bincount(k, weights=rates, minlength=256)[present] / pages
        weight = np.bincount(k, weights=w, minlength=256)[present] / pages
        return cls(present, pages, rate, weight, int(new_pages))

    @classmethod
    def load(cls, path: str) -> Population:
        """{"new_pages": N, "buckets": [{"bucket": k, "pages": n, "rate": per-second
        (default: the bucket's), "weight": w (default 1)}, ...]}."""
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            rows = doc["buckets"]
            bucket = np.array([int(r["bucket"]) for r in rows], dtype=int)
            pages = np.array([float(r["pages"]) for r in rows])
            rate = np.array([float(r["rate"]) if r.get("rate") is not None
                             else buckets.rate_of(int(r["bucket"])) for r in rows])
            weight = np.array([float(r.get("weight", 1.0)) for r in rows])
            new_pages = int(doc.get("new_pages", 0))
        except OSError as exc:
            raise PopulationError(f"cannot read {path}: {exc.strerror}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise PopulationError(f"{path}: not a bucket population ({exc})") from exc
        if len(bucket) == 0 or np.any((bucket < buckets.FIRST) | (bucket > buckets.LAST)) \
                or np.any(pages < 0) or np.any(rate < 0) or np.any(weight <= 0) or new_pages < 0:
            raise PopulationError(f"{path}: buckets must be 1..255 with pages, rate >= 0, weight > 0")
        return cls(bucket, pages, rate, weight, new_pages)

    def dump(self) -> dict:
        return {"new_pages": self.new_pages,
                "buckets": [{"bucket": int(k), "pages": float(n), "rate": float(r), "weight": float(w)}
                            for k, n, r, w in zip(self.bucket, self.pages, self.rate, self.weight)]}


def simulate_rates(distribution: str, pages: int, seed: int = 0) -> np.ndarray:
    """Per-page change rates (per second) of the issue's two webs: log-uniform
    from once a year to every 15 minutes (the range WebFountain observed, §4),
    or Gamma(0.8, 0.25) changes per day (the fit Cho & Garcia-Molina use)."""
    rng = np.random.default_rng(seed)
    if distribution == "loguniform":
        return np.exp(rng.uniform(np.log(1.0 / 365), np.log(96.0), pages)) / DAY
    if distribution == "gamma":
        return rng.gamma(0.8, 0.25, pages) / DAY
    raise PopulationError(f"unknown distribution {distribution!r} (one of {', '.join(DISTRIBUTIONS)})")


def simulate(distribution: str, pages: int, seed: int = 0, new_pages: int = 0) -> Population:
    return Population.from_rates(simulate_rates(distribution, pages, seed), new_pages=new_pages)
