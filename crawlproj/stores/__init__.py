"""The crawl's output stores [Mercator §2: the content store and the URL/link
databases; WebCrawler §3: the link database kept apart from the index].

    warc.py       content store: WARC 1.1 files, rotated, crash-repaired
    cdxj.py       SURT keys and CDXJ index lines for the WARC records
    storage.py    where finished files go (local directory; object stores plug in here)
    crawllog.py   one line per download attempt, Heritrix crawl.log style
    pagemeta.py   per-URL fetch history in Redis (the recrawl model's input)
    linkstore.py  the link graph: working set in Redis, segments on disk
    graph.py      the Parquet export (edge list + URL table)
    graph_command.py  `scrapy export-graph`, registered by entry point (pyproject.toml)
    report.py     Mercator §4's crawl statistics from the crawl logs
    exchange.py   what the record middleware captures of one download

Pipelines in ``crawlproj.pipelines`` connect them to Scrapy; the record
downloader middleware (``middlewares.record``) captures every download attempt.
"""
