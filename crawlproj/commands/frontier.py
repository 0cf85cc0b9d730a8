"""`scrapy frontier`: the state of a crawl's shared frontier; with --host,
one host's story: why it waits and until when, its downloads and back-offs,
its robots.txt as the crawl holds it, its budgets and its last fetches
(crawlproj/monitor/hosts.py, as the web app's host page says it)."""

from __future__ import annotations

import json
import sys

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Frontier
from crawlproj.monitor import hosts
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "[--crawl-id ID | --all] [--host NAME] [--json]"

    def short_desc(self):
        return "Show the shared frontier: queued URLs, hosts ready/waiting/leased, leases"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl to show (default: CRAWL_ID)")
        parser.add_argument("--all", action="store_true", help="every crawl on the server")
        parser.add_argument("--host", default=None, metavar="NAME",
                            help="one host: why it waits, its downloads, robots.txt, budgets")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args, opts):
        try:
            redis = get_redis(self.settings)
            ids = Keyspace.crawl_ids(redis) if opts.all \
                else [opts.crawl_id or self.settings.get("CRAWL_ID")]
            keyspaces = [Keyspace.found(redis, crawl_id) for crawl_id in ids]
            if opts.host is not None:
                if opts.all:
                    raise CrawlprojError("--host names a host of one crawl: give --crawl-id, not --all")
                story = hosts.host(redis, keyspaces[0], opts.host, self.settings,
                                   hosts.log_dirs(redis, keyspaces[0], self.settings))
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        if opts.host is not None:
            print(json.dumps(story, indent=2) if opts.json else host_text(story))
            return
        out = [Frontier(redis, keyspace).status().as_dict() for keyspace in keyspaces]
        if opts.json:
            print(json.dumps(out, indent=2))
            return
        for s in out:
            age = s["oldest_lease_age_s"]
            c = s["counters"]
            print(f"crawl {s['crawl_id']} ({s['partitions']} partition(s))\n"
                  f"  queued URLs      {s['queued']}\n"
                  f"  hosts ready      {s['hosts_ready']}\n"
                  f"  hosts waiting    {s['hosts_waiting']}\n"
                  f"  hosts leased     {s['hosts_leased']} (downloads running)\n"
                  f"  pages pending    {s['pages_pending']} (downloaded, links not yet in)\n"
                  f"  oldest lease     {'-' if age is None else f'{age:.1f} s'}\n"
                  f"  enqueued {c.get('enqueued', 0)}, duplicates {c.get('duplicates', 0)}, "
                  f"leased {c.get('leased', 0)}, expired leases {c.get('expired', 0)}")


_FATES = {"busy": "429/503 answers", "fail": "connection errors or timeouts"}


def _when(ms) -> str:
    if not ms:
        return "-"
    from datetime import datetime, timezone
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def host_text(h: dict) -> str:
    """A host's story (hosts.host) as lines for a terminal."""
    r, g, robots = h["record"], h["budgets"], h["robots"]
    lines = [f"host {h['host']} of crawl {h['crawl_id']} (partition {h['partition']}): {h['state']}",
             f"  why it waits     {h['why']}"]
    if h["until_ms"] and h["until_ms"] > h["now_ms"]:
        lines.append(f"  until            {_when(h['until_ms'])}")
    lines.append(f"  queued URLs      {h['queue']} (recrawls scheduled {h['scheduled']})")
    if r:
        lines += [f"  downloads        {r['fetched']} ({r['ok']} answered, {r['busy']} 429/503, "
                  f"{r['fail']} failed), {_when(r['first_ms'])} to {_when(r['last_ms'])}",
                  f"  last delay       {r['delay_ms'] / 1000:g} s"
                  + (f"; one download per {h['interval_s']:.3f} s on average"
                     if h["interval_s"] is not None else "")]
        b = r["last_backoff"]
        lines.append(f"  back-offs        {r['backoffs']}; {h['fails']} failure(s) in a row now"
                     + (f"; the last at {_when(b['at_ms'])} for {b['ms'] / 1000:g} s after "
                        f"{_FATES.get(b['fate'], b['fate'])}" if b else ""))
    else:
        lines.append("  downloads        none ended yet")
    lines.append("  Crawl-delay      " + (f"{robots['crawl_delay']:g} s (robots.txt)"
                                          if robots["crawl_delay"] else "none"))
    lines.append(f"  robots.txt       {robots['status']}")
    for o in robots["origins"]:
        lines.append(f"    {o['origin']}: {o['status']}"
                     + (f", kept {o['expires_in_s']} s more" if o["expires_in_s"] else ""))
        lines += [f"      {rule}" for rule in o["rules"].splitlines()]
    lines.append(f"  budgets          queued {g['queued']}/{g['max_queued'] or 'none'}, pages "
                 f"{'-' if g['pages_leased'] is None else g['pages_leased']}/{g['max_pages'] or 'none'}, "
                 f"sitemap files {g['sitemap_files']}/{g['max_sitemap_files']}"
                 + (f", trapped ({g['trapped']})" if g["trapped"] is not None else "")
                 + (f": {g['reached']}" if g["reached"] else ""))
    if h["next_urls"]:
        lines.append("  next URLs")
        lines += [f"    {u}" for u in h["next_urls"]]
    lines.append("  last fetches" + ("" if h["last_fetches"] else "     none in this machine's crawl logs"))
    lines += [f"    {f['time']} {f['status']:>5} {f['url']} {f['notes']}" for f in h["last_fetches"]]
    if h["last_errors"]:
        lines.append("  last errors")
        lines += [f"    {f['time']} {f['status']:>5} {f['url']} {f['notes']}" for f in h["last_errors"]]
    return "\n".join(lines)
