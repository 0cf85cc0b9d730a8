"""Tell each new link where it was found: what importance-first prioritizers
need to score a URL at enqueue time (Cho et al. §3, Abiteboul et al. 2003).

For every request a page's callback yields, meta["link_context"] becomes
(parent score, number of requests the page yielded, parent host, anchor text,
text around the link, parent's distance to a hot page): the parent's score is
the frontier's score of the page when it was leased (meta["frontier_score"],
set by the scheduler), so a page's importance estimate flows to its links
(OPIC's cash split per link, PageRank's IR(T)/c(T) term). The anchor and the
text around it come from the callback (meta["link_text"], taken off the
request here), each cut to MAX_TEXT characters: what the similarity
prioritizer reads a link by (Cho §7; WebCrawler). The distance is
meta["hot_hops"] of the page, set by that prioritizer (None when unknown).
These meta keys describe one moment of the crawl and are never stored in the
frontier (crawlproj.frontier.codec).
"""

from __future__ import annotations

from scrapy import Request

from crawlproj.urls import host_of

# Longest anchor text and text around a link carried to the prioritizer; the
# extractor's own caps are the same size (crawlproj.extract).
MAX_TEXT = 400


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
            meta = response.meta
            score, host, hops = meta.get("frontier_score"), host_of(response.url), meta.get("hot_hops")
            for r in requests:
                anchor, around = r.meta.pop("link_text", None) or ("", "")
                r.meta["link_context"] = (score, len(requests), host, str(anchor)[:MAX_TEXT],
                                          str(around)[:MAX_TEXT], hops)
        return out
