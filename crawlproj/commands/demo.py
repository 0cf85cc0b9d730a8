"""`scrapy demo`: a real crawl of the simulated web, offline, then a summary.

It starts the simulated web (a multi-host web served on 127.0.0.1 as an HTTP
proxy), runs `scrapy crawl web` workers against it through the full stack
(frontier and DUE on the embedded Redis unless REDIS_URL is set), stores the
page items as JSON lines, and prints what was fetched and stored, checked
against the simulated web's own request log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from scrapy.commands import ScrapyCommand

from crawlproj.addon import CommandSettings
from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import get_redis
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer

# The demo's workers reach only the simulated web: the contact in their
# User-Agent says so, and no warning to set CRAWL_CONTACT breaks up the summary.
CONTACT = "crawlproj demo, simulated web on 127.0.0.1"


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self):
        return "[--workers N] [--hosts H] [--pages P] [--seed S]"

    def short_desc(self):
        return "Crawl a simulated web offline with the full stack and print a summary"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
        parser.add_argument("--hosts", type=int, default=200, help="simulated hosts (default 200)")
        parser.add_argument("--pages", type=int, default=1500, help="simulated pages (default 1500)")
        parser.add_argument("--seed", type=int, default=1, help="the simulated web's seed")

    def run(self, args, opts):
        data = Path(self.settings.get("CRAWL_DATA_DIR")).resolve()
        out = data / "demo"
        try:
            get_redis(self.settings)  # the embedded server, started once for all workers
            out.mkdir(parents=True, exist_ok=True)
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        except OSError as exc:
            print(f"crawlproj: cannot write the demo's output in {out}: {exc.strerror or exc}",
                  file=sys.stderr)
            self.exitcode = 2
            return
        spec = {"seed": opts.seed, "hosts": opts.hosts, "pages": opts.pages,
                "latency_ms": [1, 5], "crawl_delay": 0.2, "page_bytes": 4000}
        crawl_id = f"demo-{int(time.time())}"
        items = out / f"{crawl_id}.jsonl"
        log = out / f"{crawl_id}.requests.jsonl"
        with SimWebServer(spec, log_path=str(log)) as sw:
            seeds = out / "seeds.txt"
            seeds.write_text("\n".join(sw.web.seeds(3)) + "\n")
            print(f"simulated web: {len(sw.web.hosts)} hosts, {sw.web.n_nodes} pages, "
                  f"proxy {sw.proxy_url}")
            env = sw.env()
            env.update(CRAWL_ID=crawl_id, CRAWL_DATA_DIR=str(data))
            # A broad crawl of the whole simulated web (every host, every
            # depth), whose only operator is whoever runs the demo.
            cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
                   "-a", "scope=any", "-s", "DEPTH_LIMIT=0",
                   "-s", f"CRAWL_CONTACT={CONTACT}",
                   "-s", f"FEEDS={json.dumps({str(items): {'format': 'jsonlines'}})}",
                   "-s", "LOG_LEVEL=WARNING",
                   # the simulated web's 500s are planned, and the summary counts
                   # them: a page given up after its retries is no error of the demo
                   "-s", "RETRY_GIVE_UP_LOG_LEVEL=INFO"]
            print(f"crawl {crawl_id}: {opts.workers} worker(s) sharing one frontier ...")
            started = time.monotonic()
            procs = [subprocess.Popen(cmd, env=env) for _ in range(opts.workers)]
            codes = [p.wait() for p in procs]
            took = time.monotonic() - started
            records = sw.read_log()
            reachable = sw.web.reachable(sw.web.seeds(3))
        self._summary(records, reachable, items, took, codes, sw)

    def _summary(self, records, reachable, items, took, codes, sw):
        counts = checks.fetch_counts(records)
        statuses = Counter(r["status"] for r in records if r["path"] != "/robots.txt")
        stored = [json.loads(line) for line in items.open()] if items.exists() else []
        types = Counter((i.get("content_type") or "?").split(";")[0] for i in stored)
        overlaps = checks.overlaps(records)
        impolite = checks.politeness_violations(
            records, factor=self.settings.getfloat("FRONTIER_DELAY_FACTOR"),
            min_delay=self.settings.getfloat("FRONTIER_MIN_DELAY"),
            max_delay=self.settings.getfloat("FRONTIER_MAX_DELAY"),
            crawl_delay_of=sw.web.crawl_delay)
        given_up = len({(r["host"], r["path"]) for r in records if r["status"] >= 500})
        print(f"\nfetched {len(counts)} URLs of {len(reachable)} reachable in {took:.1f} s "
              f"({len(counts) / max(took, 1e-9):.0f}/s), "
              f"{sum(n - 1 for n in counts.values())} refetched (retries of 500s; "
              f"{given_up} given up: the simulated web's planned 500s)")
        print("  by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
        print(f"  hosts contacted: {len({r['host'] for r in records})}, two requests at once "
              f"to one host: {len(overlaps)}, politeness gaps too short: {len(impolite)}")
        print(f"stored {len(stored)} page items in {items}")
        print("  by type: " + ", ".join(f"{t}: {n}" for t, n in types.most_common()))
        print(f"  links extracted: {sum(len(i.get('outlinks') or []) for i in stored)}")
        ok = all(c == 0 for c in codes) and set(counts) == reachable and not overlaps
        print("demo " + ("OK" if ok else "FAILED: see above"))
        self.exitcode = 0 if ok else 1
