"""Sitemaps (sitemaps.org) requested and read through the frontier: the entry
points of ``middlewares.sitemaps.SitemapMiddleware`` and
``middlewares.sitemaps.SitemapDownloadMiddleware``; the feature is crawlproj/sitemaps."""

from crawlproj.sitemaps.middleware import SitemapDownloadMiddleware, SitemapMiddleware

__all__ = ["SitemapDownloadMiddleware", "SitemapMiddleware"]
