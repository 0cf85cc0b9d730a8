"""Real link graphs as simulated webs.

Readers (format chosen from the file name and first lines, or `format=`):

* ``edges``: ``from<TAB>to`` or space separated, ``#``/``%`` comments,
  optionally gzipped (LAW/SNAP style, e.g. cnr-2000.edges.tsv.gz).  Nodes get
  synthetic hosts: consecutive ids share a host (LAW ids follow crawl order,
  which clusters hosts).
* ``dat``: hollins.dat: ``N M`` then N lines ``id url`` then M lines ``from to``.
* ``kleinberg``: lines ``n id url`` / ``e from to``; the EPA graph keeps them in
  two files (``*.nodes*`` and ``*.edges*``), found from either name.
* ``gml``: polblogs.gml: node ``label``s are URLs without the scheme.
* ``tsaparas``: ``nodes`` (blocks: ``id (id) [R]`` / url / title / counts) and
  ``adj_list`` (``id: succ ... -1``) in one directory; titles are kept.
* ``hostgraph``: UK web 1996 ``1996|src_host|dst_host<TAB>count``: one page
  ``/`` per host.

In URL graphs the real hosts are the simulated hosts and paths are kept.  URLs
are stored as Scrapy will request them (w3lib's safe_url_string, lower-case
host, '/' for an empty path, no fragment); malformed URLs (not http, bad or
suffix-less host name) are skipped with their edges, and URLs that become
equal are merged into one node; both are counted in ``web.load_stats``.
"""

from __future__ import annotations

import bisect
import gzip
import operator
import os
import re
from array import array
from collections import Counter
from itertools import islice
from typing import Any, Iterable, NamedTuple

from .model import BINARY_TYPES, K_BINARY, K_OK, SimWeb, split_url

GRAPH_DEFAULTS: dict[str, Any] = {
    "format": None,             # None = detect
    "edges_path": None,         # second file of two-file formats; None = sibling
    "seed": 1,
    "hosts": None,              # synthetic hosts for plain edge lists ...
    "nodes_per_host": 1000,     # ... or this many consecutive ids per host
    "page_bytes": 10000,
    "binary_bytes": 4096,
    "crawl_delay_fraction": 0.0,
    "crawl_delay": 0.5,
    "latency_ms": 0,
    "change_rate": 0.0,
    "change_period": 60.0,
    "base_rate": 0.05,
}


class GraphData(NamedTuple):
    n: int
    offsets: array           # CSR, len n+1
    targets: array
    urls: list[str] | None   # None: synthetic hosts
    titles: list[str] | None
    stats: dict[str, int]


def _open(path: str):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _lines(path: str) -> Iterable[str]:
    """Text lines; UTF-8, or Latin-1 for lines that are not (old crawls mix them)."""
    with _open(path) as f:
        for raw in f:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("latin-1")
            yield line.rstrip("\r\n")


