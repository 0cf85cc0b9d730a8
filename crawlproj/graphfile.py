"""Link-graph files: the one reader behind the virtual crawler (`scrapy
evaluate`, crawlproj.evaluate) and the simulated web (`scrapy simweb serve
--graph`, crawlproj.simweb), so that both see the same pages, links and URLs.

Formats, detected from the file name and first lines (or given as ``format``),
plain or gzipped:

edges      ``SRC DST`` per line, 0-based ids, tab or space separated, ``#`` and
           ``%`` comment lines (LAW/SNAP: cnr-2000.edges.tsv.gz). Extra columns
           (weights) are ignored when every line has them. A ``# nodes: N``
           comment fixes the node count, so pages without links keep their ids.
           No URLs, unless a node file (``urls``) gives them.
dat        hollins.dat: ``N M``, then N lines ``ID URL``, then M lines ``SRC DST``.
kleinberg  ``n ID URL`` and ``e SRC DST`` lines; the EPA graph keeps them in two
           files (``*.nodes*``, ``*.edges*``), the second found from the first's
           name (or given as ``edges_path``).
gml        polblogs.gml: node ``label``s are URLs, without the scheme.
tsaparas   a directory of ``nodes`` (blocks: ``ID (ID) [R]`` / URL / title /
           counts) and ``adj_list`` (``ID: SUCC ... -1``); titles are kept.
hostgraph  ``YEAR|SRC_HOST|DST_HOST<TAB>COUNT``: one page ``http://HOST/`` per
           host (the UK Web Archive's 1996 host links); a host's links to
           itself are not page links and are left out (counted).

A node file (``urls``) of ``n ID URL`` or ``ID URL`` lines (a count line at the
top is skipped) gives URLs to an edge list.

Pages with URLs are the pages a crawler following the links would fetch: the
frontier's URL rule (crawlproj.urls) must admit the URL, it must be written
``http://`` (what the simulated web serves), and it is kept as the rule reads
it (the URL Standard's serialisation: lower-case IDNA host, IPv4 in
dotted-decimal form, no ``:80``, ``/`` for an empty path, no fragment),
without userinfo, in Scrapy's spelling of it (w3lib's safe_url_string, which
Scrapy's Request applies). A URL the rule refuses is left out with its links;
URLs that become equal are one page. Pages are numbered densely in the file's
id order; the counts are in ``stats``.
"""

from __future__ import annotations

import gzip
import operator
import os
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from urllib.parse import urlsplit

from w3lib.url import safe_url_string

from crawlproj.errors import CrawlprojError
from crawlproj.seeds import MAX_URL_LENGTH
from crawlproj.urls import parse_host, refusal, resolve

FORMATS = ("edges", "dat", "kleinberg", "gml", "tsaparas", "hostgraph")


class GraphFormatError(CrawlprojError):
    """The graph file is missing or not in a format we read."""


@dataclass
class LinkGraph:
    """A graph file's pages and links: CSR arrays in the file's link order (a
    page's repeated links and links to itself included), the pages' URLs when
    the file has them."""

    name: str
    format: str
    offsets: array               # 'q', n + 1 entries: page v's links are targets[offsets[v]:offsets[v + 1]]
    targets: array               # 'i'
    urls: list[str] | None       # None: the file has no URLs
    titles: list[str] | None = None
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


def page_url(raw: str) -> str | None:
    """The URL a crawler fetches for a URL written in a graph file, or None if
    the frontier's URL rule refuses it (or it is not http://)."""
    raw = raw.strip()
    if raw[:7].lower() != "http://" or refusal(raw, MAX_URL_LENGTH) is not None:
        return None
    parts = urlsplit(safe_url_string(resolve(raw)))
    query = "?" + parts.query if parts.query else ""
    return f"http://{parts.netloc.rpartition('@')[2]}{parts.path}{query}"


# ---------------------------------------------------------------------------
# Files and lines
# ---------------------------------------------------------------------------
def _open(path: str):
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: no such file")
    if os.path.isdir(path):
        raise GraphFormatError(f"{path}: is a directory, not a graph file")
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _lines(path: str) -> Iterator[str]:
    """Text lines; UTF-8, or Latin-1 for lines that are not (old crawls mix them)."""
    with _open(path) as f:
        for raw in f:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("latin-1")
            yield line.rstrip("\r\n")


