"""`scrapy redis status|start|stop`: manage the embedded Redis server of CRAWL_DATA_DIR."""

from __future__ import annotations

import argparse
import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawlproj.addon import CommandSettings
from crawlproj.errors import CrawlprojError
from crawlproj.redis.client import describe_url, get_redis
from crawlproj.redis.embedded import EmbeddedRedis

ACTIONS = ("status", "start", "stop")


def _keys(info: dict) -> int:
    return sum(v.get("keys", 0) for k, v in info.items() if k.startswith("db") and isinstance(v, dict))


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = CommandSettings(LOG_ENABLED=False)

    def syntax(self) -> str:
        return "status|start|stop"

    def short_desc(self) -> str:
        return "Show, start or stop the embedded Redis server of CRAWL_DATA_DIR"

    def long_desc(self) -> str:
        return (
            "Without REDIS_URL, crawl workers share an embedded Redis server that "
            "keeps running after the crawl, with its data (AOF) in CRAWL_DATA_DIR/redis. "
            "`status` shows it, `start` starts it, `stop` shuts it down keeping the data. "
            "With REDIS_URL set, `status` describes that external server."
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or args[0] not in ACTIONS:
            raise UsageError(f"expected one of: {', '.join(ACTIONS)}")
        assert self.settings is not None
        url = self.settings.get("REDIS_URL") or None
        data_dir = self.settings.get("CRAWL_DATA_DIR")
        try:
            if url is not None:
                self._external(args[0], url)
            else:
                getattr(self, f"_{args[0]}")(EmbeddedRedis(data_dir))
        except CrawlprojError as e:
            print(f"crawlproj: {e}", file=sys.stderr)
            self.exitcode = 2

    def _external(self, action: str, url: str) -> None:
        if action != "status":
            verb = {"start": "starting", "stop": "stopping"}[action]
            raise CrawlprojError(f"REDIS_URL is set ({describe_url(url)}): the server is "
                                 f"external, not {verb} it")
        info = get_redis(self.settings).info()
        version = info.get("valkey_version") or info.get("redis_version")
        print(f"REDIS_URL points at an external server: {describe_url(url)}")
        print(f"  version: {info.get('server_name', 'redis')} {version}")
        print(f"  memory:  {info.get('used_memory_human')}")
        print(f"  keys:    {_keys(info)}")

    def _status(self, server: EmbeddedRedis) -> None:
        st = server.status()
        if st is None:
            print(f"no embedded server running in {server.dir}")
            return
        print(f"embedded server running in {st['dir']}")
        print(f"  url:     {describe_url(st['url'])}  (password in {server.password_file})")
        print(f"  pid:     {st['pid']}")
        print(f"  version: {st['version']} ({st['binary']})")
        print(f"  uptime:  {st['uptime']}s")
        print(f"  memory:  {st['used_memory_human']}")
        print(f"  keys:    {st['keys']}")
        print(f"  aof:     {'on' if st['aof'] else 'off'}")

    def _start(self, server: EmbeddedRedis) -> None:
        before = server.status()
        url = server.ensure_running()
        st = server.status() or {}
        verb = "already running" if before and before["pid"] == st.get("pid") else "started"
        print(f"embedded server {verb} at {describe_url(url)} (pid {st.get('pid')}, "
              f"dir {server.dir})")

    def _stop(self, server: EmbeddedRedis) -> None:
        if server.stop():
            print(f"embedded server in {server.dir} stopped (data kept in its AOF)")
        else:
            print(f"no embedded server running in {server.dir}")