# ---------------------------------------------------------------------------
# CSR building
# ---------------------------------------------------------------------------
def _csr(n: int, src: array, dst: array) -> tuple[array, array]:
    """Offsets/targets from parallel arrays, keeping each node's link order.
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


def _read_edge_list(path: str) -> GraphData:
    """Fast path: whole 4 MB chunks are split and int-converted in C."""
    src, dst = array("i"), array("i")
    tail = b""
    cols = None
    with _open(path) as f:
        while True:
            block = f.read(1 << 22)
            chunk = tail + block
            if block:
                cut = chunk.rfind(b"\n") + 1
                tail, chunk = chunk[cut:], chunk[:cut]
            if b"#" in chunk or b"%" in chunk:
                chunk = b"\n".join(line for line in chunk.split(b"\n")
                                   if not line.lstrip().startswith((b"#", b"%")))
            if cols is None:
                first = next((ln for ln in chunk.split(b"\n", 50) if ln.strip()), None)
                if first is not None:
                    cols = len(first.split())
            if cols == 2:
                nums = array("i", map(int, chunk.split()))
                if len(nums) % 2:
                    raise ValueError(f"{path}: odd number of ids in a block")
                src.extend(nums[0::2])
                dst.extend(nums[1::2])
            elif cols:
                for line in chunk.split(b"\n"):  # weighted lists: first two columns
                    p = line.split()
                    if len(p) >= 2:
                        src.append(int(p[0]))
                        dst.append(int(p[1]))
            if not block:
                break
    n = max(max(src, default=-1), max(dst, default=-1)) + 1
    offsets, dst = _csr(n, src, dst)
    return GraphData(n, offsets, dst, None, None, {"edges": len(dst)})


# ---------------------------------------------------------------------------
# URL graphs
# ---------------------------------------------------------------------------
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
# URLs made only of these (and well-formed %XX escapes) pass safe_url_string unchanged.
_SAFE = re.compile(r"(?:[A-Za-z0-9\-._~!$&()*+,;=:@/?]|%[0-9A-Fa-f]{2})*(?<!\?)\Z")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}\Z")
_tld = None


def _has_suffix(host: str) -> bool:
    """Whether host ends in a public suffix (tldextract's bundled list, no
    network); falls back to 'last label is alphabetic' without tldextract."""
    global _tld
    if _tld is None:
        try:
            import tldextract  # noqa: PLC0415

            _tld = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
        except Exception:  # pragma: no cover - tldextract is a project dependency
            _tld = False
    if _tld:
        return bool(_tld(host).suffix)
    return host.rsplit(".", 1)[-1].isalpha()


def clean_url(raw: str) -> str | None:
    """The URL Scrapy would request for raw, or None if malformed."""
    from w3lib.url import safe_url_string  # noqa: PLC0415

    raw = raw.strip()
    if "://" not in raw:
        return None
    try:
        host, path = split_url(raw)
    except ValueError:
        return None
    hostname, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    if not _IPV4.match(hostname):
        labels = hostname.split(".")
        if len(labels) < 2 or not all(_LABEL.match(lb) for lb in labels) or not _has_suffix(hostname):
            return None
    url = f"http://{host}{path}"
    if not _SAFE.match(url):  # fast path: already what safe_url_string returns
        host, path = split_url(safe_url_string(url))
        url = f"http://{host}{path}"
    return url


def _url_graph(raw_urls: dict[int, str], raw_edges: Iterable[tuple[int, int]],
               titles: dict[int, str] | None = None) -> GraphData:
    """Clean, merge duplicates, renumber densely in the file's id order."""
    stats = Counter()
    new_id: dict[int, int] = {}
    by_url: dict[str, int] = {}
    urls: list[str] = []
    tl: list[str] = []
    for old in sorted(raw_urls):
        u = clean_url(raw_urls[old])
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
            tl.append(titles.get(old, ""))
    src, dst = array("i"), array("i")
    for a, b in raw_edges:
        x, y = new_id.get(a), new_id.get(b)
        if x is None or y is None:
            stats["dropped_edges"] += 1
            continue
        src.append(x)
        dst.append(y)
    stats["edges"] = len(dst)
    offsets, dst = _csr(len(urls), src, dst)
    return GraphData(len(urls), offsets, dst, urls, tl if titles is not None else None, dict(stats))


def _read_dat(path: str) -> GraphData:
    it = iter(_lines(path))
    n, m = (int(x) for x in next(it).split()[:2])
    urls = {}
    for line in islice(it, n):
        i, _, u = line.strip().partition(" ")
        urls[int(i)] = u.strip()
    edges = [tuple(map(int, ln.split()[:2])) for ln in it if ln.strip()]
    return _url_graph(urls, edges)


def _read_kleinberg(path: str, edges_path: str | None) -> GraphData:
    files = [path]
    if edges_path is None and "nodes" in os.path.basename(path):
        edges_path = os.path.join(os.path.dirname(path), os.path.basename(path).replace("nodes", "edges"))
    if edges_path:
        files.append(edges_path)
    urls, edges = {}, []
    for fp in files:
        for line in _lines(fp):
            p = line.split()
            if len(p) >= 3 and p[0] == "n":
                urls[int(p[1])] = p[2]
            elif len(p) >= 3 and p[0] == "e":
                edges.append((int(p[1]), int(p[2])))
    return _url_graph(urls, edges)


def _read_gml(path: str) -> GraphData:
    text = "\n".join(_lines(path))
    urls, edges = {}, []
    for block in re.finditer(r"\b(node|edge)\s*\[(.*?)\]", text, re.S):
        body = block[2]
        if block[1] == "node":
            i = re.search(r"\bid\s+(-?\d+)", body)
            lab = re.search(r'\blabel\s+"([^"]*)"', body)
            if i and lab:
                lab_s = lab[1].strip()
                urls[int(i[1])] = lab_s if "://" in lab_s else "http://" + lab_s
        else:
            s = re.search(r"\bsource\s+(-?\d+)", body)
            t = re.search(r"\btarget\s+(-?\d+)", body)
            if s and t:
                edges.append((int(s[1]), int(t[1])))
    return _url_graph(urls, edges)