def _data_lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, stripped line) of the lines that are neither blank nor comments."""
    for lineno, line in enumerate(_lines(path), 1):
        s = line.strip()
        if s and s[0] not in "#%":
            yield lineno, s


def _bad(path: str, lineno: int, expected: str, line: str) -> GraphFormatError:
    return GraphFormatError(f"{path}:{lineno}: expected {expected}, got {line.strip()[:60]!r}")


_INT32 = 2 ** 31


def _id(tok: str) -> int | None:
    """A page id: a non-negative integer that fits the 4-byte arrays."""
    return int(tok) if tok.isdigit() and int(tok) < _INT32 else None


def _csr(n: int, src: array, dst: array) -> tuple[array, array]:
    """Offsets/targets from parallel arrays, keeping each page's link order.
    Sorted input (LAW files) costs one counting pass."""
    counts = Counter(src)
    offsets = array("q", [0]) * (n + 1)
    acc = 0
    for v in range(n):
        acc += counts.get(v, 0)
        offsets[v + 1] = acc
    if len(src) > 1 and not all(map(operator.le, src, islice(src, 1, None))):
        order = sorted(range(len(src)), key=src.__getitem__)  # stable
        dst = array("i", map(dst.__getitem__, order))
    return offsets, dst


# ---------------------------------------------------------------------------
# Edge lists
# ---------------------------------------------------------------------------
_NODES_HEADER = re.compile(rb"nodes\s*[:=]\s*(\d+)", re.I)
_EDGE = "'SRC DST' (two non-negative integers)"


def _scan_edges(path: str) -> tuple[array, array, int | None]:
    """Line by line: slower than _read_edges, and names the first bad line."""
    src, dst, n_header, cols = array("i"), array("i"), None, None
    with _open(path) as f:
        for lineno, raw in enumerate(f, 1):
            s = raw.strip()
            if not s:
                continue
            if s[:1] in (b"#", b"%"):
                m = _NODES_HEADER.search(s)
                if m and n_header is None:
                    n_header = int(m.group(1))
                continue
            parts = s.decode("utf-8", "replace").split()
            cols = cols or len(parts)
            a, b = (_id(parts[0]), _id(parts[1])) if len(parts) >= 2 else (None, None)
            if len(parts) != cols or a is None or b is None:
                what = _EDGE if cols <= 2 else f"{cols} columns, the first two non-negative integers"
                raise _bad(path, lineno, what, s.decode("utf-8", "replace"))
            src.append(a)
            dst.append(b)
    return src, dst, n_header


_DIGITS = b"0123456789"


def _two_columns(chunk: bytes, tokens: int) -> bool:
    """Whether every line of chunk is two non-negative integers with one tab or
    space between them (the LAW and SNAP layout): with the digits taken out
    each line is that one separator, and there are two fields per line."""
    rest = chunk.translate(None, _DIGITS).replace(b"\r\n", b"\n")
    lines = rest.count(b"\n")
    return tokens == 2 * lines and rest[:2] in (b"\t\n", b" \n") and rest == rest[:2] * lines


def _read_edges(path: str) -> tuple[array, array, int | None]:
    """Whole 4 MB blocks of two-column rows are int-converted in C; a file
    laid out otherwise (blank lines, wider gaps, weight columns, a bad field)
    is read by _scan_edges, which reads extra columns and names a bad line."""
    src, dst, n_header = array("i"), array("i"), None
    tail = b""
    with _open(path) as f:
        while True:
            block = f.read(1 << 22)
            chunk = tail + block
            if block:
                cut = chunk.rfind(b"\n") + 1
                tail, chunk = chunk[cut:], chunk[:cut]
            elif chunk and not chunk.endswith(b"\n"):
                chunk += b"\n"
            if b"#" in chunk or b"%" in chunk:
                rows = []
                for line in chunk.split(b"\n"):
                    if line.lstrip()[:1] in (b"#", b"%"):
                        m = _NODES_HEADER.search(line)
                        if m and n_header is None:
                            n_header = int(m.group(1))
                    else:
                        rows.append(line)
                chunk = b"\n".join(rows)
            tokens = chunk.split()
            if tokens and not _two_columns(chunk, len(tokens)):
                return _scan_edges(path)
            try:
                ids = array("i", map(int, tokens))
            except OverflowError:
                return _scan_edges(path)
            del tokens  # before the next block's are made: a million objects
            src.extend(ids[0::2])
            dst.extend(ids[1::2])
            if not block:
                break
    return src, dst, n_header


# ---------------------------------------------------------------------------
# Formats with URLs: each reader returns (urls by file id, src, dst, titles)
# ---------------------------------------------------------------------------
def _read_dat(path: str):
    lines = _data_lines(path)
    lineno, head = next(lines, (1, ""))
    nm = head.split()
    if len(nm) != 2 or not all(t.isdigit() for t in nm):
        raise _bad(path, lineno, "'N M' (page and link counts)", head)
    n, m = int(nm[0]), int(nm[1])
    urls: dict[int, str] = {}
    src, dst = array("i"), array("i")
    for lineno, s in lines:
        if len(urls) < n:
            p = s.split(None, 1)
            if len(p) != 2 or _id(p[0]) is None:
                raise _bad(path, lineno, "'ID URL'", s)
            urls[int(p[0])] = p[1].strip()
            continue
        p = s.split()
        a, b = (_id(p[0]), _id(p[1])) if len(p) == 2 else (None, None)
        if a is None or b is None:
            raise _bad(path, lineno, _EDGE, s)
        src.append(a)
        dst.append(b)
    if len(src) != m:
        raise GraphFormatError(f"{path}: header promises {m} links, file has {len(src)}")
    return urls, src, dst, None


def _read_kleinberg(path: str, edges_path: str | None):
    files = [path]
    name = os.path.basename(path)
    if edges_path is None and "nodes" in name:
        edges_path = os.path.join(os.path.dirname(path), name.replace("nodes", "edges"))
    if edges_path:
        files.append(edges_path)
    urls: dict[int, str] = {}
    src, dst = array("i"), array("i")
    for fp in files:
        for k, (lineno, s) in enumerate(_data_lines(fp)):
            p = s.split(None, 2)
            if p[0] == "n" and len(p) == 3 and _id(p[1]) is not None:
                urls[int(p[1])] = p[2].strip()
            elif p[0] == "e" and len(p) == 3 and _id(p[1]) is not None and _id(p[2]) is not None:
                src.append(int(p[1]))
                dst.append(int(p[2]))
            elif k == 0 and len(p) == 1 and p[0].isdigit():
                continue  # a count line at the top
            else:
                raise _bad(fp, lineno, "'n ID URL' or 'e SRC DST'", s)
    return urls, src, dst, None


def _read_gml(path: str):
    text = "\n".join(_lines(path))
    urls: dict[int, str] = {}
    src, dst = array("i"), array("i")
    for block in re.finditer(r"\b(node|edge)\s*\[(.*?)\]", text, re.S):
        body = block[2]
        if block[1] == "node":
            i = re.search(r"\bid\s+(\d+)", body)
            label = re.search(r'\blabel\s+"([^"]*)"', body)
            if i and label:
                u = label[1].strip()
                urls[int(i[1])] = u if "://" in u else "http://" + u
        else:
            s = re.search(r"\bsource\s+(\d+)", body)
            t = re.search(r"\btarget\s+(\d+)", body)
            if s and t:
                src.append(int(s[1]))
                dst.append(int(t[1]))
    if not urls:
        raise GraphFormatError(f"{path}: no 'node [ id N label \"URL\" ]' blocks")
    return urls, src, dst, None


def _read_tsaparas(path: str):
    d = path if os.path.isdir(path) else os.path.dirname(path)

    def member(name: str) -> str:
        gz = os.path.join(d, name + ".gz")
        return gz if os.path.exists(gz) else os.path.join(d, name)

    lines = list(_lines(member("nodes")))
    head = re.compile(r"(\d+) \(\d+\)")
    urls: dict[int, str] = {}
    titles: dict[int, str] = {}
    for i, line in enumerate(lines):
        m = head.match(line)
        if m and i + 1 < len(lines):
            urls[int(m[1])] = lines[i + 1].strip()
            nxt = lines[i + 2].strip() if i + 2 < len(lines) else ""
            titles[int(m[1])] = "" if re.fullmatch(r"\d+ \d+", nxt) else nxt
    src, dst = array("i"), array("i")
    for line in _lines(member("adj_list")):
        a, _, rest = line.partition(":")
        if a.strip().isdigit():
            for b in rest.split():
                if b != "-1":
                    src.append(int(a))
                    dst.append(int(b))
    return urls, src, dst, titles


def _read_hostgraph(path: str):
    ids: dict[str, int] = {}
    src, dst = array("i"), array("i")
    loops = 0
    for lineno, s in _data_lines(path):
        f = s.split("\t", 1)[0].split("|")
        if len(f) != 3 or not f[1].strip() or not f[2].strip():
            raise _bad(path, lineno, "'YEAR|SRC_HOST|DST_HOST<TAB>COUNT'", s)
        a, b = (ids.setdefault(h.strip().lower(), len(ids)) for h in f[1:])
        if a == b:
            loops += 1
        else:
            src.append(a)
            dst.append(b)
    # A name the host rule rejects is no host ("www\\pac.ac.uk" would be the
    # page /pac.ac.uk/ of host www): no URL, so no page (counted as skipped).
    return {i: f"http://{h}/" if parse_host(h) is not None else "" for h, i in ids.items()}, \
        src, dst, None, loops


def read_url_file(path: str) -> dict[int, str]:
    """``n ID URL`` or ``ID URL`` lines (0-based ids); a count line at the top is skipped."""
    urls: dict[int, str] = {}
    for k, (lineno, s) in enumerate(_data_lines(path)):
        parts = s.split()
        if parts[0] == "n":
            parts = parts[1:]
        if k == 0 and len(parts) == 1 and parts[0].isdigit():
            continue
        if len(parts) != 2 or _id(parts[0]) is None:
            raise _bad(path, lineno, "'[n] ID URL'", s)
        urls[int(parts[0])] = parts[1]
    return urls


# ---------------------------------------------------------------------------
# Detection and assembly
# ---------------------------------------------------------------------------
def _looks_like_url(tok: str) -> bool:
    return "://" in tok or (("/" in tok or "." in tok) and not tok.replace(".", "").isdigit())


def detect_format(path: str) -> str:
    name = os.path.basename(path.rstrip("/")).lower()
    if os.path.isdir(path) or name.startswith(("nodes", "adj_list")):
        return "tsaparas"
    if ".gml" in name:
        return "gml"
    if ".dat" in name:
        return "dat"
    head = [s.split() for _, s in islice(_data_lines(path), 20)]
    if any(p[0] in ("n", "e") for p in head):
        return "kleinberg"  # after a count line, maybe
    if head and head[0][0].count("|") == 2:
        return "hostgraph"
    if (len(head) >= 2 and len(head[0]) == 2 and all(t.isdigit() for t in head[0])
            and len(head[1]) == 2 and head[1][0].isdigit() and _looks_like_url(head[1][1])):
        return "dat"
    return "edges"


def _url_graph(raw_urls: dict[int, str], src: Iterable[int], dst: Iterable[int],
               titles: dict[int, str] | None, stats: Counter):
    """Each file id to its page (None: URL refused); pages in file id order."""
    new_id: dict[int, int] = {}
    by_url: dict[str, int] = {}
    urls: list[str] = []
    kept_titles: list[str] = []
    for old in sorted(raw_urls):
        u = page_url(raw_urls[old])
        if u is None:
            stats["skipped_urls"] += 1
            continue
        if u in by_url:
            stats["merged_urls"] += 1
            new_id[old] = by_url[u]
            continue
        by_url[u] = new_id[old] = len(urls)
        urls.append(u)
        if titles is not None:
            kept_titles.append(titles.get(old, ""))
    s2, d2 = array("i"), array("i")
    for a, b in zip(src, dst):
        x, y = new_id.get(a), new_id.get(b)
        if x is None or y is None:
            stats["dropped_edges"] += 1
            continue
        s2.append(x)
        d2.append(y)
    return urls, s2, d2, (kept_titles if titles is not None else None)


def read(path: str, *, format: str | None = None, edges_path: str | None = None,
         urls: str | None = None) -> LinkGraph:
    """Read a graph file (format detected unless given); ``urls`` names a node
    file giving an edge list's URLs."""
    if not os.path.exists(path):
        raise GraphFormatError(f"{path}: no such file")
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise GraphFormatError(f"unknown graph format {fmt!r} (one of {', '.join(FORMATS)})")
    stats: Counter = Counter()
    n_header = None
    raw_urls: dict[int, str] | None = None
    titles = None
    if fmt == "edges":
        src, dst, n_header = _read_edges(path)
    elif fmt == "dat":
        raw_urls, src, dst, titles = _read_dat(path)
    elif fmt == "kleinberg":
        raw_urls, src, dst, titles = _read_kleinberg(path, edges_path)
    elif fmt == "gml":
        raw_urls, src, dst, titles = _read_gml(path)
    elif fmt == "tsaparas":
        raw_urls, src, dst, titles = _read_tsaparas(path)
    else:
        raw_urls, src, dst, titles, stats["self_links"] = _read_hostgraph(path)
    if urls:
        raw_urls = {**(raw_urls or {}), **read_url_file(urls)}
    if raw_urls is not None:
        page_urls, src, dst, titles = _url_graph(raw_urls, src, dst, titles, stats)
        n = len(page_urls)
    else:
        page_urls = None
        n = max(max(src, default=-1), max(dst, default=-1)) + 1
        if n_header is not None:
            if n > n_header:
                raise GraphFormatError(f"{path}: header says {n_header} nodes but id {n - 1} occurs")
            n = n_header
    if n == 0:
        raise GraphFormatError(f"{path}: no links in the file")
    stats["edges"] = len(dst)
    offsets, targets = _csr(n, src, dst)
    return LinkGraph(os.path.basename(path.rstrip("/")), fmt, offsets, targets, page_urls,
                     titles, {k: v for k, v in stats.items() if v or k == "edges"})
