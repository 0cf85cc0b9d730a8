"""`scrapy ui`: the web app: the search page at / and GET /api/search, the
crawl's dashboard at /dashboard with GET /api/status and POST /api/control,
its hosts at /hosts and /host?name= (GET /api/hosts, /api/host), and
/metrics for Prometheus.

It reads the index of CRAWL_ID under CRAWL_DATA_DIR/index (INDEX_DIR) while
the crawl's indexer writes it, and the crawl's status from its Redis (read
when a page asks: the app starts, and says so, while Redis is away). It binds
loopback (UI_BIND) unless told otherwise; beyond loopback, crawl control
needs UI_TOKEN. Ctrl-C or SIGTERM stop it.
"""

from __future__ import annotations

import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawlproj.addon import CommandSettings, check_settings
from crawlproj.errors import CrawlprojError


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings()

    def syntax(self):
        return "[--port PORT] [--bind ADDRESS] [--crawl-id ID]"

    def short_desc(self):
        return "Serve the search page, the crawl's dashboard and its Prometheus metrics"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--port", type=int, default=None, help="TCP port (default: UI_PORT, 6810)")
        parser.add_argument("--bind", default=None, help="address to listen on (default: UI_BIND, 127.0.0.1)")
        parser.add_argument("--crawl-id", default=None, help="crawl whose index to search (default: CRAWL_ID)")

    def run(self, args, opts):
        from scrapy.utils.log import configure_logging
        from twisted.internet import reactor
        from twisted.internet.error import CannotListenError
        from twisted.web.server import Site

        from crawlproj.search.index import index_dir
        from crawlproj.search.searcher import Ranking
        from crawlproj.ui.app import App
        from crawlproj.ui.dashboard import StatusService, add_dashboard, check_token, is_loopback
        from crawlproj.ui.hosts import add_hosts
        from crawlproj.ui.metrics import add_metrics
        from crawlproj.ui.search import SearchService, add_search

        if args:
            raise UsageError("no arguments, only options")
        configure_logging(self.settings)
        s = self.settings
        if opts.crawl_id:
            s.set("CRAWL_ID", opts.crawl_id, priority="cmdline")
        port = opts.port if opts.port is not None else s.getint("UI_PORT")
        bind = opts.bind or s.get("UI_BIND")
        try:
            check_settings(s)
            if not 0 <= port <= 65535:
                raise CrawlprojError(f"--port must be 0-65535, not {port}")
            token = s.get("UI_TOKEN")
            check_token(token)
            app = App()
            add_search(app, SearchService(index_dir(s), Ranking.from_settings(s)))
            status = StatusService(s, s.get("CRAWL_ID"), token, is_loopback(bind))
            add_dashboard(app, status)
            add_hosts(app, status)
            add_metrics(app, status)
            try:
                listening = reactor.listenTCP(port, Site(app), interface=bind)
            except CannotListenError as exc:
                reason = getattr(exc.socketError, "strerror", None) or str(exc.socketError)
                raise CrawlprojError(f"cannot listen on {bind}:{port}: {reason}"
                                     + (" (--port to choose another)" if "in use" in reason else "")) \
                    from None
        except CrawlprojError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
            return
        host = listening.getHost()
        print(f"crawlproj search on http://{host.host}:{host.port}/ (index {index_dir(s)}), "
              f"dashboard on http://{host.host}:{host.port}/dashboard", flush=True)
        if not is_loopback(bind) and not token:
            print("crawlproj: the app listens beyond loopback without UI_TOKEN: the dashboard "
                  "shows the crawl but cannot pause, resume or stop it", file=sys.stderr, flush=True)
        reactor.run()