def _read_tsaparas(path: str) -> GraphData:
    d = path if os.path.isdir(path) else os.path.dirname(path)
    lines = list(_lines(os.path.join(d, "nodes.gz" if os.path.exists(os.path.join(d, "nodes.gz")) else "nodes")))
    head = re.compile(r"(\d+) \(\d+\)")
    urls, titles = {}, {}
    for i, line in enumerate(lines):
        m = head.match(line)
        if m and i + 1 < len(lines):
            urls[int(m[1])] = lines[i + 1].strip()
            nxt = lines[i + 2].strip() if i + 2 < len(lines) else ""
            titles[int(m[1])] = "" if re.fullmatch(r"\d+ \d+", nxt) else nxt
    adj = os.path.join(d, "adj_list.gz" if os.path.exists(os.path.join(d, "adj_list.gz")) else "adj_list")
    edges = []
    for line in _lines(adj):
        a, _, rest = line.partition(":")
        if a.strip().isdigit():
            edges.extend((int(a), int(b)) for b in rest.split() if b != "-1")
    return _url_graph(urls, edges, titles)


def _read_hostgraph(path: str) -> GraphData:
    ids: dict[str, int] = {}
    edges, loops = [], 0
    for line in _lines(path):
        left = line.split("\t", 1)[0].split("|")
        if len(left) < 3:
            continue
        a, b = (ids.setdefault(x.strip().lower(), len(ids)) for x in left[1:3])
        if a == b:
            loops += 1  # intra-host links: no edge between the one-page hosts
        else:
            edges.append((a, b))
    g = _url_graph({i: f"http://{h}/" for h, i in ids.items()}, edges)
    g.stats["self_links"] = loops
    return g


def detect_format(path: str) -> str:
    name = os.path.basename(path.rstrip("/")).lower()
    if os.path.isdir(path) or name.startswith(("nodes", "adj_list")):
        return "tsaparas"
    if ".gml" in name:
        return "gml"
    if ".dat" in name:
        return "dat"
    for line in islice(_lines(path), 20):
        s = line.strip()
        if not s or s[0] in "#%":
            continue
        if s.startswith(("n ", "e ")):
            return "kleinberg"
        if "|" in s:
            return "hostgraph"
    return "edges"


