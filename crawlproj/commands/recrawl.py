"""`scrapy recrawl plan`: the recrawl plan of a bucket population.

Per change-rate bucket: pages, estimated change rate, planned fetches per day,
expected freshness and obsolete pages, under RECRAWL_POLICY within
RECRAWL_BUDGET fetches per second (crawlproj/recrawl, docs/recrawl.md); for a
live crawl also the estimate against the pages' observed changes: the visits
that saw a change against those the bucket's rate expects, and the changes
dated by Last-Modified or a sitemap per day observed. The
population is a live crawl's (--crawl-id: its recrawl schedule's pages per
bucket in Redis, planned on the terms its workers last recorded, as they
apply it), a JSON file's (--population) or generated (--simulate
loguniform|gamma). Bad input, an unknown crawl, a crawl with no recrawl
schedule or a Redis out of reach is one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import sys

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.recrawl.buckets import DAY, rate_of
from crawlproj.recrawl.policies import POLICIES, Plan, PolicyError, plan
from crawlproj.recrawl.population import DISTRIBUTIONS, Population, PopulationError, simulate
from crawlproj.recrawl.webfountain import STRATEGIES


class _UsageError(Exception):
    pass


def live_plan(settings, crawl_id: str):
    """(Plan or None, pages not yet estimated, their per-page frequency,
    Recrawl, the estimate against the observed changes per bucket) of a
    running crawl, from Redis; CrawlprojError in one line."""
    from crawlproj.frontier.frontier import Frontier
    from crawlproj.recrawl.schedule import Recrawl, observed_by_bucket, scheduled_states
    from crawlproj.redis.client import get_redis
    from crawlproj.redis.keyspace import Keyspace

    check_settings(settings)
    redis = get_redis(settings)
    keyspace = Keyspace.found(redis, crawl_id)
    terms = {k.decode(): v.decode() for k, v in redis.hgetall(keyspace.recrawl_terms).items()}
    if not terms:
        raise CrawlprojError(f"crawl {crawl_id!r} has no recrawl plan: no worker of it ran "
                             "with RECRAWL_ENABLED")
    frontier = Frontier(redis, keyspace)
    recrawl = Recrawl.from_terms(terms, frontier)
    observed = observed_by_bucket(scheduled_states(frontier))
    return (*recrawl.plan_in_force(), recrawl, observed_json(observed))


def observed_json(observed: dict[int, dict[str, float]]) -> list[dict]:
    rows = []
    for k in sorted(observed):
        o = observed[k]
        rows.append({"bucket": k, "pages": o["pages"],
                     "estimated_changes_per_day": rate_of(k) * DAY if k else None,
                     "visits": o["visits"], "changed_visits": o["changed"],
                     "expected_changed_visits": o["expected"] if k else None,
                     "dated_changes": o["dated"], "dated_days": o["dated_time"] / DAY,
                     "dated_changes_per_day": (o["dated"] / o["dated_time"] * DAY
                                               if o["dated_time"] > 0 else None)})
    return rows


def format_observed(rows: list[dict]) -> str:
    def num(x, fmt):
        return "-" if x is None else format(x, fmt)
    lines = ["the estimate against the pages' observed changes (visits: intervals between two "
             "fetches; dated: changes dated by Last-Modified or a sitemap's lastmod)",
             f"{'bucket':>6} {'pages':>8} {'est./day':>10} {'visits':>8} {'changed':>8} "
             f"{'expected':>9} {'dated':>6} {'dated/day':>10}"]
    for r in rows:
        lines.append(f"{r['bucket']:>6} {r['pages']:>8} "
                     f"{num(r['estimated_changes_per_day'], '10.4g')} {r['visits']:>8} "
                     f"{r['changed_visits']:>8} {num(r['expected_changed_visits'], '9.1f')} "
                     f"{r['dated_changes']:>6} {num(r['dated_changes_per_day'], '10.4g')}")
    return "\n".join(lines)


def format_plan(p: Plan) -> str:
    pop = p.population
    lines = [f"policy {p.policy}, budget {p.budget:g} fetches/s "
             f"({p.budget * DAY / max(pop.total, 1e-300):.4g} per page per day), "
             f"{pop.total:.0f} pages in {len(pop.bucket)} buckets, {pop.new_pages} never crawled",
             f"never-crawled share {p.new_rate:g} fetches/s; mean freshness "
             f"{p.mean_freshness():.4f}, expected obsolete pages {p.obsolete.sum():.1f}",
             f"{'bucket':>6} {'pages':>10} {'changes/day':>12} {'fetches/day':>12} "
             f"{'freshness':>9} {'obsolete':>10}"]
    for k, n, r, f, fr, ob in zip(pop.bucket, pop.pages, pop.rate, p.fetches_per_day,
                                   p.freshness, p.obsolete):
        lines.append(f"{k:>6} {n:>10.0f} {r * DAY:>12.4g} {f:>12.4g} {fr:>9.4f} {ob:>10.1f}")
    return "\n".join(lines)


def plan_json(p: Plan) -> dict:
    return {"policy": p.policy, "budget": p.budget, "new_rate": p.new_rate,
            "mean_freshness": p.mean_freshness(),
            "buckets": [{"bucket": int(k), "pages": float(n), "rate": float(r),
                         "fetches_per_day": float(f), "freshness": float(fr), "obsolete": float(o)}
                        for k, n, r, f, fr, o in zip(p.population.bucket, p.population.pages,
                                                     p.population.rate, p.fetches_per_day,
                                                     p.freshness, p.obsolete)]}


def plot_plan(p: Plan, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pop = p.population
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    per_page = p.frequency * DAY
    a.loglog(pop.rate * DAY, per_page, ".", ms=4)
    a.set_xlabel("changes per day (bucket)")
    a.set_ylabel("planned fetches per page per day")
    a.set_title(f"{p.policy}: {p.budget:g} fetches/s")
    b.semilogx(pop.rate * DAY, p.freshness, ".", ms=4)
    b.set_xlabel("changes per day (bucket)")
    b.set_ylabel("expected freshness")
    b.set_ylim(0, 1.02)
    b.set_title(f"mean freshness {p.mean_freshness():.3f}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return ("plan (--crawl-id ID | --population FILE | --simulate DIST) [--pages N] "
                "[--budget B] [--png FILE]")

    def short_desc(self):
        return "Print the recrawl plan of a change-rate bucket population (RECRAWL_POLICY)"

    def long_desc(self):
        return __doc__

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None,
                            help="the plan in force for this crawl, from its schedule in Redis")
        parser.add_argument("--population", default=None,
                            help='JSON file: {"new_pages": N, "buckets": [{"bucket": k, "pages": n, '
                                 '"rate": per-second, "weight": w}, ...]}')
        parser.add_argument("--simulate", default=None, choices=DISTRIBUTIONS,
                            help="generate the population: rates log-uniform from once a year to "
                                 "every 15 minutes, or Gamma(0.8, 0.25) per day")
        parser.add_argument("--pages", type=int, default=2000, help="--simulate: pages (default 2000)")
        parser.add_argument("--new-pages", type=int, default=0,
                            help="--simulate: never-crawled URLs (default 0)")
        parser.add_argument("--seed", type=int, default=0, help="--simulate: seed (default 0)")
        parser.add_argument("--policy", default=None,
                            help=f"one of {', '.join(POLICIES)} (default: RECRAWL_POLICY)")
        parser.add_argument("--budget", type=float, default=None,
                            help="fetches per second, whole crawl (default: RECRAWL_BUDGET)")
        parser.add_argument("--per-page-day", type=float, default=None,
                            help="budget as fetches per page per day instead of --budget")
        parser.add_argument("--strategy", type=int, default=None,
                            help="webfountain strategy 1, 2 or 3 (default: RECRAWL_WEBFOUNTAIN_STRATEGY)")
        parser.add_argument("--png", default=None, help="also draw the plan to this PNG file")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args, opts):
        try:
            if args != ["plan"]:
                raise _UsageError("usage: scrapy recrawl plan (--crawl-id ID | --population FILE "
                                  "| --simulate DIST)")
            if opts.crawl_id is not None:
                if opts.population is not None or opts.simulate is not None:
                    raise _UsageError("give one of --crawl-id, --population and --simulate")
                p, unknown, unknown_f, recrawl, observed = live_plan(self.settings,
                                                                     opts.crawl_id)
            else:
                p, unknown, unknown_f, recrawl, observed = self._plan(opts), 0, 0.0, None, []
        except (_UsageError, PopulationError, PolicyError, CrawlprojError) as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        if recrawl is not None:
            self._print_live(opts, p, unknown, unknown_f, recrawl, observed)
            return
        if opts.json:
            print(json.dumps(plan_json(p), indent=1))
        else:
            print(format_plan(p))
        if opts.png:
            plot_plan(p, opts.png)

    def _print_live(self, opts, p, unknown, unknown_f, recrawl, observed) -> None:
        head = {"crawl_id": opts.crawl_id, "policy": recrawl.config.policy,
                "budget": recrawl.config.budget * recrawl.config.scale, "time_scale": recrawl.config.scale,
                "boost": recrawl.boost, "unestimated_pages": unknown,
                "unestimated_fetches_per_day": unknown * unknown_f * DAY}
        if opts.json:
            doc = ({"buckets": []} if p is None else plan_json(p)) | head | {"observed": observed}
            print(json.dumps(doc, indent=1))
        else:
            print(f"crawl {opts.crawl_id}: policy {recrawl.config.policy}, RECRAWL_BUDGET "
                  f"{head['budget']:g} fetches/s, time scale {recrawl.config.scale:g} (days below are "
                  f"the crawl clock's), intervals / {recrawl.boost:.3g} to spend the budget; "
                  f"{unknown} pages not yet estimated, {head['unestimated_fetches_per_day']:.4g} "
                  "fetches/day")
            print(format_plan(p) if p is not None else "no page has an estimate yet")
            print(format_observed(observed))
        if opts.png and p is not None:
            plot_plan(p, opts.png)

    def _plan(self, opts) -> Plan:
        s = self.settings
        if (opts.population is None) == (opts.simulate is None):
            raise _UsageError("give one of --population FILE and --simulate DIST")
        if opts.population is not None:
            population = Population.load(opts.population)
        else:
            if opts.pages <= 0 or opts.new_pages < 0:
                raise _UsageError("--pages must be > 0 and --new-pages >= 0")
            population = simulate(opts.simulate, opts.pages, opts.seed, opts.new_pages)
        policy = opts.policy or s.get("RECRAWL_POLICY")
        if opts.per_page_day is not None:
            budget = opts.per_page_day * population.total / DAY
        else:
            budget = opts.budget if opts.budget is not None else s.getfloat("RECRAWL_BUDGET")
        strategy = opts.strategy if opts.strategy is not None \
            else s.getint("RECRAWL_WEBFOUNTAIN_STRATEGY")
        if strategy not in STRATEGIES:
            raise _UsageError(f"RECRAWL_WEBFOUNTAIN_STRATEGY must be 1, 2 or 3, not {strategy!r}")
        share = s.getfloat("RECRAWL_NEW_SHARE")
        if not 0.0 <= share < 1.0:
            raise _UsageError(f"RECRAWL_NEW_SHARE must be in [0, 1), not {share!r}")
        return plan(policy, population, budget, new_share=share, strategy=strategy,
                    period=s.getfloat("RECRAWL_WEBFOUNTAIN_PERIOD"),
                    periods=s.getint("RECRAWL_WEBFOUNTAIN_PERIODS"))
