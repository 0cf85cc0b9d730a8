"""settings.cluster, the profile of a crawl on many machines, on one server.

It needs the crawl's shared server: without REDIS_URL a worker says so in one
line and stops, instead of crawling alone on its machine's embedded server.
Its partitions follow the server: one on a single server (tests/test_cluster.py
has the Redis Cluster's).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import get_redis
from crawlproj.redis.keyspace import Keyspace
from tests.e2e import ROOT

REQUIRED = ("crawlproj: REDIS_URL is not set, and these settings (REDIS_URL_REQUIRED, as in "
            "settings.cluster) need the crawl's shared server: set REDIS_URL, e.g. "
            "redis://:PASSWORD@HOST:6379/0")


def scrapy(args, tmp_path, **env_extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CRAWLPROJ_") and k not in ("REDIS_URL", "REDIS_CLUSTER")}
    env.update(SCRAPY_SETTINGS_MODULE="settings.cluster", CRAWL_DATA_DIR=str(tmp_path / "data"),
               **env_extra)
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_without_redis_url_nothing_is_started(tmp_path):
    with pytest.raises(CrawlprojError, match="REDIS_URL is not set"):
        get_redis({"REDIS_URL_REQUIRED": True, "CRAWL_DATA_DIR": str(tmp_path)})
    assert not (tmp_path / "redis").exists()  # no embedded server


@pytest.mark.e2e
@pytest.mark.parametrize("args", [["crawl", "web", "-a", "seeds=http://a.example/"],
                                  ["seed", "http://a.example/"], ["rank", "--once"]])
def test_a_cluster_worker_without_redis_url_stops_in_one_line(args, tmp_path):
    run = scrapy(args, tmp_path)
    # `crawl` logs Scrapy's start-up lines first; what it says of the problem is one line
    said = [line for line in run.stderr.splitlines() if "REDIS_URL" in line]
    assert (run.returncode, said) == (2, [REQUIRED])
    assert "Traceback" not in run.stderr + run.stdout
    assert not (tmp_path / "data" / "redis").exists()  # no embedded server


@pytest.mark.e2e
def test_a_crawl_of_the_cluster_profile_on_one_server_has_one_partition(redis_url, tmp_path):
    """On one server every partition costs a script call per sync and spreads
    nothing: the crawl's first process fixes one."""
    run = scrapy(["seed", "http://a.example/,http://b.example/"], tmp_path, REDIS_URL=redis_url,
                 CRAWL_ID="one")
    assert run.returncode == 0, run.stderr
    assert Keyspace.existing(redis.Redis.from_url(redis_url), "one") == Keyspace("one", 1)


@pytest.mark.e2e
def test_a_fixed_count_from_the_environment_is_the_crawls(redis_url, tmp_path):
    run = scrapy(["seed", "http://a.example/"], tmp_path, REDIS_URL=redis_url, CRAWL_ID="eight",
                 CRAWLPROJ_FRONTIER_PARTITIONS="8")
    assert run.returncode == 0, run.stderr
    assert Keyspace.existing(redis.Redis.from_url(redis_url), "eight") == Keyspace("eight", 8)
