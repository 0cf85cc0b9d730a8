"""Links sent lately dropped early: the entry point of
``middlewares.recentlinks.RecentLinksMiddleware``; the feature is crawlproj/frontier."""

from crawlproj.frontier.recentlinks import RecentLinksMiddleware

__all__ = ["RecentLinksMiddleware"]
