"""Where each new link was found, for the prioritizers: the entry point of
``middlewares.linkcontext.LinkContextMiddleware``; the feature is
crawlproj/prioritizers/linkcontext.py."""

from crawlproj.prioritizers.linkcontext import LinkContextMiddleware

__all__ = ["LinkContextMiddleware"]
