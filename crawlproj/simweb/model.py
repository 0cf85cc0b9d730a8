"""The simulated web: hosts, pages, links, and what every URL answers.

A ``SimWeb`` is a pure function of its *spec* (a JSON-able dict): the test
process and the server process each build it from the same spec and agree on
every byte.  Nothing is drawn from a shared random stream; each fact about a
page (its status, links, text) is hashed from ``(seed, node, salt)``, so pages
can be produced lazily, in any order, in any process.  This is Cho et al.'s
"virtual crawler" idea (1998, §5): replay a known web so that crawl orderings
and politeness can be measured exactly.

Two kinds of web share this interface:

* ``GeneratedWeb`` (``SimWeb.generate``): synthetic hosts ``h0001.example`` ...
  with Zipf page counts, mostly-local links and heavy-tailed in-degree.
* ``GraphWeb`` (``SimWeb.from_graph``): a real link graph read from a file by
  crawlproj.graphfile (the virtual crawler's reader too), on synthetic hosts or
  on the file's own URLs.

Node ids are the HTML-ish pages (including pages answering 500 or a redirect);
404 targets and generated binary resources are URLs without node ids.
"""

from __future__ import annotations

import bisect
import email.utils
import html
import json
import math
import random
import re
import time
import zlib
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

from crawlproj import graphfile
from crawlproj.simweb.responses import HTML, TEXT, Response
from crawlproj.simweb.traps import TrapHosts, trap_names

from .change import ChangeClock, ChangeProcess

__all__ = ["SimWeb", "GeneratedWeb", "GraphWeb", "Response", "from_spec", "GENERATE_DEFAULTS",
           "GENERATE_HELP", "GRAPH_DEFAULTS"]

# --------------------------------------------------------------------------
# Deterministic hashing.  Python's hash() is salted per process, so it cannot
# be used; this is the SplitMix64 finaliser folded over the parts.
# --------------------------------------------------------------------------
_M64 = (1 << 64) - 1


def _mix(*parts: int) -> int:
    x = 0x9E3779B97F4A7C15
    for p in parts:
        x = ((x ^ (p & _M64)) * 0xBF58476D1CE4E5B9) & _M64
        x ^= x >> 31
        x = (x * 0x94D049BB133111EB) & _M64
        x ^= x >> 29
    return x


def _unit(*parts: int) -> float:
    """A float in [0, 1) hashed from the parts."""
    return _mix(*parts) / 18446744073709551616.0


# Salts: one per independent fact, so that e.g. a page's status does not
# correlate with its links.
S_SIZES, S_STATUS, S_PRIVATE, S_REDIR, S_LINKS, S_RENDER, S_TITLE = range(1, 8)
S_ROBOTS, S_DELAY, S_LATENCY, S_CHANGE, S_PHASE, S_TEXT, S_BINARY = range(8, 15)
S_RATE, S_GAP, S_ETAG, S_LM, S_RELINK = range(15, 20)
S_TOPIC, S_TOPIC_LINK, S_TOPIC_TEXT, S_AROUND = range(20, 24)
S_SITEMAP = 24
S_BUSY = 25
# Where a host with a sitemap (the generate option ``sitemaps``) keeps it.
SITEMAP_PATH = "/sitemap.xml"

# --------------------------------------------------------------------------
# Words: a fixed pronounceable vocabulary (same for every seed) for titles,
# anchor texts and padding text.
# --------------------------------------------------------------------------
_CONS = "bdfgklmnprstvz"
_VOW = "aeiou"


def _make_words(n: int = 4096) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    i = 0
    while len(words) < n:
        x = _mix(i, 0x5157)
        i += 1
        syllables = 2 + (x & 1)
        w = "".join(
            _CONS[(x >> (8 * j + 1)) % 14] + _VOW[(x >> (8 * j + 5)) % 5]
            for j in range(syllables)
        )
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


WORDS = _make_words()
# Padding text: ~100 KB of words, doubled so that any slice of up to its
# length can be taken without wrapping logic.
_CORPUS = " ".join(WORDS[_mix(i, 0xC0DE) % len(WORDS)] for i in range(16000))
_CORPUS2 = _CORPUS + " " + _CORPUS


# Topic vocabularies (the ``topics`` option): words of four syllables, which
# the general vocabulary (two or three) never has, so a topic's words occur
# on pages of that topic, in anchors pointing to them and in the text around
# those anchors, and nowhere else.  Topic t owns words [t*V, (t+1)*V).
TOPIC_VOCABULARY = 40
MAX_TOPICS = 256
_topic_words: list[str] = []


def topic_words(t: int) -> list[str]:
    """The vocabulary of topic t, most frequent word first (its name)."""
    need = (t + 1) * TOPIC_VOCABULARY
    i = len(_topic_words)
    seen = set(_topic_words)
    while len(_topic_words) < need:
        x = _mix(i, 0x70C1C)
        i += 1
        w = "".join(_CONS[(x >> (8 * j + 1)) % 14] + _VOW[(x >> (8 * j + 5)) % 5]
                    for j in range(4))
        if w not in seen:
            seen.add(w)
            _topic_words.append(w)
    return _topic_words[t * TOPIC_VOCABULARY:need]


# Word r of a topic is drawn with weight 1/(r+1) (Zipf, as words of a real
# topic are): the name is in about one topical word of four.
_TOPIC_CUM = [sum(1.0 / (r + 1) for r in range(k + 1)) for k in range(TOPIC_VOCABULARY)]


def _topic_word(t: int, key: int) -> str:
    u = (key / 18446744073709551616.0) * _TOPIC_CUM[-1]
    return topic_words(t)[bisect.bisect_left(_TOPIC_CUM, u, 0, TOPIC_VOCABULARY - 1)]


def _text(key: int, n: int) -> str:
    """n characters of deterministic filler text chosen by key (O(n) slice)."""
    out = []
    while n > 0:
        take = min(n, len(_CORPUS))
        off = key % len(_CORPUS)
        out.append(_CORPUS2[off : off + take])
        n -= take
        key = _mix(key)
    return "".join(out)


def words_for(key: int, n: int = 2) -> str:
    """n vocabulary words hashed from key, space separated."""
    return " ".join(WORDS[_mix(key, i) % len(WORDS)] for i in range(n))


