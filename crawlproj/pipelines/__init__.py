"""Item pipelines that write the crawl's output (each one a line of
ITEM_PIPELINES in settings/base.py; remove a line to switch it off):

    warc.WarcPipeline          content store: WARC 1.1 files + CDXJ  (WARC_*)
    links.LinkStorePipeline    link graph: Redis working set + Parquet segments  (LINKSTORE_*)
    pagemeta.PageMetaPipeline  per-URL fetch history in Redis  (PAGEMETA_*)
    crawllog.CrawlLogPipeline  Heritrix-style crawl.log  (CRAWLLOG_*)

The WARC, metadata and crawl-log pipelines record every download attempt,
including those that never become an item (redirects, 404s, robots.txt,
network errors): they listen to the record middleware's signals
(crawlproj/stores/record.py, which must be in DOWNLOADER_MIDDLEWARES).
"""
