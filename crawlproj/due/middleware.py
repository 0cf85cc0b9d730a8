"""The content-seen test as a downloader middleware (Mercator §3, step 4).

Every successful (2xx) response with a body is tested against the crawl's
shared content-seen sets (crawlproj.due.contentseen) before the spider sees it.
A document already seen under another URL gets ``response.meta["duplicate_of"]``
= that first URL (and ``meta[DUPLICATE_CAPTURED]`` = when its fetch started,
for the revisit record that refers to it); the `web` spider then records the page with
``item["duplicate_of"]`` and does not extract its links again. The tests of
the responses that arrive together go in one round trip, and the reactor
never waits on Redis: the exact test in the stores' round trip
(StoreCommit.call, crawlproj/stores/commit.py), sent in its writer thread;
the near test, which needs its replies to know what
else to ask, in round trips of its own in a thread (GroupCall).

Settings: CONTENTSEEN_ENABLED, CONTENTSEEN_NEAR, CONTENTSEEN_NEAR_THRESHOLD
(settings/base.py). Stats: contentseen/unique, contentseen/duplicates,
contentseen/near_duplicates, contentseen/errors, contentseen/redis_commands.
It is placed last before the spider (order 80 < HttpCompression's 590, so it
sees decoded bodies, and after redirects and retries are resolved).
"""

from __future__ import annotations

import logging
from functools import partial

from redis import RedisError
from scrapy.exceptions import NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future

from crawlproj.due.contentseen import DUPLICATE_CAPTURED, ContentSeen, is_text
from crawlproj.redis.client import get_redis
from crawlproj.redis.groupcommit import GroupCall
from crawlproj.redis.guard import RedisGuard
from crawlproj.redis.keyspace import Keyspace
from crawlproj.stores.commit import StoreCommit
from crawlproj.stores.record import T0

logger = logging.getLogger(__name__)
PART = "content-seen test"


class ContentSeenMiddleware:
    def __init__(self, content_seen: ContentSeen, stats, guard: RedisGuard,
                 commit: StoreCommit | None = None):
        self.content_seen = content_seen
        self.stats = stats
        self.guard = guard
        if commit is None:
            self._test = GroupCall(content_seen.test_many, name="contentseen", stats=stats)
        else:
            commit.part(PART, content_seen.queue, content_seen.answer)
            self._test = partial(commit.call, PART)

    @classmethod
    def from_crawler(cls, crawler):
        s = crawler.settings
        if not s.getbool("CONTENTSEEN_ENABLED"):
            raise NotConfigured
        redis = get_redis(s)
        cs = ContentSeen(redis, Keyspace.from_settings(s, redis),
                         near=s.getbool("CONTENTSEEN_NEAR"),
                         threshold=s.getfloat("CONTENTSEEN_NEAR_THRESHOLD"))
        # the near test needs its replies before it knows what else to ask:
        # it cannot ride the stores' round trip
        return cls(cs, crawler.stats, RedisGuard.of(crawler),
                   None if cs.near else StoreCommit.of(crawler))

    async def process_response(self, request, response):
        if (not 200 <= response.status < 300 or not response.body
                or request.callback is NO_CALLBACK):  # robots.txt and other internal fetches
            return response
        text = is_text(response.headers.get(b"Content-Type"))
        try:
            verdict = await maybe_deferred_to_future(self._test(
                (response.url, response.body, text, request.meta.get(T0))))
        except RedisError as exc:  # never lose a page to a Redis hiccup; the outage is said once
            self.stats.inc_value("contentseen/errors")
            self.guard.failed(PART, exc)
            return response
        except Exception as exc:
            logger.error("content-seen test failed for %s: %s", response.url[:200], exc)
            self.stats.inc_value("contentseen/errors")
            return response
        self.guard.answered(PART)
        self.stats.inc_value("contentseen/redis_commands", verdict.commands)
        if verdict.duplicate_of is None:
            self.stats.inc_value("contentseen/unique")
        else:
            self.stats.inc_value("contentseen/near_duplicates" if verdict.near
                                 else "contentseen/duplicates")
            request.meta["duplicate_of"] = verdict.duplicate_of
            request.meta[DUPLICATE_CAPTURED] = verdict.captured
            logger.debug("%s has the content of %s%s", response.url, verdict.duplicate_of,
                         f" (resemblance {verdict.resemblance:.2f})" if verdict.near else "")
        return response
