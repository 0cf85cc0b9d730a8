"""`scrapy evaluate GRAPH --orders pagerank,backlinks,bfs,random,opic`: Cho's virtual crawler.

Crawls the graph file once per order from one start page (Cho, Garcia-Molina &
Page 1998, §4 Fig. 1), and reports how fast each order reaches the important
pages: PST for hot pages by IB and by IR (Cho's Graphs 1 and 3), PCS (Graph 2)
and the average PageRank of the pages crawled in each tenth of the crawl
(Najork & Wiener 2001, Fig. 1). Writes OUT/curves.csv, OUT/tenths.csv,
OUT/summary.txt and OUT/evaluate.png. Bad input is one line on stderr and exit
status 2.
"""

from __future__ import annotations

import os
import sys
import time

from scrapy.commands import ScrapyCommand

from crawlproj.evaluate.crawler import ORDERS
from crawlproj.evaluate.graph import GraphFormatError, read_graph
from crawlproj.evaluate.run import (
    CHO_G_IB,
    CHO_G_IR,
    evaluate,
    format_summary,
    parse_orders,
    plot,
    write_csv,
)
from crawlproj.ranker.pagerank import CHO_DAMPING


class _UsageError(Exception):
    pass


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "GRAPH [--orders a,b,c] [--start NODE] [--hot-g G | --hot-top K] [--out DIR]"

    def short_desc(self):
        return "Ordering evaluation on a graph file: Cho's virtual crawler, PST/PCS, CSV + PNG"

    def long_desc(self):
        return __doc__

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--orders", default="pagerank,backlinks,bfs,random,opic",
                            help=f"comma-separated, from {','.join(ORDERS)} "
                                 "(default: pagerank,backlinks,bfs,random,opic)")
        parser.add_argument("--start", default=None,
                            help="start page id (default: the most-linked page of the largest "
                                 "strongly connected component, standing in for a home page)")
        parser.add_argument("--hot-g", type=float, default=CHO_G_IB,
                            help=f"hot by IB: pages with at least G backlinks (default {CHO_G_IB}, Cho Graph 1)")
        parser.add_argument("--hot-g-ir", type=float, default=CHO_G_IR,
                            help=f"hot by IR: PageRank at least G, average 1 (default {CHO_G_IR}, Cho Graph 3)")
        parser.add_argument("--hot-top", type=int, default=None,
                            help="hot = the K most important pages (by IB and by IR) instead of thresholds")
        parser.add_argument("--damping", type=float, default=CHO_DAMPING,
                            help=f"PageRank damping d (default {CHO_DAMPING}, Cho §6)")
        parser.add_argument("--pagerank-every", type=int, default=None,
                            help="pagerank order: re-solve PageRank every N crawled pages "
                                 "(default: 1%% of the graph; also after 1, 2, 4, ... pages)")
        parser.add_argument("--cross-host", action="store_true",
                            help="pagerank order counts only links between different hosts "
                                 "(Najork & Wiener §4; needs URLs)")
        parser.add_argument("--urls", default=None,
                            help="file of 'ID URL' lines giving the pages' URLs (hosts)")
        parser.add_argument("--keep-self-loops", action="store_true",
                            help="keep links from a page to itself (dropped by default)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the random order")
        parser.add_argument("--out", default="evaluate-out", help="output directory (default ./evaluate-out)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")

    def _fail(self, msg: str):
        print(f"crawlproj: evaluate: {msg}", file=sys.stderr)
        self.exitcode = 2

    def run(self, args, opts):
        if len(args) != 1:
            return self._fail("expected one GRAPH file (an edge list, .tsv or .tsv.gz)")
        path = args[0]
        quiet = opts.no_progress
        say = (lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
        try:
            if opts.hot_top is not None and opts.hot_top <= 0:
                raise _UsageError(f"--hot-top must be a positive number of pages, got {opts.hot_top}")
            if not 0 <= opts.damping < 1:
                raise _UsageError(f"--damping must be in [0, 1), got {opts.damping}")
            if opts.pagerank_every is not None and opts.pagerank_every <= 0:
                raise _UsageError(f"--pagerank-every must be positive, got {opts.pagerank_every}")
            if opts.urls and not os.path.exists(opts.urls):
                raise _UsageError(f"{opts.urls}: no such file")
            start = None
            if opts.start is not None:
                if not opts.start.isdigit():
                    raise _UsageError(f"--start must be a page id (a non-negative integer), got {opts.start!r}")
                start = int(opts.start)
            # Check the orders before the (long) read of the graph, hosts aside.
            parse_orders(opts.orders, has_hosts=True)
            t0 = time.perf_counter()
            graph = read_graph(path, urls=opts.urls, keep_self_loops=opts.keep_self_loops)
            orders = parse_orders(opts.orders, has_hosts=graph.hosts is not None)
            if opts.cross_host and graph.hosts is None:
                raise _UsageError("--cross-host needs page URLs, and this graph has none")
            if start is not None and start >= graph.n:
                raise _UsageError(f"start page {start} is not in the graph (ids 0..{graph.n - 1})")
            say(f"{graph.name}: {graph.n:,} pages, {graph.m:,} links"
                f"{f', {graph.self_loops_dropped:,} self-links dropped' if graph.self_loops_dropped else ''}"
                f"{f', {len(graph.host_names):,} hosts' if graph.hosts is not None else ''}"
                f" (read in {time.perf_counter() - t0:.1f} s)")
        except (GraphFormatError, _UsageError, ValueError) as exc:
            return self._fail(str(exc))

        progress_factory = None
        if not quiet:
            from tqdm import tqdm

            def progress_factory(order, total):
                return tqdm(total=total, desc=f"{order:<9}", unit=" pages", unit_scale=total >= 10_000,
                            file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}<{remaining}, {rate_fmt}]")

        ev = evaluate(graph, orders, start=start, hot_g=opts.hot_g, hot_g_ir=opts.hot_g_ir,
                      hot_top=opts.hot_top, damping=opts.damping,
                      pagerank_every=opts.pagerank_every, cross_host=opts.cross_host,
                      seed=opts.seed, progress_factory=progress_factory, log=say)
        files = write_csv(ev, opts.out)
        files.append(plot(ev, os.path.join(opts.out, "evaluate.png")))
        text = format_summary(ev)
        stats = ev.crawl_stats.get("pagerank")
        if stats:
            text += (f"\npagerank order: {stats['solves']} PageRank solves "
                     f"(every {stats['every']:,} pages after 1, 2, 4, ...), "
                     f"{stats['iterations']} power iterations in all")
        text += f"\ntotal time {time.perf_counter() - t0:.1f} s"
        summary = os.path.join(opts.out, "summary.txt")
        with open(summary, "w") as fh:
            fh.write(text + "\n")
        files.append(summary)
        print(text)
        print("wrote " + ", ".join(files))