# --------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------
BINARY_TYPES = {
    ".png": "image/png",
    ".pdf": "application/pdf",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
}
_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "application/pdf": b"%PDF-1.4\n",
    "image/jpeg": b"\xff\xd8\xff\xe0",
    "image/gif": b"GIF89a",
}
REASONS = {
    200: "OK", 304: "Not Modified", 301: "Moved Permanently", 302: "Found", 400: "Bad Request",
    404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
    503: "Service Unavailable",
}

# Page kinds (what a node answers).
K_OK, K_PRIVATE, K_500, K_REDIRECT, K_BINARY = range(5)
# What a host sends as Last-Modified on a web with a change process: the
# version's change time, the time of the request (a dynamic page), or nothing.
LM_TRUE, LM_NOW, LM_NONE = range(3)
LM_MODES = ("true", "now", "none")


def with_clock(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with change_epoch fixed (to the current second) when it has a
    change process and no epoch yet: every process that builds the web from
    the returned spec then agrees on the clock."""
    if spec.get("change_dist") and not spec.get("change_epoch"):
        spec = dict(spec, change_epoch=float(math.floor(time.time())))
    return spec


def split_url(url: str) -> tuple[str, str]:
    """'http://Host:80/p?q#f' -> ('host', '/p?q').  Only http:// is simulated."""
    if url[:7].lower() != "http://":
        if url.startswith("//"):
            url = "http:" + url
        else:
            raise ValueError(f"not an http:// URL: {url!r}")
    rest = url[7:]
    cut = len(rest)
    for ch in "/?#":
        i = rest.find(ch)
        if 0 <= i < cut:
            cut = i
    netloc, path = rest[:cut], rest[cut:]
    path = path.split("#", 1)[0]
    if not path.startswith("/"):
        path = "/" + path
    return norm_host(netloc), path


def norm_host(netloc: str) -> str:
    """Host key: lower case, no userinfo, no default port."""
    netloc = netloc.rsplit("@", 1)[-1].lower()
    if netloc.endswith(":80"):
        netloc = netloc[:-3]
    return netloc.rstrip(":")  # 'host:' has an empty port


def _relative(src_dir: str, tpath: str) -> str | None:
    """A relative href from directory src_dir (ends with '/') to tpath, or
    None when the path has segments that would make it ambiguous."""
    path, q, query = tpath.partition("?")
    tparts = path.split("/")[1:]
    tdirs, tname = tparts[:-1], tparts[-1]
    if "" in tdirs or "." in tparts or ".." in tparts:
        return None
    sdirs = src_dir.split("/")[1:-1]
    common = 0
    while common < min(len(sdirs), len(tdirs)) and sdirs[common] == tdirs[common]:
        common += 1
    rest = "/".join(tdirs[common:] + [tname])
    href = "../" * (len(sdirs) - common) + rest
    if not href or ":" in rest.split("/", 1)[0]:
        # './' for the directory itself; './a:b' so 'a:' is not read as a scheme.
        href = "./" + href
    return href + q + query


# --------------------------------------------------------------------------
# The common part of both kinds of web.
# --------------------------------------------------------------------------
class SimWeb:
    """A simulated web.  Build one with ``SimWeb.generate``,
    ``SimWeb.from_graph`` or ``SimWeb.from_spec``."""

    kind = "abstract"
    _topics = 0  # GeneratedWeb's topics option
    _escape = True  # whether titles/URLs may need HTML escaping
    traps = None  # a TrapHosts: trap hosts beside the web's own (simweb/traps.py)
    #: the JSON-able dict that rebuilds this web with ``SimWeb.from_spec``
    spec: dict[str, Any]
    #: host names, index = host id
    hosts: list[str]

    # ---- construction -----------------------------------------------------
    @staticmethod
    def generate(seed: int = 1, hosts: int = 300, pages: int = 3000, **options: Any) -> GeneratedWeb:
        """A synthetic web; see GENERATE_DEFAULTS for the options."""
        return GeneratedWeb(dict(GENERATE_DEFAULTS, seed=seed, hosts=hosts, pages=pages, **options))

    @staticmethod
    def from_graph(path: str, **options: Any) -> SimWeb:
        """A web over the link graph in a file; see GRAPH_DEFAULTS."""
        return GraphWeb(path, **options)

    @staticmethod
    def from_spec(spec: dict[str, Any] | str) -> SimWeb:
        """Spec: a dict (or JSON text) of generate() options, or with a
        'graph' key holding the graph file path plus from_graph() options."""
        if isinstance(spec, str):
            spec = json.loads(spec)
        spec = dict(spec)
        if "graph" in spec:
            return SimWeb.from_graph(spec.pop("graph"), **spec)
        return SimWeb.generate(**spec)

    def _init_hosts(self, names: list[str], o: dict[str, Any], disallow: bool) -> None:
        """Host-level facts: latency, robots.txt, Crawl-delay."""
        self.hosts = names
        self.host_index = {h: i for i, h in enumerate(names)}
        seed = self.seed
        lat = o["latency_ms"]
        lo, hi = (lat, lat) if isinstance(lat, (int, float)) else (lat[0], lat[1])
        n = len(names)
        self._latency = array("d", (
            (lo + (hi - lo) * _unit(seed, h, S_LATENCY)) / 1000.0 for h in range(n)))
        cdf, cd = o["crawl_delay_fraction"], float(o["crawl_delay"])
        self._delay = array("d", (cd if _unit(seed, h, S_DELAY) < cdf else 0.0 for h in range(n)))
        rf = o.get("robots_fraction", 0.0) if disallow else 0.0
        self._disallow = bytearray(1 if _unit(seed, h, S_ROBOTS) < rf else 0 for h in range(n))
        sf = float(o.get("sitemaps", 0.0))
        self._sitemap = bytearray(1 if _unit(seed, h, S_SITEMAP) < sf else 0 for h in range(n))
        bf = float(o.get("busy_fraction", 0.0))
        self._busy_requests = int(o.get("busy_requests", 0)) if bf > 0 else 0
        self._busy = bytearray(1 if _unit(seed, h, S_BUSY) < bf else 0 for h in range(n))
        self._robots_cache: dict[int, bytes | None] = {}
        self._title_cache: dict[int, str] = {}

    # ---- change processes (change_dist; see change.py) -------------------------
    _change: ChangeProcess | None = None
    _change_links = 0.0

    def _init_change(self, o: dict[str, Any]) -> None:
        self._change_links = float(o.get("change_links", 0.0))
        if not 0 <= self._change_links <= 1:
            raise ValueError("change_links must be in [0, 1]")
        if not o["change_dist"]:
            if self._change_links:
                raise ValueError("change_links needs change_dist")
            return
        if self._change_rate:
            raise ValueError("change_rate (periodic versions) and change_dist (change processes) "
                             "are two models of change: give one")
        self.clock = ChangeClock(o["change_epoch"], o["day_seconds"], o["http_clock"])
        self._change = ChangeProcess(self.seed, o["change_dist"], float(o["change_workweek"]),
                                     _unit, _mix, S_RATE, S_GAP)
        frac = float(o["lm_untrusted"])
        self._lm_mode = bytearray(
            (LM_NOW if _mix(self.seed, h, S_LM, 1) & 1 else LM_NONE)
            if _unit(self.seed, h, S_LM) < frac else LM_TRUE
            for h in range(len(self.hosts)))

    @property
    def changing(self) -> bool:
        """Whether pages follow change processes (the spec has change_dist)."""
        return self._change is not None

    def is_html(self, node: int) -> bool:
        """Whether a node answers 200 with an HTML page (the pages that have
        versions)."""
        return self._kind(node) in (K_OK, K_PRIVATE)

    def true_rate(self, node: int) -> float:
        """Mean changes per simulated day of a page (0 when it never changes:
        no change process, or not an HTML page)."""
        if self._change is None or self._kind(node) not in (K_OK, K_PRIVATE):
            return 0.0
        return self._change.rate(node)

    def changed(self, node: int, v: int) -> float:
        """Simulated day at which version v of a page began (T_v; T_0 <= 0 is
        the last change before day 0); inf for a version that never comes."""
        if self.true_rate(node) <= 0:
            return math.inf if v else (self._change.changed(node, 0) if self._change else -math.inf)
        return self._change.changed(node, v)

    def change_times(self, node: int, start: float, end: float) -> list[float]:
        """Simulated days in (start, end] at which a page changed."""
        if self.true_rate(node) <= 0:
            return []
        ts = self._change.times(node, end)
        return list(ts[bisect.bisect_right(ts, start):bisect.bisect_right(ts, end)])

    def lm_mode(self, host: str) -> str:
        """What a host sends as Last-Modified: 'true' (the version's change
        time), 'now' (the time of the request) or 'none'."""
        if self._change is None:
            return "none"
        return LM_MODES[self._lm_mode[self.host_index[norm_host(host)]]]

    def etag(self, node: int, v: int) -> str:
        """Strong ETag of version v of a page."""
        return f'"{v:x}-{_mix(self.seed, node, S_ETAG, v) & 0xFFFFFFFF:08x}"'

    def _targets_at(self, node: int, v: int) -> list[int | str] | array:
        """Link targets of version v of a page."""
        if v and self._change_links:
            return self._relink(node, v)
        return self._targets(node)

    def _relink(self, node: int, v: int) -> list[int | str]:
        raise NotImplementedError

    # ---- per-node interface, implemented by subclasses ------------------------
    n_nodes: int

    def host_path(self, node: int) -> tuple[str, str]:
        """(host, path) of a node's URL; path includes any query."""
        raise NotImplementedError

    def url(self, node: int) -> str:
        host, path = self.host_path(node)
        return f"http://{host}{path}"

    def node_of(self, url: str) -> int | None:
        """The node id a URL names (fragment ignored), or None."""
        try:
            host, path = split_url(url)
        except ValueError:
            return None
        h = self.host_index.get(host)
        return None if h is None else self._locate(h, path)

    def _locate(self, h: int, path: str) -> int | None:
        raise NotImplementedError

    def host_of(self, node: int) -> int:
        raise NotImplementedError

    def _kind(self, node: int) -> int:
        raise NotImplementedError

    def _targets(self, node: int) -> list[int | str] | array:
        """Link targets of a page in page order: node ids, or absolute URL
        strings for targets that are not nodes (404s, resources)."""
        raise NotImplementedError

    def _redirect_target(self, node: int) -> int:
        raise NotImplementedError

    def title(self, node: int) -> str:
        """Page title; also the anchor text of every link to the page."""
        t = self._title_cache.get(node)
        if t is None:
            if len(self._title_cache) > 100_000:  # bound memory on big graphs
                self._title_cache.clear()
            t = self._title_cache[node] = self._make_title(node)
        return t

    def _make_title(self, node: int) -> str:
        return words_for(_mix(self.seed, node, S_TITLE))

    def _extra_response(self, h: int, path: str) -> Response | None:
        """URLs of a host that are not nodes (generated binary resources)."""
        return None

    # ---- host queries ---------------------------------------------------
    def host_id(self, host: str) -> int | None:
        """The host a request names, as its server takes it: a fully
        qualified name (``host.``) is the same server as ``host``."""
        key = norm_host(host)
        h = self.host_index.get(key)
        if h is None and key.endswith("."):
            h = self.host_index.get(key[:-1])
        return h

    def latency(self, host: str) -> float:
        """Seconds the server waits before answering any request to host
        (0 for unknown hosts)."""
        h = self.host_id(host)
        return 0.0 if h is None else self._latency[h]

    def crawl_delay(self, host: str) -> float | None:
        """The Crawl-delay in the host's robots.txt (seconds), or None."""
        h = self.host_id(host)
        return None if h is None else (self._delay[h] or None)

    def busy(self, host: str) -> int:
        """How many of its first page requests the host answers with 503
        Service Unavailable (no Retry-After): 0 for most (the options
        busy_fraction, busy_requests). The server counts them (server.py)."""
        h = self.host_id(host)
        return self._busy_requests if h is not None and self._busy[h] else 0

    def robots_txt(self, host: str) -> str | None:
        """The host's robots.txt text, or None when it answers 404."""
        b = self._robots(self.host_id(host))
        return None if b is None else b.decode()

    def _robots(self, h: int) -> bytes | None:
        if h not in self._robots_cache:
            lines = []
            if self._disallow[h]:
                # A group for another agent first: a parser must pick '*'.
                lines += ["User-agent: examplebot", "Disallow: /", ""]
            if self._disallow[h] or self._delay[h]:
                lines.append("User-agent: *")
                if self._disallow[h]:
                    lines.append("Disallow: /private/")
                if self._delay[h]:
                    lines.append(f"Crawl-delay: {self._delay[h]:g}")
            if self._sitemap[h]:
                lines += ["", f"Sitemap: http://{self.hosts[h]}{SITEMAP_PATH}"]
            self._robots_cache[h] = ("\n".join(lines) + "\n").encode() if lines else None
        return self._robots_cache[h]

    def is_disallowed(self, url: str) -> bool:
        """Whether robots.txt forbids url to a crawler ('*' group)."""
        host, path = split_url(url)
        h = self.host_index.get(host)
        return bool(h is not None and self._disallow[h] and path.startswith("/private/"))

    # ---- page queries -------------------------------------------------------
    def status(self, node: int) -> int:
        k = self._kind(node)
        if k == K_500:
            return 500
        if k == K_REDIRECT:
            return 301 if _mix(self.seed, node, S_REDIR, 1) & 1 else 302
        return 200

    def redirect_target(self, node: int) -> str | None:
        """Absolute Location of a redirecting page, else None."""
        return self.url(self._redirect_target(node)) if self._kind(node) == K_REDIRECT else None

    def links(self, node: int, t: float | None = None) -> list[tuple[str, str]]:
        """(absolute URL, anchor text) of every link of a page in page order,
        without fragments, without mailto:/javascript: links.  On a web with
        change_links, the links of the version served at wall-clock time t
        (now when None); otherwise t does not matter."""
        if self._kind(node) not in (K_OK, K_PRIVATE):
            return []
        targets = (self._targets_at(node, self.version(node, t)) if self._change_links
                   else self._targets(node))
        return [(x if isinstance(x, str) else self.url(x), self._anchor(x)) for x in targets]

    def out_links(self, node: int) -> list[int]:
        """Node ids a page links to (or redirects to), with repetitions."""
        k = self._kind(node)
        if k == K_REDIRECT:
            return [self._redirect_target(node)]
        if k in (K_OK, K_PRIVATE):
            return [t for t in self._targets(node) if not isinstance(t, str)]
        return []

    def edges(self) -> tuple[array, array]:
        """The node graph in CSR form: out-links of node v are
        targets[offsets[v]:offsets[v+1]] (redirects count as one link;
        links to 404s and binary resources are left out)."""
        if getattr(self, "_csr", None) is None:
            offsets, targets = array("q", [0]), array("i")
            for v in range(self.n_nodes):
                targets.extend(self.out_links(v))
                offsets.append(len(targets))
            self._csr = (offsets, targets)
        return self._csr

    def version(self, node: int, t: float | None = None) -> int:
        """Content version of a page at wall-clock time t (0 for pages that
        never change).  Changing pages get a new version every change_period
        seconds, at a per-page phase so that they do not all change at once.
        With change_dist: the number of changes of the page's change process
        between simulated day 0 and t."""
        if self._change is not None:
            if self._kind(node) not in (K_OK, K_PRIVATE):
                return 0
            return self._change.version(node, self.clock.day(time.time() if t is None else t))
        if not self._change_rate or _unit(self.seed, node, S_CHANGE) >= self._change_rate:
            return 0
        t = time.time() if t is None else t
        p = self._change_period
        return int(math.floor((t + p * _unit(self.seed, node, S_PHASE)) / p))

    def _expires(self, node: int, v: int) -> float:
        if self._change is not None:
            return self.clock.wall(self._change.next_change(node, v))
        if not self._change_rate or _unit(self.seed, node, S_CHANGE) >= self._change_rate:
            return math.inf
        p = self._change_period
        return (v + 1) * p - p * _unit(self.seed, node, S_PHASE)

    def _anchor(self, t: int | str) -> str:
        if not isinstance(t, str):
            return self.title(t)
        ext = t[t.rfind("."):]
        word = WORDS[zlib.crc32(t.encode()) % len(WORDS)]
        if ext in BINARY_TYPES:
            return ("image " if BINARY_TYPES[ext].startswith("image") else "document ") + word
        return "old " + word

    def render(self, node: int, t: float | None = None) -> bytes:
        """The HTML of page `node` at time t: its version changes the text,
        and with change_links some links."""
        v = self.version(node, t)
        seed = self.seed
        host, path = self.host_path(node)
        # Rendering choices (href forms, fragments, junk links) come from their
        # own stream so they never change the link list itself.
        rng = random.Random(_mix(seed, node, S_RENDER))
        rnd = rng.random
        base = ""
        src_dir = path.split("?", 1)[0]
        src_dir = src_dir[: src_dir.rfind("/") + 1]
        if self._base_rate and path != "/" and rnd() < self._base_rate:
            # <base href> re-anchors relative links at the root: a crawler that
            # ignores it resolves them against the page's directory, and 404s.
            base = f'<base href="http://{host}/">'
            src_dir = "/"
        # Generated webs only produce URL-safe hrefs and vocabulary anchors,
        # so escaping (a third of render's time) is only needed for graphs.
        esc = html.escape if self._escape else str
        title = esc(self.title(node))
        items = []
        for tgt in self._targets_at(node, v):
            if isinstance(tgt, str):
                turl = tgt
                thost, tpath = split_url(turl)
            else:
                thost, tpath = self.host_path(tgt)
                turl = f"http://{thost}{tpath}"
            r = rnd()
            if thost == host:
                href = None
                if r < 0.35:
                    href = _relative(src_dir, tpath)
                if href is None:
                    # root-relative unless it would read as protocol-relative
                    href = tpath if (r < 0.7 and not tpath.startswith("//")) else turl
            else:
                href = turl if r < 0.9 else turl[5:]  # '//host/path' 1 in 10
            if rnd() < 0.1:
                href += "#" + WORDS[int(rnd() * len(WORDS))]
            around = "" if not self._topics or isinstance(tgt, str) else " " + self._around(node, tgt)
            items.append(f'<li><a href="{esc(href)}">{esc(self._anchor(tgt))}</a>{around}</li>')
        # Links a crawler must drop.
        if rnd() < 0.3:
            items.insert(int(rnd() * (len(items) + 1)),
                         f'<li><a href="mailto:webmaster@{host}">Write to us</a></li>')
        if rnd() < 0.2:
            items.insert(int(rnd() * (len(items) + 1)),
                         '<li><a href="javascript:void(0)">Menu</a></li>')
        intro = (" ".join(self._topic_text(node)) if self._topics
                 else _text(_mix(seed, node, S_TEXT, v), 300))
        head = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>{base}</head>\n'
                f"<body>\n<h1>{title}</h1>\n<p>{intro}</p>\n<ul>\n" + "\n".join(items) + "\n</ul>\n")
        tail = "</body></html>\n"
        pad = self._page_bytes - len(head.encode()) - len(tail) - 8
        if pad > 0:
            head += "<p>" + _text(_mix(seed, node, S_TEXT, v, 1), pad) + "</p>\n"
        return (head + tail).encode()

    def _binary(self, ctype: str, key: int) -> bytes:
        magic = _MAGIC.get(ctype, b"")
        body = random.Random(_mix(self.seed, key, S_BINARY)).randbytes(max(0, self._binary_bytes - len(magic)))
        if ctype == "application/pdf":
            body = body[:-7] + b"\n%%EOF\n"
        return magic + body

    def respond(self, host: str, path: str, t: float | None = None) -> Response:
        """What the simulated host answers to GET path (path includes the
        query; no fragment).  The server wraps this in HTTP."""
        h = self.host_id(host)
        if h is None:
            trap = self.traps.respond(norm_host(host), path) if self.traps else None
            if trap is not None:
                return trap
            return Response(502, TEXT, f"simweb: unknown host {host}\n".encode())
        if path == "/robots.txt":
            body = self._robots(h)
            if body is None:
                return Response(404, TEXT, b"no robots.txt\n")
            return Response(200, TEXT, body)
        if path == SITEMAP_PATH and self._sitemap[h]:
            return self._sitemap_response(h, time.time() if t is None else t)
        node = self._locate(h, path)
        if node is None:
            extra = self._extra_response(h, path)
            if extra is not None:
                return extra
            return Response(404, HTML, b"<html><head><title>404 Not Found</title></head>"
                                       b"<body><h1>Not Found</h1></body></html>\n")
        kind = self._kind(node)
        if kind == K_500:
            return Response(500, HTML, b"<html><body><h1>Internal Server Error</h1></body></html>\n")
        if kind == K_REDIRECT:
            loc = self.url(self._redirect_target(node))
            body = f'<html><body><a href="{html.escape(loc)}">moved</a></body></html>\n'.encode()
            return Response(self.status(node), HTML, body, location=loc)
        if kind == K_BINARY:
            ext = path[path.rfind("."):].lower()
            ctype = BINARY_TYPES[ext]
            return Response(200, ctype, self._binary(ctype, node))
        t = time.time() if t is None else t
        v = self.version(node, t)
        if self._change is None:
            return Response(200, HTML, self.render(node, t), expires=self._expires(node, v))
        mode = self._lm_mode[h]
        lm = (None if mode == LM_NONE else
              math.floor(self.clock.date_seconds(self.clock.day(t) if mode == LM_NOW
                                                 else self._change.changed(node, v))))
        return Response(200, HTML, self.render(node, t), expires=self._expires(node, v),
                        version=v, etag=self.etag(node, v), last_modified=lm)

    def has_sitemap(self, host: str) -> bool:
        """Whether a host's robots.txt names a sitemap (the option ``sitemaps``)."""
        h = self.host_id(host)
        return h is not None and bool(self._sitemap[h])

    def _host_nodes(self, h: int) -> range:
        raise NotImplementedError

    def _sitemap_response(self, h: int, t: float) -> Response:
        """The host's sitemap (sitemaps.org): its pages that answer 200 with
        HTML, each with its current version's change time as <lastmod> on a
        web with change processes. Made anew for every request, with the
        Date a lastmod is read against (its cache would keep an old Date)."""
        host = self.hosts[h]
        entries = []
        for node in self._host_nodes(h):
            if self._kind(node) != K_OK:
                continue
            entry = f"<url><loc>http://{host}{self.host_path(node)[1]}</loc>"
            if self._change is not None:
                changed = self.clock.date_seconds(self.changed(node, self.version(node, t)))
                entry += f"<lastmod>{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(math.floor(changed)))}</lastmod>"
            entries.append(entry + "</url>")
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                + "\n".join(entries) + "\n</urlset>\n").encode()
        date = self.clock.date_text(self.clock.day(t)) if self._change is not None \
            else email.utils.formatdate(t, usegmt=True)
        return Response(200, "application/xml", body, expires=0.0, headers=(("Date", date),))

    # ---- crawl-level queries -------------------------------------------------
    def seeds(self, k: int = 1) -> list[str]:
        raise NotImplementedError

    def trap_seeds(self) -> list[str]:
        """The roots of the trap hosts (the generate option ``traps``)."""
        return self.traps.seeds() if self.traps else []

    def reachable(self, seeds: Iterable[str | int], obey_robots: bool = True,
                  max_depth: int | None = None, skip_extensions: Iterable[str] = ()) -> set[str]:
        """URLs a crawler requests when it starts at `seeds` and follows every
        link and redirect: pages (including ones answering 500 or redirecting),
        redirect targets, 404 targets and binary resources.  Not robots.txt.
        With obey_robots, robots-disallowed URLs are neither requested nor
        followed (also when a redirect points to them).  max_depth mimics
        Scrapy's DEPTH_LIMIT (seeds are depth 0; a redirect keeps the depth).
        skip_extensions (e.g. ('.png', '.pdf')) drops link targets ending so,
        like a LinkExtractor's deny_extensions."""
        skip = tuple(e.lower() for e in skip_extensions)
        seen: set[int | str] = set()
        frontier: list[int | str] = []

        def admit(item: int | str, as_link: bool) -> None:
            if item in seen:
                return
            u = item if isinstance(item, str) else None
            if as_link and skip:
                u = u or self.url(item)  # type: ignore[arg-type]
                if u.split("?", 1)[0].lower().endswith(skip):
                    return
            if obey_robots:
                if isinstance(item, str):
                    if self.is_disallowed(item):
                        return
                elif self._kind(item) == K_PRIVATE:
                    return
            seen.add(item)
            frontier.append(item)

        for s in seeds:
            if isinstance(s, str):
                n = self.node_of(s)
                admit(s if n is None else n, False)
            else:
                admit(s, False)
        depth = 0
        while frontier:
            level, frontier = frontier, []
            i = 0
            while i < len(level):  # redirects append to the current level
                item = level[i]
                i += 1
                if isinstance(item, str):
                    continue
                kind = self._kind(item)
                if kind == K_REDIRECT:
                    before = len(frontier)
                    admit(self._redirect_target(item), False)
                    level.extend(frontier[before:])
                    del frontier[before:]
                elif kind in (K_OK, K_PRIVATE) and (max_depth is None or depth < max_depth):
                    for tgt in self._targets(item):
                        admit(tgt, True)
            depth += 1
        return {s if isinstance(s, str) else self.url(s) for s in seen}

    def stats(self) -> dict[str, Any]:
        """Summary numbers (walks every page once)."""
        kinds = Counter(self._kind(v) for v in range(self.n_nodes))
        offsets, _ = self.edges()
        return {
            "kind": self.kind,
            "hosts": len(self.hosts),
            "pages": self.n_nodes,
            "links_between_pages": offsets[-1],
            "status_500": kinds[K_500],
            "redirects": kinds[K_REDIRECT],
            "robots_disallow_hosts": sum(self._disallow),
            "disallowed_pages": kinds[K_PRIVATE],
            "crawl_delay_hosts": sum(1 for d in self._delay if d),
            "binary_pages": kinds[K_BINARY],
        }


