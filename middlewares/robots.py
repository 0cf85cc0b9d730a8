"""robots.txt with a shared cache, checked before every download: the entry
point of ``middlewares.robots.RobotsMiddleware``; the feature is crawlproj/robots."""

from crawlproj.robots.middleware import RobotsMiddleware

__all__ = ["RobotsMiddleware"]
