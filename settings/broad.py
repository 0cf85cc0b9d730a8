"""Broad crawls, after Scrapy's "Broad Crawls" advice, on top of base.

Every site the seeds lead to (scope "any", no depth limit): many hosts, each
fetched politely by the frontier; more concurrency, no cookies, a DNS cache, a
larger reactor thread pool for DNS lookups, short timeouts, no retries of slow
hosts, and the memory of every request kept small.
"""

from settings.base import *

CONCURRENT_REQUESTS = 128
REACTOR_THREADPOOL_MAXSIZE = 20
COOKIES_ENABLED = False
DNSCACHE_ENABLED = True
DNSCACHE_SIZE = 100_000
DNS_TIMEOUT = 10
DOWNLOAD_TIMEOUT = 15
RETRY_ENABLED = True
RETRY_TIMES = 1
REDIRECT_MAX_TIMES = 3
AJAXCRAWL_ENABLED = False
LOG_LEVEL = "INFO"

# A broad crawl follows links to any site, at any depth from the seeds
# (Mercator's and Najork & Wiener's crawls of the whole web).
CRAWL_SCOPE = "any"
DEPTH_LIMIT = 0
