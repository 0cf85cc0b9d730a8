"""Tell each new link where it was found: what importance-first prioritizers
need to score a URL at enqueue time (Cho et al. §3, Abiteboul et al. 2003).

For every request a page's callback yields, meta["link_context"] becomes
(parent score, number of requests the page yielded, parent host): the parent's
score is the frontier's score of the page when it was leased
(meta["frontier_score"], set by the scheduler), so a page's importance estimate
flows to its links (OPIC's cash split per link, PageRank's IR(T)/c(T) term).
Both meta keys describe one moment of the crawl and are never stored in the
frontier (crawlproj.frontier.codec).
"""

from __future__ import annotations

from scrapy import Request

from crawlproj.urls import host_of


class LinkContextMiddleware:
    def process_spider_output(self, response, result, spider=None):
        return self._annotate(response, list(result))

    async def process_spider_output_async(self, response, result, spider=None):
        out = [x async for x in result]
        for x in self._annotate(response, out):
            yield x

    @staticmethod
    def _annotate(response, out: list) -> list:
        requests = [x for x in out if isinstance(x, Request)]
        if requests:
            context = (response.meta.get("frontier_score"), len(requests),
                       host_of(response.url))
            for r in requests:
                r.meta["link_context"] = context
        return out
