"""Exceptions shared by every crawlproj component."""


class CrawlprojError(Exception):
    """Base class of crawlproj's own errors: catch this to report them in one line."""
