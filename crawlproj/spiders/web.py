"""The `web` spider: fetch pages, record them, follow their links.

    scrapy crawl web -a seeds=seeds.txt [-a scope=host|domain|any]
    scrapy crawl web -a query="..." [-a seeds=...] [-a max_pages=N]

It is the crawler's processing step [Mercator §3, steps 5-7]: each downloaded
page becomes a :class:`~crawlproj.items.PageItem`, and each link on an HTML
page that the crawl scope allows goes back to the frontier as a Request. The
URL-seen test, politeness and ordering are the frontier's (the SCHEDULER and
DUPEFILTER in settings/base.py), depth limits are Scrapy's DepthMiddleware.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Request, Response, TextResponse

from crawlproj import internals
from crawlproj.addon import apply_environment, apply_table, check_settings
from crawlproj.contact import missing_contact
from crawlproj.extract import (
    Extracted,
    extract_page,
    is_html,
    mime_type,
)
from crawlproj.items import PageItem
from crawlproj.robots.meta import NOTHING, ROBOTS, Directives, obeyed_agents, with_head
from crawlproj.scope import Scope, ScopeError, scope_mode
from crawlproj.seeds import check_seed, read_seeds
from crawlproj.signals import page_parsed

__all__ = ["WebSpider", "ScopeError"]


class WebSpider(scrapy.Spider):
    """Crawl from seed URLs, following links within the crawl scope.

    Arguments (``-a name=value``):

    ``seeds``
        A seeds file or comma-separated URLs (see :mod:`crawlproj.seeds`; a
        URL with a comma in it must go in a file), or, from Python, a list.
        Optional: a worker started without it joins a running crawl and
        takes its URLs from the shared frontier. A seeds file that does not
        exist, or seeds without one usable URL, raise
        :class:`~crawlproj.errors.CrawlprojError` from the constructor, before
        anything starts (the ``crawl`` command prints it as one line); bad
        entries among good ones are skipped with a warning each.
    ``scope``
        ``host``, ``domain`` or ``any``; overrides the CRAWL_SCOPE setting.
    ``query``, ``max_pages``
        The real-time search mode (crawlproj/search/realtime.py): a crawl
        toward the query's words, from the seeds or else from the index's
        best results for it (which then count as the seeds, scope included),
        stopping after max_pages fetched pages or when the query's results
        stop improving. Bad values raise CrawlprojError from
        :meth:`from_crawler`, which lays the session's settings.

    Scope: with ``host`` or ``domain`` the crawl stays on the seeds' hosts or
    registered domains (the allowed set is built from the seeds, so a link
    from one seed site to another is followed, and a page reached by a
    redirect to another site has its links dropped). A worker started without
    seeds knows no allowed set; it then follows links to the host/domain of
    the page they were found on. That differs only for links from one seed
    site to another (dropped) and for pages reached by a redirect off the seed
    sites (their same-site links followed). Give every worker the same seeds
    argument to get the exact rule: seeds are ordinary requests with
    ``dont_filter=False``, so the frontier's URL-seen test drops the copies.

    Request meta is serialised into the shared frontier for every queued URL,
    so links carry little of their own: what Scrapy's middlewares add
    (``depth``), and ``link_text`` (anchor text, text around the link), which
    the link context turns into a part of meta["link_context"], never stored.
    The anchor text of each link is also in the source page's item.

    HTTP errors: Scrapy's HttpErrorMiddleware keeps its default (non-2xx
    responses never reach :meth:`parse`; its stats count them). If
    HTTPERROR_ALLOWED_CODES lets some through, they get an item like any page
    but their links are not followed.
    """

    name = "web"

    def __init__(
        self, seeds: str | list[str] | None = None, scope: str | None = None,
        query: str | None = None, max_pages: str | int | None = None, **kwargs: Any
    ):
        super().__init__(**kwargs)
        self._query_args = None if query is None else (query, max_pages)
        self.realtime = None  # from_crawler: the query's Session
        # Read now, so a missing file fails before the crawl starts.
        self.seed_urls: list[str] = []
        self.seed_problems: list[str] = []
        if isinstance(seeds, (list, tuple)):  # from Python: crawl(WebSpider, seeds=[...])
            seen: set[str] = set()
            for i, entry in enumerate(seeds, 1):
                url, problem = check_seed(str(entry))
                if url is None:
                    self.seed_problems.append(f"seeds[{i}]: {problem}")
                elif url not in seen:
                    seen.add(url)
                    self.seed_urls.append(url)
        elif seeds is not None and seeds.strip():
            self.seed_urls, self.seed_problems = read_seeds(seeds)
        self._scope_arg = scope_mode(scope, "scope") if scope else None
        self.scope: Scope  # from_crawler: this argument, or CRAWL_SCOPE
        self.text_max_chars: int  # from_crawler: PAGE_TEXT_MAX_CHARS
        # from_crawler, with ROBOTS_META_OBEY: the names robots directives
        # reach this crawler by (X-Robots-Tag), and with "robots" (meta tags)
        self.robots_agents: frozenset[str] | None = None
        self.robots_names: frozenset[str] | None = None

    @classmethod
    def update_settings(cls, settings):
        """crawlproj's settings table under this crawler's, whatever its settings
        module, the environment's CRAWLPROJ_ settings over it, and their names
        checked (crawlproj/addon.py). Here, not by the add-on alone: Scrapy
        builds the spider before it runs add-ons. A Scrapy lacking an internal
        the hooks patch is refused here too, where no crawl command runs."""
        internals.check()
        super().update_settings(settings)
        apply_table(settings)
        apply_environment(settings)
        check_settings(settings, cls)

    @classmethod
    def from_crawler(cls, crawler, *args: Any, **kwargs: Any):
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        if spider._query_args is not None:
            from crawlproj.search.realtime import Session

            # before Scrapy freezes the settings: the session's crawl id,
            # prioritizer and index, which every component then reads
            spider.realtime = Session.configure(settings, *spider._query_args)
            spider.seed_urls = spider.realtime.require_start(settings, spider.seed_urls)
        mode = spider._scope_arg or scope_mode(settings.get("CRAWL_SCOPE"), "CRAWL_SCOPE")
        spider.scope = Scope(mode, spider.seed_urls)
        spider.text_max_chars = settings.getint("PAGE_TEXT_MAX_CHARS")
        spider.robots_agents = obeyed_agents(settings)
        if spider.robots_agents is not None:
            spider.robots_names = spider.robots_agents | {ROBOTS}
        return spider

    # ------------------------------------------------------------------
    # Seeds
    # ------------------------------------------------------------------

    async def start(self) -> AsyncIterator[Request]:
        stats = self.crawler.stats
        contact = missing_contact(self.crawler.settings)
        if contact:
            self.logger.warning(contact)
        for problem in self.seed_problems:
            self.logger.warning("seed skipped: %s", problem)
        stats.set_value("seeds/invalid", len(self.seed_problems))
        stats.set_value("seeds/accepted", len(self.seed_urls))
        if not self.seed_urls:
            self.logger.info("no seeds given: taking URLs from the shared frontier")
            if self.scope.mode != "any":
                self.logger.warning(
                    "crawl scope %s without seeds: links are followed when on the %s of "
                    "the page they are found on; pass the crawl's seeds to apply them",
                    self.scope.mode, self.scope.mode,
                )
        elif self.scope.mode != "any":
            self.logger.info(
                "crawl scope %s: %d allowed %s(s)",
                self.scope.mode, len(self.scope.allowed), self.scope.mode,
            )
        for url in self.seed_urls:
            # dont_filter stays False: the frontier's URL-seen test drops a
            # seed already given to (or crawled by) another worker.
            yield Request(url, callback=self.parse)

    # ------------------------------------------------------------------
    # Pages
    # ------------------------------------------------------------------

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PageItem | Request]:
        stats = self.crawler.stats
        # set by the content-seen test (crawlproj/due/middleware.py)
        duplicate_of = response.request.meta.get("duplicate_of") if response.request else None
        if duplicate_of:
            # Seen before under another URL [Mercator §3, step 4]: recorded, and
            # its links are not extracted again.
            stats.inc_value("web/pages/duplicate")
            item = self._item(response, Extracted())
            item["duplicate_of"] = duplicate_of
            yield item
            return
        if not is_html(response):
            # Images, PDFs, JSON, ...: recorded, never parsed; what their
            # X-Robots-Tag says is obeyed (noarchive: their WARC record)
            stats.inc_value("web/pages/other")
            robots, _, _ = with_head(self._header(response), response.url, self.robots_agents)
            self._count(robots)
            yield self._item(response, Extracted(), robots)
            return
        encoding = response.encoding if isinstance(response, TextResponse) else None
        extracted = extract_page(
            response.body,
            response.url,
            encoding,
            content_type=response.headers.get(b"Content-Type"),
            max_text_chars=self.text_max_chars,
            robots_names=self.robots_names,
        )
        stats.inc_value("web/pages/html")
        if extracted.links_dropped:
            stats.inc_value("web/links/capped", extracted.links_dropped)
        # what the response head adds to the page's own tags (most pages
        # send none of these headers: three lookups)
        robots, canonical, refresh = with_head(
            self._header(response), response.url, self.robots_agents,
            extracted.robots, extracted.canonical, extracted.refresh)
        item = self._item(response, extracted, robots, canonical, refresh)
        yield item
        self._count(robots)
        if not 200 <= response.status < 300:
            return
        if canonical is not None and canonical != response.url:
            stats.inc_value("robotsmeta/pages/canonical")
        # before the links are yielded: a prioritizer may mark the page (hot)
        self.crawler.signals.send_catch_log(page_parsed, response=response,
                                            title=extracted.title, text=extracted.text)
        followed = unfollowed = 0
        around = extracted.around
        nofollow = extracted.nofollow
        if not robots.nofollow:
            for url, anchor in extracted.links:
                if nofollow and url in nofollow:
                    unfollowed += 1
                elif self.scope.allows(response.url, url):
                    try:
                        # the link context takes it off (crawlproj/prioritizers/linkcontext.py)
                        request = Request(url, callback=self.parse,
                                          meta={"link_text": (anchor, around.get(url, ""))})
                    except ValueError:  # not expected: extract_page checked the URL
                        continue
                    followed += 1
                    yield request
        else:
            unfollowed = len(extracted.links)
        if refresh is not None:
            # A refresh is the page sending its visitors on, as a redirect
            # does (Google reads a refresh as one): its target is followed
            # whatever the scope and nofollow say, as RedirectMiddleware
            # follows a redirect, and its links then obey the scope.
            try:
                request = Request(refresh, callback=self.parse)
            except ValueError:  # not expected: refresh_url checked the URL
                request = None
            if request is not None:
                stats.inc_value("web/refresh/followed")
                yield request
        stats.inc_value("web/links/followed", followed)
        if unfollowed:
            stats.inc_value("robotsmeta/links/nofollow", unfollowed)
        if len(extracted.links) > followed + unfollowed:
            stats.inc_value("web/links/out_of_scope", len(extracted.links) - followed - unfollowed)

    @staticmethod
    def _header(response: Response):
        """name -> the response's values of that header (crawlproj.robots.meta.with_head)."""
        return lambda name: response.headers.getlist(name)

    def _count(self, robots: Directives) -> None:
        if robots:
            for name in robots.names():
                self.crawler.stats.inc_value(f"robotsmeta/pages/{name}")

    def _item(self, response: Response, extracted: Extracted, robots: Directives = NOTHING,
              canonical: str | None = None, refresh: str | None = None) -> PageItem:
        try:
            meta = response.meta
        except AttributeError:  # a Response built without a Request (tests)
            meta = {}
        redirects = meta.get("redirect_urls")
        if redirects:
            url = redirects[0]
        elif response.request is not None:
            url = response.request.url
        else:
            url = response.url
        download_time = meta.get("crawlproj_download_time")
        if download_time is None:
            download_time = meta.get("download_latency")
        if robots.nofollow:
            outlinks = [{"url": u, "anchor": a, "nofollow": True} for u, a in extracted.links]
        elif extracted.nofollow:
            marked = extracted.nofollow
            outlinks = [{"url": u, "anchor": a, "nofollow": True} if u in marked
                        else {"url": u, "anchor": a} for u, a in extracted.links]
        else:
            outlinks = [{"url": u, "anchor": a} for u, a in extracted.links]
        if refresh is not None and not any(o["url"] == refresh for o in outlinks):
            outlinks.append({"url": refresh, "anchor": ""})
        return PageItem(
            url=url,
            final_url=response.url,
            status=response.status,
            content_type=mime_type(response.headers.get(b"Content-Type")),
            length=len(response.body),
            fetch_time=meta.get("crawlproj_fetch_time") or time.time(),
            download_time=download_time,
            depth=meta.get("depth", 0),
            title=extracted.title,
            text=extracted.text,
            outlinks=outlinks,
            duplicate_of=None,
            robots=robots.names() if robots else [],
            canonical=canonical,
        )
