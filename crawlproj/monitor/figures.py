"""CrawlFigures: Mercator §4's figures counted as a worker goes, in its stats.

Every download attempt the record middleware reports (the crawl log's lines,
crawlproj/stores/crawllog.py) is counted by outcome (Figure 6), content type
and size bin of the documents (Figures 7 and 8), with crawlproj/stores/report.py's
rules, under ``figures/...`` in the worker's Scrapy stats. The heartbeat adds
them up crawl-wide (heartbeat.py), so the dashboard draws the figures `scrapy
report` computes from the logs, for a crawl still running, from anywhere.
Errors are counted by kind too (``figures/errors/<kind>``, ERROR_KINDS), the
series the crawl's history keeps (history.py).
"""

from __future__ import annotations

from crawlproj.stores.exchange import (
    S_CONNECT_FAILED,
    S_CONNECT_LOST,
    S_DOMAIN_PREREQUISITE_FAILURE,
    S_DOMAIN_UNRESOLVABLE,
    S_ROBOTS_PRECLUDED,
    S_TIMEOUT,
    Exchange,
)
from crawlproj.stores.report import outcome, size_bin
from crawlproj.stores.signals import attempt_failed, exchange_recorded

# What went wrong with an attempt, by the crawl log's status (Heritrix's codes
# for the attempts that had no HTTP answer).
ERROR_KINDS = ("dns", "tcp", "timeout", "4xx", "5xx", "robots")
_KIND_OF_CODE = {S_DOMAIN_UNRESOLVABLE: "dns", S_DOMAIN_PREREQUISITE_FAILURE: "dns",
                 S_CONNECT_FAILED: "tcp", S_CONNECT_LOST: "tcp", S_TIMEOUT: "timeout",
                 S_ROBOTS_PRECLUDED: "robots"}


def error_kind(status: int) -> str | None:
    """The kind of error an attempt of this status was, or None (no error)."""
    if 400 <= status < 500:
        return "4xx"
    if status >= 500:
        return "5xx"
    return _KIND_OF_CODE.get(status)


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
        kind = error_kind(att.status)
        if kind is not None:
            inc(f"figures/errors/{kind}")
        if isinstance(att, Exchange) and att.status == 200:
            size = len(att.body)
            inc("figures/documents")
            inc("figures/document_bytes", size)
            inc(f"figures/type/{att.content_type or '-'}")
            inc(f"figures/size/{size_bin(size)}")
