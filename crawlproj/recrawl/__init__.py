"""Continuous crawling: the recrawl model and its place in the crawl.

Edwards, McCurley & Tomlin 2001 (WebFountain) §4-5 and the work it builds on
(Cho & Garcia-Molina, §2 there). The model's modules are pure computation (no
Redis, no Scrapy); ``schedule`` and ``middleware`` put it to work in a crawl.

- ``buckets``: the one-byte change-rate bucket <-> rate mapping;
- ``estimate``: change-rate estimators from fetch observations;
- ``state``: the small per-URL recrawl state record and its update;
- ``record``: a scheduled page's recrawl record and what a fetch shows of it;
- ``freshness``: closed forms of a page's expected freshness;
- ``population``: pages per bucket, the input of a plan;
- ``policies``: uniform, adaptive (Nutch), optimal (Lagrange) and webfountain plans;
- ``webfountain``: the time-period model, equations 1-6, and its solver;
- ``schedule``: Recrawl, the frontier's side of a continuous crawl: each page's
  next due time, the plan in force and its re-plan loop (the scheduler's part);
- ``middleware``: conditional GET and what a fetch showed (downloader
  middleware 945; middlewares/recrawl.py is its entry point);
- ``lua/sync_recrawl.lua``: the frontier sync script's recrawl part, in Redis:
  the hosts' recrawl queues, the budget's token bucket, the share of
  never-crawled URLs (crawlproj/frontier/frontier.py, SYNC_PARTS).
"""
