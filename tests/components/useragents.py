"""A downloader middleware of the kind projects write for themselves: it
reads a setting of its own, USER_AGENTS, whose name is one letter from
Scrapy's USER_AGENT (tests/test_setting_typos.py)."""

from __future__ import annotations

import itertools


class RotatingUserAgent:
    def __init__(self, agents: list[str]):
        self.agents = itertools.cycle(agents or ["crawlproj-test"])

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getlist("USER_AGENTS"))

    def process_request(self, request, spider=None):
        request.headers[b"User-Agent"] = next(self.agents)
