"""The content-seen test on every response (Mercator §3, step 4): the entry point
of ``middlewares.contentseen.ContentSeenMiddleware``; the feature is crawlproj/due."""

from crawlproj.due.middleware import ContentSeenMiddleware

__all__ = ["ContentSeenMiddleware"]
