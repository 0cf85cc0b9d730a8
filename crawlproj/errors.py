"""Exceptions shared by every crawlproj component."""


class CrawlprojError(Exception):
    """Base class of crawlproj's own errors: catch this to report them in one line."""


# The exit status of `scrapy crawl` for each finish reason that means the
# worker stopped on a failure it could not crawl through: one status per
# class, so a script, Scrapyd or a supervisor tells them apart (README.md,
# "Exit status"). 0 is a crawl that ended (finished, Ctrl-C, a CLOSESPIDER
# limit), 1 any other error (Scrapy's own), 2 a refusal before anything starts.
EXIT_STATUS = {
    "redis_lost": (3, "the crawl's state is gone from Redis"),
    "redis_refused": (4, "Redis refuses the crawl's writes"),
    "redis_unreachable": (5, "Redis did not answer for REDIS_OUTAGE_LIMIT"),
    "store_error": (6, "a store cannot write"),
    # crawlproj/dns.py: a worker given seeds none of which it can look up
    "seed_dns_error": (7, "no seed could be crawled: no seed's host resolves"),
}
