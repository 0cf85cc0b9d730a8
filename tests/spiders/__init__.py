"""Spiders used only by tests (SPIDER_MODULES=crawlproj.spiders,tests.spiders)."""
