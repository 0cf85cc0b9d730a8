"""Scrapy's entry point of the stores' recorder (crawlproj/stores/record.py)."""

from crawlproj.stores.record import RecordMiddleware

__all__ = ["RecordMiddleware"]
