"""What a crawl of the public web gets by default (settings/base.py): a
User-Agent naming the operator's contact (crawlproj/contact.py), Mercator's
politeness, the seeds' registered domains.

The same end to end, through real workers and the simulated web, in
tests/test_recipe_e2e.py; here, the rules each default gives.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from importlib.metadata import version

import pytest
from protego import Protego
from scrapy.http import HtmlResponse, Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawlproj.contact import missing_contact
from crawlproj.frontier.politeness import Download, Politeness
from crawlproj.spiders.web import WebSpider

PRODUCT = f"crawlproj/{version('crawlproj')}"
CONTACT = "mailto:crawl-operator@example.org"


def project_settings() -> Settings:
    """settings.base as the project's crawls get it (scrapy.cfg), Scrapy's names included."""
    base = importlib.import_module("settings.base")
    return Settings({name: getattr(base, name) for name in dir(base) if name.isupper()})


# -- the User-Agent --------------------------------------------------------------------


def test_the_contact_goes_into_the_user_agent():
    settings = get_crawler(WebSpider, {"CRAWL_CONTACT": CONTACT}).settings
    assert settings["USER_AGENT"] == f"{PRODUCT} (+{CONTACT})"
    assert missing_contact(settings) is None


def test_without_a_contact_the_user_agent_is_the_product_alone_and_a_warning_is_due():
    settings = get_crawler(WebSpider, {}).settings
    assert settings["USER_AGENT"] == PRODUCT
    assert "CRAWL_CONTACT" in missing_contact(settings)
    blank = get_crawler(WebSpider, {"CRAWL_CONTACT": "  "}).settings
    assert blank["USER_AGENT"] == PRODUCT and missing_contact(blank)


def test_the_operators_own_user_agent_is_sent_as_it_is():
    settings = get_crawler(WebSpider, {"USER_AGENT": "mybot/2 (+https://me.example/)",
                                       "CRAWL_CONTACT": CONTACT}).settings
    assert settings["USER_AGENT"] == "mybot/2 (+https://me.example/)"
    assert missing_contact(get_crawler(WebSpider, {"USER_AGENT": "mybot/2"}).settings) is None


def test_any_spider_with_the_addon_gets_it():
    settings = get_crawler(settings_dict={"ADDONS": {"crawlproj.addon.Addon": 0},
                                          "CRAWL_CONTACT": CONTACT}).settings
    assert settings["USER_AGENT"] == f"{PRODUCT} (+{CONTACT})"


def test_robots_txt_groups_for_crawlproj_still_apply():
    """The contact follows the product token that robots.txt groups name."""
    ua = get_crawler(WebSpider, {"CRAWL_CONTACT": "https://ops.example/crawler"}).settings["USER_AGENT"]
    robots = Protego.parse("User-agent: *\nAllow: /\n\nUser-agent: crawlproj\nDisallow: /private/\n"
                           "Crawl-delay: 7\n")
    assert not robots.can_fetch("http://site.example/private/x", ua)
    assert robots.crawl_delay(ua) == 7


def warnings_at_start(settings: dict, caplog) -> list[str]:
    spider = WebSpider.from_crawler(get_crawler(WebSpider, settings), seeds="http://a.example/")

    async def start():
        return [r async for r in spider.start()]

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert len(asyncio.run(start())) == 1
    return [r.getMessage() for r in caplog.records if "CRAWL_CONTACT" in r.getMessage()]


def test_the_web_spider_says_so_when_it_starts(caplog):
    assert len(warnings_at_start({}, caplog)) == 1
    assert warnings_at_start({"CRAWL_CONTACT": CONTACT}, caplog) == []


# -- politeness --------------------------------------------------------------------------

def test_the_ten_times_rule_holds_for_every_download_up_to_the_timeout():
    """Mercator §3.1: the next request to a host waits FRONTIER_DELAY_FACTOR
    times the last download's time, for slow hosts too (a cap below factor x
    DOWNLOAD_TIMEOUT would cut the wait short for downloads over cap/factor)."""
    settings = project_settings()
    rule = Politeness.from_settings(settings)
    factor, timeout = settings.getfloat("FRONTIER_DELAY_FACTOR"), settings.getfloat("DOWNLOAD_TIMEOUT")
    assert factor == 10
    for took in (0.02, 1.0, 6.5, 12.0, timeout):
        assert rule.delay(Download(reached=100.0, left=100.0 + took)) == pytest.approx(factor * took)


def test_a_crawl_delay_is_kept_up_to_the_cap():
    """Real sites ask for 100-180 s (tests/test_robots_vectors.py); the cap
    bounds a Crawl-delay of a day."""
    settings = project_settings()
    rule = Politeness.from_settings(settings)
    fast = {"reached": 100.0, "left": 100.05}
    assert rule.delay(Download(**fast, crawl_delay=180.0)) == 180.0
    assert rule.delay(Download(**fast, crawl_delay=86400.0)) == settings.getfloat("FRONTIER_MAX_DELAY")
    assert settings.getbool("ROBOTSTXT_OBEY") and settings.getbool("FRONTIER_OBEY_CRAWL_DELAY")


# -- scope ----------------------------------------------------------------------------

PAGE = b"""<html><body><a href="/about">about</a> <a href="https://shop.example.co.uk/">shop</a>
<a href="http://www.other.co.uk/">other site</a> <a href="http://example.co.uk.evil.example/">lookalike</a>
</body></html>"""


def followed(settings, **kwargs) -> list[str]:
    spider = WebSpider.from_crawler(get_crawler(WebSpider, settings), seeds="http://www.example.co.uk/",
                                    **kwargs)
    response = HtmlResponse("http://www.example.co.uk/", body=PAGE,
                            headers={"Content-Type": "text/html"},
                            request=Request("http://www.example.co.uk/"))
    return [r.url for r in spider.parse(response) if isinstance(r, Request)]


def test_links_are_followed_on_the_seeds_registered_domains_only():
    assert followed({}) == ["http://www.example.co.uk/about", "https://shop.example.co.uk/"]


def test_the_broad_profile_follows_links_to_every_site_at_any_depth():
    broad = importlib.import_module("settings.broad")
    settings = {name: getattr(broad, name) for name in ("CRAWL_SCOPE", "DEPTH_LIMIT")}
    assert len(followed(settings)) == 4
    assert settings["DEPTH_LIMIT"] == 0  # Scrapy's DepthMiddleware: no limit
