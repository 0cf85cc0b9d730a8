"""CrawlFigures: Mercator §4's figures counted as a worker goes, in its stats.

Every download attempt the record middleware reports (the crawl log's lines,
crawlproj/stores/crawllog.py) is counted by outcome (Figure 6), content type
and size bin of the documents (Figures 7 and 8), with crawlproj/stores/report.py's
rules, under ``figures/...`` in the worker's Scrapy stats. The heartbeat adds
them up crawl-wide (heartbeat.py), so the dashboard draws the figures `scrapy
report` computes from the logs, for a crawl still running, from anywhere.
"""

from __future__ import annotations

from crawlproj.stores.exchange import Exchange
from crawlproj.stores.report import outcome, size_bin
from crawlproj.stores.signals import attempt_failed, exchange_recorded


class CrawlFigures:
    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        figures = cls(crawler.stats)
        crawler.signals.connect(figures.attempt, exchange_recorded)
        crawler.signals.connect(figures.attempt, attempt_failed)
        return figures

    def attempt(self, exchange=None, attempt=None, **kwargs):
        att = exchange if exchange is not None else attempt
        if att is None:
            return
        inc = self.stats.inc_value
        if att.hops == "P":  # robots.txt: a prerequisite, not a document (report.py)
            inc("figures/robots_fetches")
            return
        inc("figures/attempts")
        inc(f"figures/outcome/{outcome(att.status)}")
        inc(f"figures/status/{att.status}")
        if isinstance(att, Exchange) and att.status == 200:
            size = len(att.body)
            inc("figures/documents")
            inc("figures/document_bytes", size)
            inc(f"figures/type/{att.content_type or '-'}")
            inc(f"figures/size/{size_bin(size)}")
