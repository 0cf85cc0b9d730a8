"""The lease check before each download: the entry point of
``middlewares.lease.LeaseCheckMiddleware``; the feature is crawlproj/frontier."""

from crawlproj.frontier.lease import LeaseCheckMiddleware

__all__ = ["LeaseCheckMiddleware"]
