"""The `web` spider, plus requests no worker could fetch, yielded from each seed page."""

from __future__ import annotations

from scrapy import Request

from crawlproj.spiders.web import WebSpider

BAD_URLS = {
    "scheme": "ftp://h0001.example/pub/file.txt",
    "url_too_long": "http://h0001.example/" + "a" * 3000,
    "invalid_host": "http://127.0.0.256/",  # IPv4 part out of range: no browser fetches it
}


class HostileSpider(WebSpider):
    name = "hostile"

    def parse(self, response, **kwargs):
        if response.meta.get("depth", 0) == 0:
            for reason, url in BAD_URLS.items():
                try:
                    request = Request(url, callback=self.parse)
                except ValueError:  # w3lib 2.6 refuses an invalid IPv4 host itself
                    self.crawler.stats.inc_value(f"hostile/unbuildable/{reason}")
                    continue
                yield request
        yield from super().parse(response, **kwargs)
