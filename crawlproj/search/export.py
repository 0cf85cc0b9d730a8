"""The indexed documents as bulk-load files for a search server.

`ndjson`: the _bulk format of OpenSearch and Elasticsearch, an action line
({"index": {"_index": NAME, "_id": KEY}}) and the document on the next,
for `curl -XPOST localhost:9200/_bulk -H 'Content-Type: application/x-ndjson'
--data-binary @FILE`. `solr`: the same documents as one JSON array with an
`id` field, what Solr's /update handler takes (`curl
'localhost:8983/solr/CORE/update?commit=true' -H 'Content-Type:
application/json' --data-binary @FILE`). Fields: url, host, title, text,
anchors, fetched_at (ISO 8601, UTC), pagerank.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import tantivy

from crawlproj.search.index import PageIndex


def records(index: PageIndex, chunk: int = 1000):
    """(key, fields) of every indexed document."""
    searcher = index.searcher()
    total = searcher.num_docs
    query = tantivy.Query.all_query()
    for offset in range(0, total, chunk):
        hits = searcher.search(query, chunk, count=False, order_by_field=None, offset=offset).hits
        docs = [searcher.doc(addr) for _, addr in hits]
        for d in docs:
            key = d["key"][0]
            yield key, {
                "url": d["url"][0], "host": d["host"][0],
                "title": d["title"][0] if d["title"] else "",
                "text": d["text"][0] if d["text"] else "",
                "anchors": index.anchors.anchor_text(key),
                "fetched_at": datetime.fromtimestamp(d["fetched_at"][0], timezone.utc).isoformat(),
                "pagerank": index.anchors.pagerank_of(key),
            }


def export(index: PageIndex, out, fmt: str = "ndjson", name: str = "crawl") -> int:
    n = 0
    if fmt == "ndjson":
        for key, doc in records(index):
            out.write(json.dumps({"index": {"_index": name, "_id": key}}, ensure_ascii=False) + "\n")
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
            n += 1
    elif fmt == "solr":
        out.write("[\n")
        for key, doc in records(index):
            out.write((",\n" if n else "") + json.dumps({"id": key, **doc}, ensure_ascii=False))
            n += 1
        out.write("\n]\n")
    else:
        raise ValueError(f"unknown export format {fmt!r} (ndjson or solr)")
    return n
