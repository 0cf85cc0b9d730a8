"""Export the crawl's link graph as Parquet: an edge list and a URL table.

    OUT/edges.parquet   src int64, dst int64, anchor string, nofollow bool
                        one row per link; nofollow: the crawler did not
                        follow it because it, or its page, said nofollow
    OUT/urls.parquet    id int64, url string, host string, crawled bool,
                        duplicate_of int64 (null unless a copy)
                        (host: the frontier's politeness key, crawlproj.urls.host_of)

Ids are URL fingerprints (crawlproj.due.fingerprint), so they join with the
frontier and page metadata. Every src and dst is in the URL table; crawled
marks the pages whose links are in the edge list; duplicate_of is, for a
page the content-seen test found to repeat another's content (exactly or
nearly, Mercator §3 step 4), the id of that page: its links were not
extracted again, so it has no out-edges of its own and is no dangling page
(a ranker can give it its original's). A page fetched more than
once (a recrawl, or a page re-fetched after a worker died) contributes the
links of its latest fetch only. Multi-edges are kept: a page that links to a
URL twice has two rows (drop_duplicates(["src", "dst"]) for a simple graph).

Loading it:
    pandas    pd.read_parquet("OUT/edges.parquet")
    DuckDB    SELECT * FROM 'OUT/edges.parquet' e JOIN 'OUT/urls.parquet' u ON e.dst = u.id
    networkx  nx.from_pandas_edgelist(edges, "src", "dst", create_using=nx.DiGraph)
    igraph    ig.Graph.DataFrame(edges[["src", "dst"]], directed=True, vertices=urls, use_vids=False)
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from crawlproj.errors import CrawlprojError
from crawlproj.stores.linkstore import (
    EDGE_SCHEMA,
    PAGE_SCHEMA,
    URL_SCHEMA,
    LinkStore,
    pages_table,
    pages_to_tables,
)
from crawlproj.urls import host_of


class GraphExportError(CrawlprojError):
    """A segment file named by the link store cannot be read here."""


def collect(store: LinkStore, chunk_pages: int = 20000) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(edges, urls, pages) of the whole crawl: segments plus the working set."""
    edges, urls, pages = [], [], []
    for p in range(store.keyspace.partitions):
        for seg in store.segments(p):
            files = seg["files"]
            missing = [f for f in files.values() if not os.path.exists(f)]
            if missing:
                raise GraphExportError(
                    f"link segment {missing[0]} (written on host {seg.get('host')}) is not "
                    f"readable here: run export-graph where CRAWL_DATA_DIR holds it, or put "
                    f"the links/ directory on shared storage")
            edges.append(_with_nofollow(pq.read_table(files["edges"])))
            urls.append(pq.read_table(files["urls"]))
            pages.append(_with_duplicates(pq.read_table(files["pages"])))
        batch = []
        for page in store.working_set(p):
            batch.append(page)
            if len(batch) >= chunk_pages:
                e, u = pages_to_tables(batch)
                edges.append(e), urls.append(u), pages.append(pages_table(batch))
                batch = []
        if batch:
            e, u = pages_to_tables(batch)
            edges.append(e), urls.append(u), pages.append(pages_table(batch))
    if not edges:
        e, u = pages_to_tables([])
        return e, u, pages_table([])
    return (pa.concat_tables(edges).cast(EDGE_SCHEMA), pa.concat_tables(urls).cast(URL_SCHEMA),
            pa.concat_tables(pages).cast(PAGE_SCHEMA))


def _with_duplicates(pages: pa.Table) -> pa.Table:
    """A pages table of a segment written before pages carried duplicate_of."""
    if "duplicate_of" in pages.column_names:
        return pages
    return pages.append_column("duplicate_of", pa.nulls(pages.num_rows, pa.int64()))


def _with_nofollow(edges: pa.Table) -> pa.Table:
    """An edges table of a segment written before links carried nofollow marks."""
    if "nofollow" in edges.column_names:
        return edges
    return edges.append_column("nofollow", pa.array([False] * edges.num_rows, pa.bool_()))


def latest_duplicates(pages: pa.Table) -> pa.Table:
    """(id, duplicate_of) of each page as its latest fetch found it."""
    latest = pages.group_by("src").aggregate([("fetch_ms", "max")]) \
        .rename_columns(["src", "fetch_ms"])
    kept = pages.join(latest, keys=["src", "fetch_ms"], join_type="inner")
    kept = kept.group_by("src", use_threads=False).aggregate([("duplicate_of", "max")])
    return kept.rename_columns(["id", "duplicate_of"])


def latest_edges(edges: pa.Table, pages: pa.Table) -> pa.Table:
    """The edges of each page's latest fetch."""
    latest = pages.group_by("src").aggregate([("fetch_ms", "max")]) \
        .rename_columns(["src", "fetch_ms"])
    kept = edges.join(latest, keys=["src", "fetch_ms"], join_type="inner")
    return kept.select(["src", "dst", "anchor", "nofollow"])


def export_graph(store: LinkStore, out: str | os.PathLike) -> dict:
    """Write OUT/edges.parquet and OUT/urls.parquet; returns counts and sizes."""
    out = Path(out)
    edges, urls, pages = collect(store)
    edges = latest_edges(edges, pages)
    urls = urls.group_by("id", use_threads=False).aggregate([("url", "first")]) \
        .rename_columns(["id", "url"])
    crawled = pc.is_in(urls["id"], value_set=pc.unique(pages["src"]))
    hosts = pa.array([host_of(u) for u in urls["url"].to_pylist()], pa.string())
    urls = urls.append_column("host", hosts).append_column("crawled", crawled)
    urls = urls.join(latest_duplicates(pages), keys="id", join_type="left outer")
    urls = urls.sort_by("id")
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("edges", edges), ("urls", urls)):
        tmp = out / f"{name}.parquet.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, out / f"{name}.parquet")
    return {"edges": edges.num_rows, "urls": urls.num_rows,
            "pages": len(pc.unique(pages["src"])) if pages.num_rows else 0,
            "edges_bytes": (out / "edges.parquet").stat().st_size,
            "urls_bytes": (out / "urls.parquet").stat().st_size}
