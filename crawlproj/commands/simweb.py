"""``scrapy simweb serve|info``: the simulated web from the command line.

    scrapy simweb serve --seed 1 --hosts 300 --pages 3000 --seeds-out seeds.txt
    http_proxy=http://127.0.0.1:8899 scrapy crawl ... (start URLs from seeds.txt)

    scrapy simweb info --graph /work/shared/data/graphs/with_urls/hollins/hollins.dat.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawlproj.errors import CrawlprojError
from crawlproj.graphfile import FORMATS
from crawlproj.simweb.model import GENERATE_DEFAULTS, GENERATE_HELP, GRAPH_DEFAULTS, SimWeb
from crawlproj.simweb.server import ServeError


def _latency(text: str) -> float | list[float]:
    """'50' -> 50 ms for every host; '20-200' or '20,200' -> drawn per host."""
    for sep in ("-", ","):
        if sep in text.strip("-"):
            lo, hi = text.split(sep, 1)
            return [float(lo), float(hi)]
    return float(text)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False  # no crawl: plain asyncio server
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "serve|info [--port 8899] [--seed 1] [--hosts 300] [--pages 3000] [--graph PATH] [options]"

    def short_desc(self) -> str:
        return "Serve a simulated multi-host web as an HTTP proxy on loopback, or print its stats"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        g = parser.add_argument_group("Serving")
        g.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
        g.add_argument("--port", type=int, default=8899, help="proxy port (default 8899; 0 = any)")
        g.add_argument("--log", metavar="FILE", help="request log, one JSON line per request")
        g.add_argument("--seeds-out", metavar="FILE", help="write start URLs here, one per line")
        g.add_argument("--num-seeds", type=int, default=10, help="how many start URLs (default 10)")
        g.add_argument("--cache-mb", type=int, default=64, help="response cache size (default 64)")
        w = parser.add_argument_group("Web")
        w.add_argument("--spec", help="whole spec as JSON text or @file.json; flags override it")
        w.add_argument("--graph", metavar="PATH", help="serve this link graph file instead of a generated web")
        w.add_argument("--graph-format", choices=FORMATS)
        w.add_argument("--edges-path", metavar="PATH", help="edge file of two-file graph formats")
        w.add_argument("--nodes-per-host", type=int, help="graph without URLs: consecutive ids per host")
        for name, default in GENERATE_DEFAULTS.items():
            if name == "latency_ms":
                w.add_argument("--latency-ms", type=_latency, metavar="MS|LO-HI",
                               help="per-host response delay in ms: N, or LO-HI drawn per host (default 0)")
            else:
                w.add_argument(_flag(name), type=type(default), metavar=type(default).__name__.upper(),
                               help=f"{GENERATE_HELP[name]} (default {default})")

    def _spec(self, opts: argparse.Namespace) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if opts.spec:
            text = opts.spec
            if text.startswith("@"):
                with open(text[1:], encoding="utf-8") as f:
                    text = f.read()
            try:
                spec = json.loads(text)
            except ValueError as exc:
                raise UsageError(f"--spec is not JSON: {exc}", print_help=False) from None
        if opts.graph:
            spec["graph"] = opts.graph
        given = {k: getattr(opts, k) for k in list(GENERATE_DEFAULTS) + ["nodes_per_host", "edges_path"]
                 if getattr(opts, k, None) is not None}
        if opts.graph_format:
            given["format"] = opts.graph_format
        allowed = GRAPH_DEFAULTS if "graph" in spec else GENERATE_DEFAULTS
        bad = [_flag(k) for k in given if k not in allowed]
        if bad:
            raise UsageError(f"not valid {'with' if 'graph' in spec else 'without'} --graph: {' '.join(bad)}")
        spec.update(given)
        return spec

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in ("serve", "info"):
            raise UsageError("say 'serve' or 'info'")
        stray = [a for a in args[1:]]
        if stray:
            raise UsageError(f"unknown arguments: {' '.join(stray)}")
        try:
            self._run(args[0], opts)
        except ServeError as exc:
            print(f"crawlproj: {exc}", file=sys.stderr)
            self.exitcode = 2
        except OSError as exc:  # a file named by --spec @FILE, --seeds-out or --log
            print(f"crawlproj: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
            self.exitcode = 2

    def _run(self, action: str, opts: argparse.Namespace) -> None:
        t = time.monotonic()
        try:
            web = SimWeb.from_spec(self._spec(opts))
        except CrawlprojError as exc:  # a graph file we cannot read
            raise UsageError(str(exc), print_help=False) from exc
        built = time.monotonic() - t
        seeds = web.seeds(opts.num_seeds)
        what = (f"graph {web.spec['graph']} ({web.format})" if web.kind == "graph"
                else f"generated, seed {web.spec['seed']}")
        print(f"simweb: {len(web.hosts)} hosts, {web.n_nodes} pages ({what}; built in {built:.1f} s)")
        if getattr(web, "changing", False):
            print(f"  changing pages: {web.spec['change_dist']}; simulated day 0 at Unix time "
                  f"{web.spec['change_epoch']:.0f} (--change-epoch), a day lasts {web.clock.day_seconds:g} s")
        if web.kind == "graph" and web.load_stats:
            print("  load: " + ", ".join(f"{k} {v}" for k, v in sorted(web.load_stats.items())))
        if opts.seeds_out:
            # the trap hosts' roots too: nothing of the ordinary web links to them
            with open(opts.seeds_out, "w", encoding="utf-8") as f:
                f.write("".join(s + "\n" for s in seeds + web.trap_seeds()))
            print(f"  {len(seeds)} start URLs written to {opts.seeds_out}"
                  + (f", and {len(web.trap_seeds())} trap hosts' roots" if web.trap_seeds() else ""))
        if action == "info":
            for k, v in web.stats().items():
                print(f"  {k}: {v}")
            print("  reachable from the seeds: "
                  f"{len(web.reachable(seeds))} URLs (robots obeyed)")
            print("  seeds: " + " ".join(seeds[:5]) + (" ..." if len(seeds) > 5 else ""))
            return

        from crawlproj.simweb.server import run

        def ready(port: int) -> None:
            proxy = f"http://{opts.host}:{port}"
            print(f"  proxy: {proxy}   (export http_proxy={proxy}, or meta['proxy'])")
            print(f"  start URL: {seeds[0]}")
            if opts.log:
                print(f"  request log: {opts.log}")
            print("  serving; Ctrl-C to stop", flush=True)

        run(web, opts.host, opts.port, opts.log, opts.cache_mb, on_ready=ready)
        print("simweb: stopped")