def from_spec(spec: dict[str, Any] | str) -> SimWeb:
    return SimWeb.from_spec(spec)


# --------------------------------------------------------------------------
# The synthetic web.
# --------------------------------------------------------------------------
# name, default, help (the scrapy simweb command builds its flags from this)
_GENERATE_OPTIONS: list[tuple[str, Any, str]] = [
    ("seed", 1, "everything is hashed from it"),
    ("hosts", 300, "number of hosts h0001.example ..."),
    ("pages", 3000, "total pages over all hosts (>= hosts)"),
    ("host_zipf", 1.0, "host page counts ~ 1/rank^host_zipf"),
    ("links", 16, "mean links per page (uniform in [0.5, 1.5] x links)"),
    ("local_links", 0.85, "fraction of random links that stay on the host"),
    ("target_zipf", 1.0, "in-host target choice ~ 1/(k+1)^target_zipf"),
    ("fanout", 8, "each host's pages form a tree of this fan-out from '/'"),
    ("page_bytes", 10000, "HTML padded to about this many bytes"),
    ("binary_bytes", 4096, "size of .png/.pdf resources"),
    ("robots_fraction", 0.2, "hosts whose robots.txt disallows /private/"),
    ("private_fraction", 0.1, "of the leaf pages on those hosts, under /private/"),
    ("sitemaps", 0.0, "hosts whose robots.txt names a /sitemap.xml of their HTML pages "
                      "(with <lastmod> on a web with change processes)"),
    ("crawl_delay_fraction", 0.05, "hosts whose robots.txt has a Crawl-delay"),
    ("crawl_delay", 0.5, "that Crawl-delay, seconds"),
    ("busy_fraction", 0.0, "hosts that answer 503 Service Unavailable to their first "
                           "busy_requests page requests"),
    ("busy_requests", 2, "with busy_fraction: how many"),
    ("latency_ms", 0, "per-host response delay: a number, or [lo, hi] drawn per host"),
    ("p404", 0.01, "fraction of links that point to missing pages"),
    ("p500", 0.005, "fraction of pages that answer 500"),
    ("p_redirect", 0.01, "fraction of pages that answer 301/302"),
    ("p_binary", 0.02, "fraction of links to .png/.pdf resources"),
    ("change_rate", 0.0, "fraction of pages whose text changes over time"),
    ("change_period", 60.0, "seconds between versions of a changing page"),
    ("change_dist", "", "change processes: per-page rates per simulated day, fixed:R, "
                        "loguniform:LO:HI or gamma:SHAPE:SCALE (empty = none)"),
    ("day_seconds", 10.0, "with change_dist: wall-clock seconds per simulated day"),
    ("change_epoch", 0.0, "with change_dist: Unix time of simulated day 0 (0 = when built)"),
    ("change_workweek", 0.0, "with change_dist: share of changes in weekday working hours "
                             "(05-17 Mon-Fri simulated); 0 = homogeneous Poisson"),
    ("change_links", 0.0, "with change_dist: share of a page's random links redrawn per version"),
    ("lm_untrusted", 0.0, "with change_dist: share of hosts whose Last-Modified is the "
                          "request time (half of them) or absent (the other half)"),
    ("http_clock", "simulated", "with change_dist: what Date and Last-Modified count, the "
                                "simulated calendar (from 2001) or the machine's clock (wall)"),
    ("base_rate", 0.05, 'fraction of pages with <base href="http://host/">'),
    ("traps", "", "trap hosts <name>.trap.example beside the others: 'all' or names "
                  "(crawlproj/simweb/traps.py)"),
    ("topics", 0, "topical web: hosts and pages get one of this many topics, each with its "
                  "own vocabulary for titles, text and anchors (0 = none)"),
    ("topic_host", 0.8, "with topics: share of a host's pages on the host's topic"),
    ("topic_locality", 0.8, "with topics: share of a page's random links that go to a page "
                            "of its own topic"),
]
GENERATE_DEFAULTS: dict[str, Any] = {n: d for n, d, _ in _GENERATE_OPTIONS}
GENERATE_HELP: dict[str, str] = {n: h for n, _, h in _GENERATE_OPTIONS}

