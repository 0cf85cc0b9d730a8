"""The crawl's full-text index and its search, as the WebCrawler had them.

Pinkerton (1994) indexes every fetched page's title and content in an
inverted, vector-space full-text index and answers queries from it through a
query server; crawlproj does the same with BM25 (the probabilistic heir of
that weighting) in an embedded tantivy index, combined with PageRank
[Cho §2]. docs/search.md has the design, the engine choice and the figures.

    document.Document         one indexed page, from a page item or a WARC record
    handover.HandOver         workers' documents on their way to the indexer (Redis)
    anchors.AnchorStore       anchor texts of links to each page, and PageRank over them
    index.PageIndex           the tantivy index under CRAWL_DATA_DIR/index/<crawl>
    indexer.Indexer           the one writer: hand-over -> index, behind IndexerLock
    runner.IndexerRunner      holding the lock, opening and closing the index
    extension.IndexerExtension  a worker's share: take the lock, start the indexer process
    process.IndexerChild      the indexer as a process of its own, started by a worker
    searcher.Searcher         BM25 x PageRank, host diversity, snippets
    rebuild, export           the index from the WARC files alone; _bulk NDJSON out
"""
