"""Reading a link graph from a file, for the virtual crawler.

Formats, recognised from the first data line (plain or .gz):

edge list    ``src<TAB>dst`` per line, 0-based integer ids (any whitespace);
             ``#`` and ``%`` lines are comments. A ``# nodes: N`` header (the
             LAW files in shared/data/graphs/ have one) fixes the node count,
             so pages without links keep their ids. This is the format of
             cnr-2000.edges.tsv.gz and uk-2007-05-at-100000.edges.tsv.gz.
n/e lines    ``n ID URL`` for a page and ``e SRC DST`` for a link, 0-based
             (Kleinberg's gr0.* files).
hollins      first line ``N M``, then N lines ``ID URL`` and M lines ``SRC DST``,
             1-based ids (hollins.dat).
host pairs   ``YEAR|SRC_HOST|DST_HOST<TAB>COUNT``: a host graph (the UK Web
             Archive's 1996 host links); each host is one page, ``http://HOST/``.

A separate node file of ``n ID URL`` or ``ID URL`` lines (``urls=``) gives URLs
to an edge list; a lone integer line in it (a count) is skipped. With URLs, each
page gets a host id, which the host-first order and cross-host PageRank use.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from crawlproj.errors import CrawlprojError
from crawlproj.ranker.pagerank import build_adjacency
from crawlproj.urls import host_of


class GraphFormatError(CrawlprojError):
    """The graph file is missing or not in a format we read."""


@dataclass
class Graph:
    adjacency: sp.csr_matrix         # row = source page, column = target; entries 1
    urls: list[str] | None = None    # URL per page, when the file has them
    hosts: np.ndarray | None = None  # host id per page (int32), when URLs are known
    host_names: list[str] | None = None
    name: str = ""
    self_loops_dropped: int = 0

    @property
    def n(self) -> int:
        return self.adjacency.shape[0]

    @property
    def m(self) -> int:
        return self.adjacency.nnz

    def successors(self, page: int) -> np.ndarray:
        a = self.adjacency
        return a.indices[a.indptr[page]:a.indptr[page + 1]]


def _open_text(path: str):
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: no such file")
    if os.path.isdir(path):
        raise GraphFormatError(f"{path}: is a directory, not a graph file")
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    raw = gzip.open(path, "rb") if gz else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")


def _host(url: str) -> str:
    """The host a page's URL belongs to: the frontier's politeness key (the
    crawl's URL rule, crawlproj.urls.host_of), so that host-first orders and
    cross-host PageRank group pages as a crawl does. A URL the rule cannot
    parse (graph files hold a few, such as hosts with spaces) is its own host."""
    url = url.strip()
    return host_of(url) or url.lower()


def _hosts(urls: list[str | None]) -> tuple[np.ndarray, list[str]]:
    ids: dict[str, int] = {}
    out = np.empty(len(urls), dtype=np.int32)
    for i, url in enumerate(urls):
        h = _host(url) if url else f"<no url {i}>"
        out[i] = ids.setdefault(h, len(ids))
    return out, list(ids)


_NODES_HEADER = re.compile(r"nodes\s*[:=]\s*(\d+)", re.I)


def _is_int(tok: str) -> bool:
    return tok.isdigit()


def _scan_edge_list(path: str):
    """Line-by-line reading: slow, but names the first bad line. Returns (src, dst, n_header)."""
    src, dst, n_header = [], [], None
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s:
                continue
            if s[0] in "#%":
                m = _NODES_HEADER.search(s)
                if m and n_header is None:
                    n_header = int(m.group(1))
                continue
            parts = s.split()
            if len(parts) != 2 or not (_is_int(parts[0]) and _is_int(parts[1])):
                raise GraphFormatError(
                    f"{path}:{lineno}: expected 'SRC<TAB>DST' (two non-negative integers), "
                    f"got {s[:60]!r}")
            src.append(int(parts[0]))
            dst.append(int(parts[1]))
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), n_header


def _read_edge_list(path: str):
    n_header = None
    with _open_text(path) as fh:
        head = []
        for line in fh:
            s = line.strip()
            if s and s[0] not in "#%":
                break
            head.append(s)
    for s in head:
        m = _NODES_HEADER.search(s)
        if m:
            n_header = int(m.group(1))
            break
    try:
        with _open_text(path) as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": reported below
            arr = np.loadtxt(fh, dtype=np.int64, comments=("#", "%"), ndmin=2)
        if arr.size and (arr.shape[1] != 2 or arr.min() < 0):
            raise ValueError
        src, dst = (arr[:, 0], arr[:, 1]) if arr.size else (np.zeros(0, np.int64),) * 2
    except ValueError:
        # Find and name the offending line (raises GraphFormatError).
        src, dst, n_header = _scan_edge_list(path)
    return src, dst, n_header


def _read_ne(path: str):
    """Kleinberg's ``n ID URL`` / ``e SRC DST`` lines."""
    urls: dict[int, str] = {}
    src, dst = [], []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            parts = s.split(None, 2)
            if parts[0] == "n" and len(parts) == 3 and _is_int(parts[1]):
                urls[int(parts[1])] = parts[2].strip()
            elif parts[0] == "e" and len(parts) == 3 and _is_int(parts[1]) and _is_int(parts[2].strip()):
                src.append(int(parts[1]))
                dst.append(int(parts[2]))
            elif len(parts) == 1 and _is_int(parts[0]) and lineno == 1:
                continue  # a count line at the top
            else:
                raise GraphFormatError(
                    f"{path}:{lineno}: expected 'n ID URL' or 'e SRC DST', got {s[:60]!r}")
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), urls


