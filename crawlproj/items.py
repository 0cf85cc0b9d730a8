"""What the `web` spider emits: one :class:`PageItem` per fetched page.

A ``scrapy.Item`` (dict-like, so pipelines and feed exports can use
``item["url"]`` or ItemAdapter); the spider always sets every field.
"""

from __future__ import annotations

import scrapy

__all__ = ["PageItem", "PAGE_ITEM_FIELDS"]


class PageItem(scrapy.Item):
    # The URL as requested, before any redirect (the first of Scrapy's
    # meta["redirect_urls"]); the frontier's key for the page.
    url = scrapy.Field()
    # The URL the response came from, after redirects (response.url).
    final_url = scrapy.Field()
    status = scrapy.Field()  # HTTP status code
    # Lower-cased MIME type without parameters ("text/html"), "" if none sent.
    content_type = scrapy.Field()
    length = scrapy.Field()  # body size in bytes (after Content-Encoding)
    # When the response arrived, epoch seconds (float).
    fetch_time = scrapy.Field()
    # Seconds the download took: the frontier's figure
    # (meta["crawlproj_download_time"]) when it has one, else Scrapy's
    # meta["download_latency"]; None when neither is known.
    download_time = scrapy.Field()
    depth = scrapy.Field()  # link depth from a seed (DepthMiddleware), seeds are 0
    title = scrapy.Field()  # <title> text, whitespace-normalised; "" if none
    # Visible text, whitespace-normalised, at most PAGE_TEXT_MAX_CHARS; "" for
    # pages that are not HTML.
    text = scrapy.Field()
    # Every link on the page in document order, in scope or not:
    # [{"url": absolute URL without fragment, "anchor": anchor text}, ...];
    # a refresh's target (<meta http-equiv="refresh">, the Refresh header) is
    # one of them.
    outlinks = scrapy.Field()
    # URL of an earlier page with the same content, filled by the content-seen
    # test [Mercator §3, step 4]; None until then.
    duplicate_of = scrapy.Field()
    # The robots directives the page gave this crawler and it obeyed
    # (crawlproj/robots/meta.py): some of "noindex", "nofollow", "noarchive",
    # "nosnippet"; [] when none, or when ROBOTS_META_OBEY is off. An outlink
    # not followed for nofollow (its rel, or the page's) has "nofollow": True.
    robots = scrapy.Field()
    # The URL the page names as its canonical (<link rel="canonical"> in its
    # head, or a Link header with rel="canonical"; RFC 6596), resolved; None
    # when it names none, or names several.
    canonical = scrapy.Field()


PAGE_ITEM_FIELDS = tuple(PageItem.fields)