_PAGE_RE = re.compile(r"/(s\d|private)/p(\d+)\.html\Z")
_RES_RE = re.compile(r"/(img|doc)/(\d+)\.(png|pdf)\Z")


class GeneratedWeb(SimWeb):
    """Synthetic hosts h0001.example...; see GENERATE_DEFAULTS.

    Node ids are consecutive per host: host h holds nodes off[h]..off[h+1]-1,
    its local page k=0 is '/'.  Within a host the pages form a tree of fan-out
    `fanout` (page k links to pages fanout*k+1 .. fanout*k+fanout), and every
    root links to the next host's root (a ring) and to a few other roots, so
    that every page is reachable from any root.  Only leaves of the tree may
    answer 500, redirect or be robots-disallowed, which keeps that true for a
    polite crawler."""

    kind = "generated"
    _escape = False

    def __init__(self, options: dict[str, Any]):
        unknown = set(options) - set(GENERATE_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown SimWeb.generate options: {sorted(unknown)}")
        o = with_clock(dict(GENERATE_DEFAULTS, **options))
        if isinstance(o["latency_ms"], tuple):
            o["latency_ms"] = list(o["latency_ms"])
        self.spec = o
        self.seed = seed = int(o["seed"])
        H, N = int(o["hosts"]), int(o["pages"])
        if H < 1 or N < H:
            raise ValueError("need 1 <= hosts <= pages")
        self._page_bytes = int(o["page_bytes"])
        self._binary_bytes = int(o["binary_bytes"])
        self._change_rate = float(o["change_rate"])
        self._change_period = float(o["change_period"])
        self._base_rate = float(o["base_rate"])
        self.traps = TrapHosts(trap_names(o["traps"])) if o["traps"] else None
        self._b = max(2, int(o["fanout"]))
        self._links = float(o["links"])
        self._local = float(o["local_links"])
        self._p404, self._pbin = float(o["p404"]), float(o["p_binary"])
        # Statuses are drawn among tree leaves (~(b-1)/b of the pages), so
        # scale to hit the requested fraction of all pages.
        scale = self._b / (self._b - 1)
        self._p500 = float(o["p500"]) * scale
        self._predir = float(o["p_redirect"]) * scale
        self._pprivate = float(o["private_fraction"]) * scale

        # Host sizes: each host 1 page, the rest shared ~ Zipf by rank; ranks
        # are dealt to hosts by a seeded shuffle, so h0001 need not be biggest.
        w = [1.0 / (r + 1) ** float(o["host_zipf"]) for r in range(H)]
        W = sum(w)
        extra = N - H
        sizes = [1 + int(extra * x / W) for x in w]
        for r in range(N - sum(sizes)):
            sizes[r % H] += 1
        order = sorted(range(H), key=lambda h: _mix(seed, h, S_SIZES))
        self._size = array("i", [0] * H)
        for rank, h in enumerate(order):
            self._size[h] = sizes[rank]
        self._off = array("q", [0])
        for s in self._size:
            self._off.append(self._off[-1] + s)
        self.n_nodes = N
        width = max(4, len(str(H)))
        self._init_hosts([f"h{i + 1:0{width}d}.example" for i in range(H)], o, disallow=True)
        self._init_change(o)
        # Cumulative weights: host choice for cross-host links ~ host size
        # (preferential attachment to big sites) and in-host page choice
        # ~ Zipf in k (the root and top pages get most links).  Together the
        # in-degree is heavy-tailed.
        self._host_cum = list(self._off[1:])
        a = float(o["target_zipf"])
        acc, self._zipf_cum = 0.0, []
        for k in range(max(self._size)):
            acc += 1.0 / (k + 1) ** a
            self._zipf_cum.append(acc)
        self._by_size = sorted(range(H), key=lambda h: (-self._size[h], h))
        self._init_topics(o)

    # ---- topics (the ``topics`` option) ------------------------------------
    def _init_topics(self, o: dict[str, Any]) -> None:
        """Each host has a topic; each of its pages has the host's topic with
        probability topic_host (always the root), else a topic of its own.
        The topic of a page chooses the words of its title and text and, with
        probability topic_locality, the targets of its random links: the
        topical locality Cho et al. observed (§7: "if a page has a high IS(P)
        value, then its children are likely to have a higher IS(P) value
        too").  Without topics nothing here draws a number, so the web is the
        same as without the option."""
        T = int(o["topics"])
        if not 0 <= T <= MAX_TOPICS:
            raise ValueError(f"topics must be in [0, {MAX_TOPICS}]")
        self._topic_host = float(o["topic_host"])
        self._locality = float(o["topic_locality"])
        if not (0 <= self._topic_host <= 1 and 0 <= self._locality <= 1):
            raise ValueError("topic_host and topic_locality must be in [0, 1]")
        self._topics = T
        if not T:
            return
        seed = self.seed
        host_topic = [_mix(seed, h, S_TOPIC) % T for h in range(len(self.hosts))]
        self._topic = array("H", [0] * self.n_nodes)
        for h, t in enumerate(host_topic):
            off = self._off[h]
            for node in range(off, off + self._size[h]):
                own = node == off or _unit(seed, node, S_TOPIC) < self._topic_host
                self._topic[node] = t if own else _mix(seed, node, S_TOPIC, 1) % T
        self._topic_nodes: list[array] = [array("i") for _ in range(T)]
        for node, t in enumerate(self._topic):
            self._topic_nodes[t].append(node)

    def topic(self, node: int) -> int | None:
        """The topic of a page, or None on a web without topics."""
        return self._topic[node] if self._topics else None

    @staticmethod
    def topic_query(t: int) -> str:
        """A one-word query for topic t: its most frequent word."""
        return topic_words(t)[0]

    def hot_pages(self, query: str) -> set[int]:
        """The hot pages of a query on a topical web: the pages answering 200
        to a polite crawler whose title or own text (not the anchors of their
        links) holds every word of the query; Cho's IS(P) with a threshold of
        one occurrence (§7 used the title, or 10 in the body).  For a topic's
        query these are the pages of that topic."""
        if not self._topics:
            raise ValueError("hot_pages needs a web with topics")
        terms = set(query.lower().split())
        return {node for node in range(self.n_nodes) if self._kind(node) == K_OK
                and terms <= set(self.title(node).split() + self._topic_text(node))}

    def _topic_text(self, node: int) -> list[str]:
        """The page's own words: half drawn from its topic, half general."""
        t, out = self._topic[node], []
        for i in range(80):
            key = _mix(self.seed, node, S_TOPIC_TEXT, i)
            out.append(_topic_word(t, _mix(key)) if key & 1 else WORDS[(key >> 1) % len(WORDS)])
        return out

    def _around(self, node: int, target: int) -> str:
        """Words after a link to a page, from the target's topic: the text
        around an anchor that describes where it leads."""
        t = self._topic[target]
        return " ".join(_topic_word(t, _mix(self.seed, node, S_AROUND, target, j)) for j in range(3))

    def _make_title(self, node: int) -> str:
        if not self._topics:
            return super()._make_title(node)
        t, key = self._topic[node], _mix(self.seed, node, S_TITLE)
        return f"{_topic_word(t, _mix(key, 1))} {_topic_word(t, _mix(key, 2))} {WORDS[key % len(WORDS)]}"

    # ---- structure ------------------------------------------------------
    def host_of(self, node: int) -> int:
        return bisect.bisect_right(self._off, node) - 1

    def _kind(self, node: int) -> int:
        h = bisect.bisect_right(self._off, node) - 1
        k = node - self._off[h]
        if k == 0 or self._b * k + 1 < self._size[h]:
            return K_OK  # inner tree node: must stay crawlable
        u = _unit(self.seed, node, S_STATUS)
        if u < self._p500:
            return K_500
        if u < self._p500 + self._predir:
            return K_REDIRECT
        if self._disallow[h] and _unit(self.seed, node, S_PRIVATE) < self._pprivate:
            return K_PRIVATE
        return K_OK

    def _path(self, node: int, h: int, k: int) -> str:
        if k == 0:
            return "/"
        if self._kind(node) == K_PRIVATE:
            return f"/private/p{k}.html"
        return f"/s{k % 5}/p{k}.html"

    def host_path(self, node: int) -> tuple[str, str]:
        if not 0 <= node < self.n_nodes:
            raise IndexError(node)
        h = bisect.bisect_right(self._off, node) - 1
        return self.hosts[h], self._path(node, h, node - self._off[h])

    def _host_nodes(self, h: int) -> range:
        return range(self._off[h], self._off[h + 1])

    def _locate(self, h: int, path: str) -> int | None:
        if path == "/":
            return self._off[h]
        m = _PAGE_RE.match(path)
        if not m:
            return None
        k = int(m[2])
        if not 1 <= k < self._size[h]:
            return None
        node = self._off[h] + k
        return node if self._path(node, h, k) == path else None

    def _n_resources(self, h: int) -> int:
        return max(1, self._size[h] // 4)

    def _extra_response(self, h: int, path: str) -> Response | None:
        m = _RES_RE.match(path)
        if not m or int(m[2]) >= self._n_resources(h) or str(int(m[2])) != m[2]:
            return None
        if (m[1] == "img") != (m[3] == "png"):
            return None
        ctype = BINARY_TYPES["." + m[3]]
        return Response(200, ctype, self._binary(ctype, _mix(h, int(m[2]), m[3] == "png")))

    def _zipf_local(self, rnd, n: int) -> int:
        return bisect.bisect_left(self._zipf_cum, rnd() * self._zipf_cum[n - 1], 0, n - 1)

    def _random_host(self, rnd) -> int:
        return bisect.bisect_right(self._host_cum, int(rnd() * self.n_nodes))

    def _targets(self, node: int) -> list[int | str]:
        h = bisect.bisect_right(self._off, node) - 1
        off, n, k = self._off[h], self._size[h], node - self._off[h]
        rng = random.Random(_mix(self.seed, node, S_LINKS))
        rnd = rng.random
        out: list[int | str] = []
        H = len(self.hosts)
        if k == 0 and H > 1:
            out.append(self._off[(h + 1) % H])  # the ring
            for _ in range(3):
                out.append(self._off[self._random_host(rnd)])
        out.extend(range(off + self._b * k + 1, off + min(n, self._b * k + self._b + 1)))
        want = int(self._links * (0.5 + rnd()) + 0.5)
        for _ in range(want - len(out)):
            u = rnd()
            if self._topics and u >= self._p404 + self._pbin and rnd() < self._locality:
                same = self._topic_nodes[self._topic[node]]
                out.append(same[int(rnd() * len(same))])
                continue
            th = h if (H == 1 or rnd() < self._local) else self._random_host(rnd)
            if u < self._p404:
                out.append(f"http://{self.hosts[th]}/gone/{int(rnd() * 1e6)}.html")
            elif u < self._p404 + self._pbin:
                j = int(rnd() * self._n_resources(th))
                png = rnd() < 0.5
                out.append(f"http://{self.hosts[th]}/{'img' if png else 'doc'}/{j}.{'png' if png else 'pdf'}")
            else:
                out.append(self._off[th] + self._zipf_local(rnd, self._size[th]))
        # Shuffle so tree links are not always first (deterministic: own rng).
        rng.shuffle(out)
        return out

    def _relink(self, node: int, v: int) -> list[int | str]:
        """Version v's links: each random link to a page is redrawn with
        probability change_links, afresh for every version, to a page of the
        host it pointed to.  Tree links and links to roots stay, so every page
        stays reachable from any root in every version."""
        out = list(self._targets(node))
        h = bisect.bisect_right(self._off, node) - 1
        off, n, k = self._off[h], self._size[h], node - self._off[h]
        first, end = off + self._b * k + 1, off + min(n, self._b * k + self._b + 1)
        q = self._change_links
        for i, tgt in enumerate(out):
            if isinstance(tgt, str) or first <= tgt < end:
                continue
            th = bisect.bisect_right(self._off, tgt) - 1
            if tgt == self._off[th]:
                continue
            key = _mix(self.seed, node, S_RELINK, v, i)
            if key < q * 18446744073709551616.0:
                out[i] = self._off[th] + self._zipf_local(random.Random(key).random, self._size[th])
        return out

    def _redirect_target(self, node: int) -> int:
        """A crawlable page, on the same host 7 times in 10."""
        rnd = random.Random(_mix(self.seed, node, S_REDIR)).random
        h = self.host_of(node)
        for _ in range(20):
            th = h if rnd() < 0.7 else self._random_host(rnd)
            t = self._off[th] + self._zipf_local(rnd, self._size[th])
            if t != node and self._kind(t) == K_OK:
                return t
        return self._off[h]  # the root is always crawlable

    # ---- queries ----------------------------------------------------------
    def host_size(self, host: str) -> int:
        return self._size[self.host_index[norm_host(host)]]

    def seeds(self, k: int = 1) -> list[str]:
        """Roots of the k biggest hosts (any one root reaches every page)."""
        return [f"http://{self.hosts[h]}/" for h in self._by_size[:k]]

    def resource_urls(self) -> list[str]:
        """Every binary resource URL that answers 200."""
        return [f"http://{name}/{d}/{j}.{e}" for h, name in enumerate(self.hosts)
                for j in range(self._n_resources(h)) for d, e in (("img", "png"), ("doc", "pdf"))]


# --------------------------------------------------------------------------
# A web over a link-graph file (crawlproj.graphfile reads it).
# --------------------------------------------------------------------------
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
    "change_dist": "",
    "day_seconds": 10.0,
    "change_epoch": 0.0,
    "change_workweek": 0.0,
    "lm_untrusted": 0.0,
    "http_clock": "simulated",
}


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
        o = with_clock(dict(GRAPH_DEFAULTS, **options))
        self.spec = dict(o, graph=path)
        self.seed = int(o["seed"])
        self._page_bytes = int(o["page_bytes"])
        self._binary_bytes = int(o["binary_bytes"])
        self._change_rate = float(o["change_rate"])
        self._change_period = float(o["change_period"])
        self._base_rate = float(o["base_rate"])
        g = graphfile.read(path, format=o["format"], edges_path=o["edges_path"])
        self.format = g.format
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
        self._init_change(o)

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
            from w3lib.url import canonicalize_url

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
