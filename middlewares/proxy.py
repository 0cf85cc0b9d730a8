"""Every download through the proxy of the CRAWL_PROXY setting.

Scrapy's HttpProxyMiddleware takes its proxies from the environment
(http_proxy, https_proxy, no_proxy) of the worker process, or from a request's
``meta["proxy"]``. A Scrapyd job inherits the environment of the Scrapyd
server, so one job's proxy has to come from its settings
(``setting=CRAWL_PROXY=http://host:port``): this middleware, just before
Scrapy's, puts it in ``meta["proxy"]``, where Scrapy's sends the request
through it (credentials in the URL become Proxy-Authorization). A request that
names a proxy of its own keeps it. The frontier does not store the key
(frontier/codec.py), so the setting of the worker that downloads a URL is the
one that counts.
"""

from __future__ import annotations

from scrapy.exceptions import NotConfigured


class ProxyMiddleware:
    def __init__(self, proxy: str):
        self.proxy = proxy

    @classmethod
    def from_crawler(cls, crawler):
        proxy = crawler.settings.get("CRAWL_PROXY")
        if not proxy:
            raise NotConfigured
        return cls(proxy)

    def process_request(self, request, spider=None):
        request.meta.setdefault("proxy", self.proxy)
