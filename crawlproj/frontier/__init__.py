"""The URL frontier (Mercator §3.1): per-host back queues, a heap of the times
each host may next be contacted, and leases, shared by every worker in Redis.

Here:
    frontier.py    Frontier, the one typed interface to the frontier in Redis, in
                   URLFrontier's terms (its docstring maps each call): the sync
                   round trip (put URLs, get leases, release them with the host's
                   next contact), counts, queues, one host's state, the recrawl
                   schedule; nothing outside this package names a frontier key
    scheduler.py   FrontierScheduler, Scrapy's SCHEDULER on the shared frontier:
                   Scrapy's interface and the wiring of the parts below, which it
                   registers as the crawler's components (crawlproj/components.py)
    admission.py   Admission: the worker's side of a URL's entry (refusals, score,
                   payload) and the URLs sent lately
    leases.py      the lease book: where each of this worker's leases is, and
                   what its end sends (no Scrapy, no Redis)
    downloads.py   Downloads: a lease from the engine's pull to its end (the lease
                   check, the downloader's signals, the page's end, robots.txt)
    lease.py       the lease check, a downloader middleware: no download on a
                   lease this worker has lost
    recentlinks.py a spider middleware: a link this worker sent lately goes no
                   further (middlewares/ holds both entry points)
    politeness.py  a host's wait after a download, and how the download left it
    sync.py        the worker's one round trip at a time: what it says, which
                   leases it asks for, when it looks again; the crawl's control
    urlfilter.py   the user's URL filters
    lua/           frontier.lua (host states, back queues, leases, releases) and
                   sync.lua (the arguments, the sections in order): with the parts
                   of due/, monitor/, traps/ and recrawl/, the sync script (every
                   change to a partition, in one script call; frontier.py,
                   SYNC_PARTS, composes it); rescore.lua (the ranker's bulk
                   rewrite of queued priorities), revise.lua (scheduled pages a
                   sitemap says changed), queues.lua (many hosts' queue lengths
                   in one call)
    codec.py       requests to and from msgpack payloads (never pickle)

Elsewhere:
    crawlproj/due/           the DUE (Mercator §3.2): canonical URLs, fingerprints,
                             the seen sets tested inside the sync script
                             (due/lua/seen.lua, its first part)
    crawlproj/prioritizers/  each URL's score: the order the frontier serves them in
                             (FRONTIER_PRIORITIZER)
    crawlproj/ranker/        PageRank on the crawled graph, rewriting queued priorities
    crawlproj/recrawl/       continuous crawling: the change-rate model, the plans,
                             each page's next due time (schedule.py, the scheduler's
                             Recrawl part)
    crawlproj/robots/        the robots cache (Mercator §3) and robots meta tags
    crawlproj/traps/         the trap guard: URL rules, per-host budgets, near
                             duplicates
    crawlproj/urls.py        the URL rule: which URLs may enter, and each one's host
    crawlproj/redis/keyspace.py    the key layout: crawl id, partitions, every key name
    crawlproj/redis/groupcommit.py one write to Redis at a time, in a thread (the sync's and
                             the stores')
    crawlproj/internals.py   the Scrapy internals the frontier relies on, and only there
"""
