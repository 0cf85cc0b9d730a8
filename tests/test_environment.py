"""Settings from the environment: CRAWLPROJ_<NAME>=value sets NAME.

Over the settings module, under -s; in every crawlproj command (their
default_settings), under the web spider's crawler and the add-on's; a
CRAWLPROJ_ name that names no setting refused in one line, like a misspelt
setting.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawlproj.addon import UnknownSetting, check_settings, environment
from crawlproj.spiders.web import WebSpider
from tests.e2e import ROOT


def scrapy(args, env_extra, tmp_path):
    """`scrapy ARGS` in the project, with no CRAWLPROJ_ variable but env_extra's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CRAWLPROJ_") and k not in ("REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env.update(CRAWL_DATA_DIR=str(tmp_path / "data"), **env_extra)
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_variable_names_a_setting_of_the_table_or_of_scrapy():
    assert environment({
        "CRAWLPROJ_FRONTIER_PRIORITIZER": "pagerank",   # crawlproj's
        "CRAWLPROJ_CONCURRENT_REQUESTS": "64",          # Scrapy's
        "CRAWLPROJ_FRONTIER_PRIORITISER": "pagerank",   # neither: kept whole, to be refused
        "CRAWLPROJ_WORKERS": "4",
        "FRONTIER_DELAY_FACTOR": "3",                   # no prefix: not a setting
        "PATH": "/bin",
    }) == {"FRONTIER_PRIORITIZER": "pagerank", "CONCURRENT_REQUESTS": "64",
           "CRAWLPROJ_FRONTIER_PRIORITISER": "pagerank", "CRAWLPROJ_WORKERS": "4"}


def test_a_variable_naming_no_setting_is_refused_with_the_closest_one():
    with pytest.raises(UnknownSetting) as exc:
        check_settings(Settings(environment({"CRAWLPROJ_FRONTIER_PRIORITISER": "pagerank",
                                          "CRAWLPROJ_QQQQQQQQQQQQ": "1"})))
    assert str(exc.value) == (
        "unknown settings CRAWLPROJ_FRONTIER_PRIORITISER (did you mean "
        "CRAWLPROJ_FRONTIER_PRIORITIZER?), CRAWLPROJ_QQQQQQQQQQQQ; crawlproj's settings are "
        "listed in settings/base.py")


def test_the_environment_is_over_the_settings_module_and_under_s(tmp_path):
    """settings.cluster sets FRONTIER_LEASE_TTL = 60; the variable wins over
    it, and -s (a Scrapyd job's settings come as -s) over the variable."""
    profile = {"SCRAPY_SETTINGS_MODULE": "settings.cluster"}
    get = ["settings", "--get", "FRONTIER_LEASE_TTL"]
    said = [scrapy(args, env, tmp_path) for args, env in [
        (get, profile),
        (get, {**profile, "CRAWLPROJ_FRONTIER_LEASE_TTL": "45"}),
        ([*get, "-s", "FRONTIER_LEASE_TTL=30"], {**profile, "CRAWLPROJ_FRONTIER_LEASE_TTL": "45"}),
    ]]
    assert [(r.returncode, r.stdout.strip()) for r in said] == [(0, "60.0"), (0, "45"), (0, "30")]


def test_a_crawler_of_the_web_spider_or_the_addon_takes_the_environment(monkeypatch):
    """A crawler built in a process of one's own (no crawlproj command), e.g.
    CrawlerProcess in a script: the spider and the add-on lay the variables."""
    monkeypatch.setenv("CRAWLPROJ_FRONTIER_DELAY_FACTOR", "3.5")
    web = get_crawler(WebSpider, {"FRONTIER_DELAY_FACTOR": 2.0})  # as a settings module would
    other = get_crawler(settings_dict={"ADDONS": {"crawlproj.addon.Addon": 0}})
    assert web.settings.getfloat("FRONTIER_DELAY_FACTOR") == 3.5
    assert other.settings.getfloat("FRONTIER_DELAY_FACTOR") == 3.5
    monkeypatch.setenv("CRAWLPROJ_FRONTIER_DELAY_FACTR", "3.5")
    with pytest.raises(UnknownSetting, match="CRAWLPROJ_FRONTIER_DELAY_FACTR"):
        get_crawler(WebSpider)


def test_a_contact_from_the_environment_is_in_the_user_agent(monkeypatch):
    monkeypatch.setenv("CRAWLPROJ_CRAWL_CONTACT", "ops@example.org")
    for crawler in (get_crawler(WebSpider),
                    get_crawler(settings_dict={"ADDONS": {"crawlproj.addon.Addon": 0}})):
        assert crawler.settings.get("USER_AGENT").endswith("(+ops@example.org)")


@pytest.mark.e2e
@pytest.mark.parametrize("args", [["crawl", "web"], ["seed", "http://a.example/"],
                                  ["rank", "--once"], ["settings", "--get", "CRAWL_ID"]])
def test_commands_refuse_a_variable_naming_no_setting_in_one_line(args, redis_url, tmp_path):
    """Were the variable let through, `crawl` would join crawl "typo" with
    the breadth-first prioritizer on a real server, `seed` create it."""
    run = scrapy(args, {"REDIS_URL": redis_url, "CRAWL_ID": "typo",
                        "CRAWLPROJ_FRONTIER_PRIORITISER": "pagerank"}, tmp_path)
    assert run.returncode == 2, run.stderr
    # `crawl` logs Scrapy's start-up lines first; what it says of the problem is one line
    said = [line for line in run.stderr.splitlines() if "CRAWLPROJ_" in line]
    assert said == [
        "crawlproj: unknown setting CRAWLPROJ_FRONTIER_PRIORITISER (did you mean "
        "CRAWLPROJ_FRONTIER_PRIORITIZER?); crawlproj's settings are listed in settings/base.py"]
    assert "Traceback" not in run.stderr + run.stdout
    assert redis.Redis.from_url(redis_url).dbsize() == 0
