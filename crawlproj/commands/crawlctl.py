"""`scrapy crawlctl pause|resume|stop|status [--crawl-id ID] [--json]`: steer
every worker of a running crawl at once (crawlproj/monitor/control.py).

pause: workers finish their downloads and lease nothing more; resume; stop:
every running worker closes gracefully and gives back its leases (`scrapy
crawl web` with the same CRAWL_ID goes on, losing nothing); status: the
crawl's state, rates, frontier and workers in a few lines (the dashboard's
figures, crawlproj/monitor/status.py).
"""

from __future__ import annotations

import json
import sys

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError
from crawlproj.monitor import control
from crawlproj.monitor.status import crawl_status
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace

ACTIONS = (*control.COMMANDS, "status")


def _ms(ms: int | None) -> str:
    import time
    return "-" if not ms else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "pause|resume|stop|status [--crawl-id ID] [--json]"

    def short_desc(self):
        return "Pause, resume or stop every worker of a crawl; show its status"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="crawl to steer (default: CRAWL_ID)")
        parser.add_argument("--json", action="store_true", help="status as JSON")

    def run(self, args, opts):
        try:
            if len(args) != 1 or args[0] not in ACTIONS:
                got = "nothing" if not args else " ".join(args)
                raise CrawlprojError(f"crawlctl takes one of {', '.join(ACTIONS)}, not {got!r}")
            check_settings(self.settings)
            redis = get_redis(self.settings)
            keyspace = Keyspace.found(redis, opts.crawl_id or self.settings.get("CRAWL_ID"))
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        action = args[0]
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