# ---------------------------------------------------------------------------
# The web
# ---------------------------------------------------------------------------
class GraphWeb(SimWeb):
    """A SimWeb over a link graph file.  Every node answers 200: HTML with its
    out-links, or binary bytes when its URL ends in .pdf/.png/.jpg/.gif and it
    has no out-links.  Host-level options (latency, Crawl-delay) apply as in
    generated webs; there are no robots-disallowed paths."""

    kind = "graph"

    def __init__(self, path: str, **options: Any):
        unknown = set(options) - set(GRAPH_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown SimWeb.from_graph options: {sorted(unknown)}")
        o = dict(GRAPH_DEFAULTS, **options)
        self.spec = dict(o, graph=path)
        self.seed = int(o["seed"])
        self._page_bytes = int(o["page_bytes"])
        self._binary_bytes = int(o["binary_bytes"])
        self._change_rate = float(o["change_rate"])
        self._change_period = float(o["change_period"])
        self._base_rate = float(o["base_rate"])
        fmt = o["format"] or detect_format(path)
        readers = {
            "edges": lambda: _read_edge_list(path),
            "dat": lambda: _read_dat(path),
            "kleinberg": lambda: _read_kleinberg(path, o["edges_path"]),
            "gml": lambda: _read_gml(path),
            "tsaparas": lambda: _read_tsaparas(path),
            "hostgraph": lambda: _read_hostgraph(path),
        }
        if fmt not in readers:
            raise ValueError(f"unknown graph format {fmt!r}")
        g = readers[fmt]()
        self.format = fmt
        self.load_stats = g.stats
        self.n_nodes = g.n
        self._csr = (g.offsets, g.targets)
        self._titles = g.titles
        self._urls = g.urls
        if g.urls is None:
            # Synthetic hosts over consecutive id ranges.
            if o["hosts"]:
                per = max(1, -(-g.n // int(o["hosts"])))
            else:
                per = int(o["nodes_per_host"])
            n_hosts = max(1, -(-g.n // per))
            self._host_off = array("q", [min(g.n, h * per) for h in range(n_hosts + 1)])
            width = max(4, len(str(n_hosts)))
            names = [f"h{i + 1:0{width}d}.example" for i in range(n_hosts)]
            self._url_index = None
        else:
            names, hidx = [], {}
            self._node_host = array("i")
            for u in g.urls:
                h = split_url(u)[0]
                if h not in hidx:
                    hidx[h] = len(names)
                    names.append(h)
                self._node_host.append(hidx[h])
            self._url_index = {u: i for i, u in enumerate(g.urls)}
            self._canon_index = None
        self._init_hosts(names, o, disallow=False)

    # ---- structure --------------------------------------------------------
    def host_of(self, node: int) -> int:
        if self._urls is None:
            return bisect.bisect_right(self._host_off, node) - 1
        return self._node_host[node]

    def url(self, node: int) -> str:
        if self._urls is not None:
            return self._urls[node]
        return super().url(node)

    def host_path(self, node: int) -> tuple[str, str]:
        if not 0 <= node < self.n_nodes:
            raise IndexError(node)
        if self._urls is not None:
            host = self.hosts[self._node_host[node]]
            return host, self._urls[node][7 + len(host):]
        h = bisect.bisect_right(self._host_off, node) - 1
        return self.hosts[h], ("/" if node == self._host_off[h] else f"/n{node}.html")

    def _locate(self, h: int, path: str) -> int | None:
        if self._urls is None:
            lo = self._host_off[h]
            if path == "/":
                return lo
            if path.startswith("/n") and path.endswith(".html") and path[2:-5].isdigit():
                node = int(path[2:-5])
                if lo < node < self._host_off[h + 1] and path == f"/n{node}.html":
                    return node
            return None
        url = f"http://{self.hosts[h]}{path}"
        node = self._url_index.get(url)
        if node is None:
            # A crawler may canonicalise (sort query args, re-case escapes):
            # fall back to w3lib's canonical form.
            from w3lib.url import canonicalize_url  # noqa: PLC0415

            if self._canon_index is None:
                self._canon_index = {canonicalize_url(u): i for i, u in enumerate(self._urls)}
            node = self._canon_index.get(canonicalize_url(url))
        return node

    def _kind(self, node: int) -> int:
        if self._urls is not None:
            off = self._csr[0]
            if off[node] == off[node + 1]:
                path = self._urls[node].split("?", 1)[0].lower()
                if path[path.rfind("."):] in BINARY_TYPES:
                    return K_BINARY
        return K_OK

    def _targets(self, node: int) -> array:
        off, dst = self._csr
        return dst[off[node]:off[node + 1]]

    def _redirect_target(self, node: int) -> int:
        raise ValueError("graph webs have no redirects")

    def out_links(self, node: int) -> list[int]:
        return list(self._targets(node))

    def _make_title(self, node: int) -> str:
        if self._titles and self._titles[node]:
            return self._titles[node]
        return super()._make_title(node)

    # ---- queries ----------------------------------------------------------
    def in_degrees(self) -> array:
        deg = array("i", [0]) * self.n_nodes
        for v, c in Counter(self._csr[1]).items():
            deg[v] = c
        return deg

    def seeds(self, k: int = 1) -> list[str]:
        """Greedy coverage: repeatedly the node of highest in-degree (with
        out-links) not yet reachable from the seeds chosen so far."""
        if getattr(self, "_seed_order", None) is None or len(self._seed_order) < k:
            off, dst = self._csr
            indeg = self.in_degrees()
            cands = sorted((v for v in range(self.n_nodes) if off[v + 1] > off[v]),
                           key=lambda v: (-indeg[v], v))
            seen = bytearray(self.n_nodes)
            chosen = []
            for c in cands:
                if len(chosen) >= k:
                    break
                if seen[c]:
                    continue
                chosen.append(c)
                seen[c] = 1
                stack = [c]
                while stack:
                    u = stack.pop()
                    for v in dst[off[u]:off[u + 1]]:
                        if not seen[v]:
                            seen[v] = 1
                            stack.append(v)
            self._seed_order = chosen
        return [self.url(v) for v in self._seed_order[:k]]
