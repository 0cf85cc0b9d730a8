"""A misspelt setting, Scrapy's or crawlproj's, is named at start with the
closest real name; settings of one's own are let through (crawlproj/addon.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import scrapy
from scrapy.settings import Settings

from crawlproj.addon import UnknownSetting, apply_table, check_settings

ROOT = Path(__file__).resolve().parent.parent


def settings(**values) -> Settings:
    s = Settings()
    apply_table(s)
    for name, value in values.items():
        s.set(name, value, priority="cmdline")
    return s


@pytest.mark.parametrize("typo, meant", [
    ("DEPTH_LIMT", "DEPTH_LIMIT"), ("CONCURENT_REQUESTS", "CONCURRENT_REQUESTS"),
    ("CONCURRENT_REQUEST", "CONCURRENT_REQUESTS"), ("DOWNLOAD_DELAYS", "DOWNLOAD_DELAY"),
    ("USERAGENT", "USER_AGENT"), ("LOG_LEVL", "LOG_LEVEL"), ("ROBOTTXT_OBEY", "ROBOTSTXT_OBEY"),
    ("AUTOTHROTTLE_ENABLE", "AUTOTHROTTLE_ENABLED"), ("ITEM_PIPELINE", "ITEM_PIPELINES"),
    ("DOWLOAD_TIMEOUT", "DOWNLOAD_TIMEOUT"), ("CRAWL_SCOOPE", "CRAWL_SCOPE"),
])
def test_a_misspelt_setting_is_named_with_the_closest_real_one(typo, meant):
    with pytest.raises(UnknownSetting) as info:
        check_settings(settings(**{typo: "0"}))
    assert f"unknown setting {typo} (did you mean {meant}?)" in str(info.value)


# Settings of Scrapy plugins and of projects' own code; and what Scrapy makes
# of Scrapyd's SCRAPY_ variables (SCRAPY_JOB is the setting JOB).
OWN = """SCHEDULER_PERSIST SCHEDULER_QUEUE_KEY SCHEDULER_DUPEFILTER_KEY SCHEDULER_IDLE_BEFORE_CLOSE
DUPEFILTER_KEY SCHEDULER_PRIORITY_QUEUE_REDIS PLAYWRIGHT_BROWSER_TYPE
PLAYWRIGHT_LAUNCH_OPTIONS SPLASH_URL SPLASH_COOKIES_DEBUG ZYTE_API_KEY ZYTE_API_TRANSPARENT_MODE
DELTAFETCH_ENABLED ROTATING_PROXY_LIST FAKEUSERAGENT_PROVIDERS SPIDERMON_ENABLED
SCRAPEOPS_API_KEY CRAWLERA_ENABLED SELENIUM_DRIVER_NAME MONGO_URI MONGODB_DATABASE
USER_AGENT_LIST ITEM_PIPELINES_LIST SENTRY_DSN TEST_RESOLVER_MAP JOB SPIDER PROJECT
EGG_VERSION SETTINGS_MODULE""".split()


def test_settings_of_ones_own_are_let_through():
    check_settings(settings(**{name: "1" for name in OWN}))


def test_a_lookalike_read_by_a_component_of_the_crawl_is_let_through():
    """USER_AGENTS is one letter from USER_AGENT: refused unless something
    the crawl runs reads it (here a downloader middleware in the settings)."""
    with pytest.raises(UnknownSetting, match=r"USER_AGENTS \(did you mean USER_AGENT\?\)"):
        check_settings(settings(USER_AGENTS=["a", "b"]))
    check_settings(settings(USER_AGENTS=["a", "b"], DOWNLOADER_MIDDLEWARES={
        "tests.components.useragents.RotatingUserAgent": 400}))


class LogsSpider(scrapy.Spider):
    """A spider that reads a setting of its own: the logs whose URLs it fetches."""

    name = "logs"

    async def start(self):
        for path in self.settings.getlist("LOG_FILES"):
            with open(path, encoding="utf-8") as f:
                for url in f:
                    yield scrapy.Request(url.strip())


def test_a_lookalike_read_by_the_spider_is_let_through():
    with pytest.raises(UnknownSetting, match=r"LOG_FILES \(did you mean LOG_FILE\?\)"):
        check_settings(settings(LOG_FILES=["access.log"]))
    check_settings(settings(LOG_FILES=["access.log"]), LogsSpider)


def test_a_lookalike_named_in_crawl_custom_settings_is_let_through():
    check_settings(settings(USER_AGENTS=["a"], CRAWL_CUSTOM_SETTINGS=["USER_AGENTS"]))
    check_settings(settings(USER_AGENTS=["a"], CRAWL_CUSTOM_SETTINGS="USER_AGENTS,OTHER"))


def test_scrapy_crawl_names_a_misspelt_scrapy_setting_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "CRAWL_ID", "SCRAPY_SETTINGS_MODULE")}
    env["CRAWL_DATA_DIR"] = str(tmp_path / "data")
    run = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "web", "-a",
                          "seeds=http://a.test/", "-s", "DEPTH_LIMT=0"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "crawlproj: unknown setting DEPTH_LIMT (did you mean DEPTH_LIMIT?); crawlproj's "
        "settings are listed in settings/base.py, Scrapy's in its documentation (a setting "
        "of your own: name it in CRAWL_CUSTOM_SETTINGS)")
    assert not (tmp_path / "data" / "redis").exists()  # nothing was started
