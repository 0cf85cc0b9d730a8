"""`scrapy crawlctl pause|resume|stop|status [--crawl-id ID] [--json]`: steer
every worker of a running crawl at once (crawlproj/monitor/control.py).
`scrapy crawlctl block|unblock|delay HOST [SECONDS]`: one host, in the shared
frontier (Frontier.block, Frontier.set_delay).

pause: workers finish their downloads and lease nothing more; resume; stop:
every running worker closes gracefully and gives back its leases (`scrapy
crawl web` with the same CRAWL_ID goes on, losing nothing); status: the
crawl's state, rates, frontier and workers in a few lines (the dashboard's
figures, crawlproj/monitor/status.py).

block HOST SECONDS: no download from the host for that long (a lease under
way runs on); unblock HOST; delay HOST SECONDS: at least that long between
the end of a download from the host and the next, whatever its politeness
asks (0 lifts it).
"""

from __future__ import annotations

import json
import math
import sys

from redis.exceptions import RedisError
from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.frontier.frontier import Frontier
from crawlproj.monitor import control
from crawlproj.monitor.hosts import host_name
from crawlproj.monitor.status import crawl_status
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace

ACTIONS = (*control.COMMANDS, "status")
HOST_ACTIONS = {"block": 2, "unblock": 1, "delay": 2}  # their arguments


def _ms(ms: int | None) -> str:
    import time
    return "-" if not ms else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return ("pause|resume|stop|status [--crawl-id ID] [--json] | "
                "block|unblock|delay HOST [SECONDS] [--crawl-id ID]")

    def short_desc(self):
        return ("Pause, resume or stop every worker of a crawl; show its status; "
                "block or slow down one host")

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl to steer (default: CRAWL_ID)")
        parser.add_argument("--json", action="store_true", help="status as JSON")

    def run(self, args, opts):
        try:
            if args and args[0] in HOST_ACTIONS:
                host_args = _host_args(args)
            elif len(args) != 1 or args[0] not in ACTIONS:
                got = "nothing" if not args else " ".join(args)
                raise CrawlprojError(f"crawlctl takes one of {', '.join(ACTIONS)}, or "
                                     f"{'|'.join(HOST_ACTIONS)} HOST [SECONDS], not {got!r}")
            check_settings(self.settings)
            redis = get_redis(self.settings)
            keyspace = Keyspace.found(redis, opts.crawl_id or self.settings.get("CRAWL_ID"))
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        action = args[0]
        if action in HOST_ACTIONS:
            try:
                _steer_host(Frontier(redis, keyspace), action, *host_args)
            except RedisError as exc:  # the server went away, refused the script
                print(f"crawlproj: crawlctl {action}: Redis answered {exc}", file=sys.stderr)
                self.exitcode = 1
            return
        if action == "status":
            s = crawl_status(redis, keyspace)
            if opts.json:
                print(json.dumps(s, indent=2))
                return
            r, f = s["rates"], s["frontier"]
            print(f"crawl {s['crawl_id']}: {s['state']}\n"
                  f"  fetched {s['fetched']}, queued {s['queued']}, discovered {s['discovered']}\n"
                  f"  pages/s {r['pages_s_now']} now, {r['pages_s_avg']} on average; "
                  f"MB/s {r['mb_s_now']} now, {r['mb_s_avg']} on average\n"
                  f"  hosts ready {f['hosts_ready']}, waiting {f['hosts_waiting']}, "
                  f"leased {f['hosts_leased']}, backed off {f['hosts_backed_off']}")
            for w in s["workers"]:
                print(f"  worker {w['id']}: {w['state']}, {w['pages_s']} pages/s, "
                      f"{w['leases']} leases, last heartbeat {w['age_s']} s ago"
                      + (f"; {w['leases_fate']}" if w["leases_fate"] else ""))
            return
        at = control.control(redis, keyspace, action)
        done = {"pause": "paused: workers finish their downloads and lease nothing more",
                "resume": "resumed",
                "stop": "stopped: running workers close and give back their leases; "
                        "`scrapy crawl web` goes on where it stopped"}[action]
        print(f"crawl {keyspace.crawl_id} {done} (at {_ms(at)}, server time)")


def _host_args(args: list[str]) -> tuple[str, float]:
    """(host, seconds) of block|unblock|delay HOST [SECONDS]; CrawlprojError
    says what is wrong."""
    action, rest = args[0], args[1:]
    if len(rest) != HOST_ACTIONS[action]:
        usage = f"{action} HOST" + (" SECONDS" if HOST_ACTIONS[action] == 2 else "")
        raise CrawlprojError(f"crawlctl {usage}: got {' '.join(rest) or 'nothing'!r}")
    host = host_name(rest[0])  # BadHostName: a CrawlprojError
    if action == "unblock":
        return host, 0.0
    try:
        seconds = float(rest[1])
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < 10 ** 9:
        raise CrawlprojError(f"crawlctl {action} {host}: SECONDS is a number of seconds, "
                             f"0 or more, not {rest[1]!r}")
    return host, seconds


def _steer_host(frontier: Frontier, action: str, host: str, seconds: float) -> None:
    ms = math.ceil(seconds * 1000)  # never a block of 0.4 ms lifted as one of 0
    if action == "delay":
        frontier.set_delay(host, ms)
        print(f"host {host}: " + (f"at least {seconds:g} s between downloads" if ms
                                  else "the operator's least delay lifted"))
        return
    till = frontier.block(host, ms)
    print(f"host {host}: " + (f"blocked until {_ms(till)} (server time)" if till
                              else "not blocked"))