def _read_hollins(path: str):
    urls: dict[int, str] = {}
    src, dst = [], []
    with _open_text(path) as fh:
        lines = enumerate(fh, 1)
        n_nodes = n_edges = None
        for lineno, line in lines:
            parts = line.split()
            if parts and parts[0][0] not in "#%":
                n_nodes, n_edges = int(parts[0]), int(parts[1])  # checked by _detect
                break
        for lineno, line in lines:
            parts = line.split(None, 1)
            if not parts:
                continue
            if len(urls) < n_nodes:
                if len(parts) != 2 or not _is_int(parts[0]):
                    raise GraphFormatError(f"{path}:{lineno}: expected 'ID URL', got {line.strip()[:60]!r}")
                urls[int(parts[0]) - 1] = parts[1].strip()
            else:
                p = line.split()
                if len(p) != 2 or not (_is_int(p[0]) and _is_int(p[1])) or min(int(p[0]), int(p[1])) < 1:
                    raise GraphFormatError(
                        f"{path}:{lineno}: expected 'SRC DST' (1-based ids), got {line.strip()[:60]!r}")
                src.append(int(p[0]) - 1)
                dst.append(int(p[1]) - 1)
    if len(src) != n_edges:
        raise GraphFormatError(f"{path}: header promises {n_edges} links, file has {len(src)}")
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), urls, n_nodes


def _looks_like_url(tok: str) -> bool:
    return "://" in tok or (("/" in tok or "." in tok) and not tok.replace(".", "").isdigit())


def _read_host_pairs(path: str):
    ids: dict[str, int] = {}
    src, dst = [], []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            f = s.split("\t")[0].split("|")
            if len(f) != 3 or not f[1] or not f[2]:
                raise GraphFormatError(
                    f"{path}:{lineno}: expected 'YEAR|SRC_HOST|DST_HOST<TAB>COUNT', got {s[:60]!r}")
            src.append(ids.setdefault(f[1].lower(), len(ids)))
            dst.append(ids.setdefault(f[2].lower(), len(ids)))
    urls = {i: f"http://{h}/" for h, i in ids.items()}
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), urls


def _detect(path: str) -> str:
    with _open_text(path) as fh:
        first = None
        for line in fh:
            s = line.strip()
            if s and s[0] not in "#%":
                if first is None:
                    first = s.split()
                    if first[0] in ("n", "e"):
                        return "ne"
                    if s.split("\t")[0].count("|") == 2:
                        return "hostpairs"
                    continue
                second = s.split()
                if (len(first) == 2 and all(map(_is_int, first)) and len(second) == 2
                        and _is_int(second[0]) and _looks_like_url(second[1])):
                    return "hollins"
                return "edges"
    return "edges" if first is None or first[0] not in ("n", "e") else "ne"


def read_url_file(path: str) -> dict[int, str]:
    """``n ID URL`` or ``ID URL`` lines (0-based ids)."""
    urls: dict[int, str] = {}
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts or parts[0][0] in "#%":
                continue
            if parts[0] == "n":
                parts = parts[1:]
            if len(parts) == 1 and _is_int(parts[0]) and not urls:
                continue  # a count line at the top
            if len(parts) != 2 or not _is_int(parts[0]):
                raise GraphFormatError(f"{path}:{lineno}: expected '[n] ID URL', got {line.strip()[:60]!r}")
            urls[int(parts[0])] = parts[1]
    return urls


def read_graph(path: str, *, urls: str | None = None, keep_self_loops: bool = False) -> Graph:
    """Read a graph file (format detected) into a deduplicated CSR link graph.

    Self-links are dropped unless ``keep_self_loops``: a page pointing at itself
    is not one of the "links to P" from other pages that IB(P) counts (Cho §2),
    and cnr-2000 has 87,442 of them (SOURCES.md). Repeated links count once.
    """
    kind = _detect(path)
    url_map: dict[int, str] = {}
    n_header = None
    if kind == "ne":
        src, dst, url_map = _read_ne(path)
    elif kind == "hostpairs":
        src, dst, url_map = _read_host_pairs(path)
    elif kind == "hollins":
        src, dst, url_map, n_header = _read_hollins(path)
    else:
        src, dst, n_header = _read_edge_list(path)
    if urls:
        url_map.update(read_url_file(urls))
    n = max(int(src.max(initial=-1)), int(dst.max(initial=-1)), max(url_map, default=-1)) + 1
    if n_header is not None:
        if n > n_header:
            raise GraphFormatError(f"{path}: header says {n_header} nodes but id {n - 1} occurs")
        n = n_header
    if n == 0:
        raise GraphFormatError(f"{path}: no links in the file")
    loops = int((src == dst).sum())
    adj = build_adjacency(src, dst, n, drop_self_loops=not keep_self_loops)
    g = Graph(adj, name=os.path.basename(path),
              self_loops_dropped=0 if keep_self_loops else loops)
    if url_map:
        g.urls = [url_map.get(i) for i in range(n)]
        g.hosts, g.host_names = _hosts(g.urls)
    return g
