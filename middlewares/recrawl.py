"""Conditional GET for continuous crawling: the entry point of
``middlewares.recrawl.RecrawlMiddleware``; the feature is crawlproj/recrawl."""

from crawlproj.recrawl.middleware import RecrawlMiddleware

__all__ = ["RecrawlMiddleware"]
