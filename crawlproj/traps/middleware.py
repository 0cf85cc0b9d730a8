"""The trap guard's near-duplicate rule, as a spider middleware.

A page whose text is a near duplicate of one of its host's recent pages
(crawlproj/traps/nearhost.py) is flagged (stat trapguard/near_duplicate_pages),
and its links to its own host are suspects: the frontier queues them behind
every other URL of the host. Once more than TRAPGUARD_NEAR_DUPLICATE_PAGES of
a host's last TRAPGUARD_NEAR_DUPLICATE_WINDOW pages are flagged, the host is
trapped: the links of its further near duplicates to it are not followed,
and the frontier drops its queued suspects instead of leasing them (stat
trapguard/refused/near_duplicates, one per URL). A trap thus costs about
the budget's pages, whatever each page's number of links. Pages that differ
from the host's recent ones keep their links, so a site with a calendar in
one corner is still crawled everywhere else. The window lives in Redis: every
worker's pages of a host go into one.

It reads the text the `web` spider put in the page's item, which comes out of
the spider before the page's links; the tests of the pages that arrive
together ride the stores' round trip (crawlproj/stores/commit.py), hashed
and sent in its writer thread. The URL rules of the trap guard are the frontier's
(crawlproj/traps/__init__.py).
"""

from __future__ import annotations

import logging
from functools import partial

from redis import RedisError
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object

from crawlproj.frontier.scheduler import FrontierScheduler
from crawlproj.items import PageItem
from crawlproj.redis.client import get_redis
from crawlproj.redis.guard import RedisGuard
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.commit import StoreCommit
from crawlproj.traps.nearhost import SUSPECT_META, NearHosts, Verdict
from crawlproj.urls import host_of

logger = logging.getLogger(__name__)


PART = "near-duplicate test"


class NearDuplicateHostsMiddleware:
    def __init__(self, near: NearHosts, budget: int, stats, guard: RedisGuard,
                 commit: StoreCommit):
        self.near = near
        self.budget = budget
        self.stats = stats
        self.guard = guard
        self._logged: set[str] = set()
        # the test rides the stores' round trip (one per batch of pages)
        commit.part(PART, near.queue, near.answer)
        self._test = partial(commit.call, PART)

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        budget = s.getint("TRAPGUARD_NEAR_DUPLICATE_PAGES")
        if budget <= 0:
            raise NotConfigured
        if not issubclass(load_object(s["SCHEDULER"]), FrontierScheduler):
            # the rule's window lives in the frontier's crawl and its verdict
            # is the frontier's to apply: another scheduler has neither
            logger.info("Trap guard: near-duplicate pages not tested (SCHEDULER is not the "
                        "frontier's)")
            raise NotConfigured
        redis = get_redis(s)
        near = NearHosts(redis, Keyspace.from_settings(s, redis),
                         window=s.getint("TRAPGUARD_NEAR_DUPLICATE_WINDOW"),
                         bits=s.getint("TRAPGUARD_NEAR_DUPLICATE_BITS"), budget=budget)
        return cls(near, budget, crawler.stats, RedisGuard.of(crawler), StoreCommit.of(crawler))

    async def _verdict(self, response, item) -> Verdict | None:
        """The near-duplicate test of the page of item; None when not tested."""
        if item.get("duplicate_of") or not item.get("text") or not 200 <= response.status < 300:
            return None
        host = host_of(response.url)
        try:
            verdict = await maybe_deferred_to_future(self._test((host, item["text"])))
        except RedisError as exc:  # never lose a page's links to a Redis hiccup; said once
            self.stats.inc_value("trapguard/errors")
            self.guard.failed(PART, exc)
            return None
        except Exception as exc:
            logger.error("near-duplicate test failed for %s: %s", response.url[:200], exc)
            self.stats.inc_value("trapguard/errors")
            return None
        self.guard.answered(PART)
        if verdict is None or not verdict.near:
            return None
        self.stats.inc_value("trapguard/near_duplicate_pages")
        if verdict.count > self.budget and host not in self._logged \
                and len(self._logged) < 10_000:
            self._logged.add(host)
            logger.info("Trap guard: %d of the last pages of %s are near duplicates; its "
                        "near duplicates' links to it are not followed (%s)",
                        verdict.count, host, response.url[:200])
        return verdict

    async def process_spider_output(self, response, result, spider=None):
        verdict, host = None, None
        async for x in result:
            if isinstance(x, PageItem):
                verdict = await self._verdict(response, x)
                host = host_of(response.url)
            elif isinstance(x, Request) and verdict is not None and host_of(x.url) == host:
                if verdict.count > self.budget:
                    self.stats.inc_value("trapguard/refused/near_duplicates")
                    continue
                x.meta[SUSPECT_META] = True
            yield x
