"""lxml against Lexbor-based parsers for the page walk, on real pages.

    .venv/bin/python bench/parsers_bench.py [--html ../shared/data/html] [--repeat 5]
        [--show 5] [--parsers lxml,selectolax,resiliparse]

Each parser does extract_page's whole job on every page with a known URL of
the HTML corpus (bench/links_bench.py's 1,134 pages): decode (shared: w3lib,
as extract_page), parse, title, <script>/<style> dropped, block elements
marked as word breaks, the one walk of <a>/<area>/<base>/<meta>/<link> (links
in document order with anchor and surrounding text, <base> resolution,
nofollow, canonical, robots meta, refresh), <template> dropped, the visible
text with extract_page's <noscript> rule. "lxml" is crawlproj.extract's
extract_page itself; the others are written here, against
selectolax.lexbor.LexborHTMLParser and resiliparse.parse.html.HTMLTree (both
Lexbor, an HTML5 parser), from the same rules; the walk is
extract._extract_links itself, over the Lexbor elements seen through a small
adapter (_Node: its few Python calls a link are counted against Lexbor).
--parse-only times the parse alone.

Reported per parser: µs per page (the mean over pages of each page's least
process CPU time over --repeat passes, the parsers alternating page by page
so that all see the same load) and the number of pages whose result differs
from lxml's, field by field, with the first --show differences.

The Lexbor parsers need pip install selectolax resiliparse (the bench extra).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from operator import attrgetter, methodcaller
from pathlib import Path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from links_bench import pages

from crawlproj import extract
from crawlproj.extract import (
    _BLOCK_TAGS,
    _NOSCRIPT_SHARE,
    _XML_ILLEGAL_RE,
    DEFAULT_MAX_ANCHOR_CHARS,
    DEFAULT_MAX_HTML_CHARS,
    DEFAULT_MAX_LINKS,
    DEFAULT_MAX_TEXT_CHARS,
    DEFAULT_MAX_TITLE_CHARS,
    Extracted,
    _decode,
    _norm_ws,
    _Tags,
)

NAMES = frozenset({"robots", "crawlproj"})  # as the web spider asks
FIELDS = ("title", "text", "links", "around", "nofollow", "canonical", "robots", "refresh",
          "links_dropped")
_BLOCKS = ", ".join(_BLOCK_TAGS)
_WALKED = "a, area, base, meta, link, template"
_BOUND = 4 * DEFAULT_MAX_ANCHOR_CHARS + 64


def _parent_tag(el) -> str | None:
    p = el.parent
    return None if p is None else p.tag


class _Lexbor:
    """What both Lexbor bindings spell alike."""

    tag = staticmethod(attrgetter("tag"))
    parent_tag = staticmethod(_parent_tag)
    body = staticmethod(attrgetter("body"))
    remove = staticmethod(methodcaller("decompose"))


class Selectolax(_Lexbor):
    """The tree operations the walk needs, on selectolax's Lexbor binding."""

    name = "selectolax"

    def __init__(self) -> None:
        from selectolax.lexbor import LexborHTMLParser
        self.parser = LexborHTMLParser

    def parse(self, text: str):
        return self.parser(text.encode("utf-8", "replace"))

    @staticmethod
    def title(tree) -> str | None:
        el = tree.css_first("head > title") or _outside_svg(tree.css("title"))
        return None if el is None else el.text(deep=True, separator="", strip=False)

    @staticmethod
    def drop(tree, tags: list[str]) -> None:
        tree.strip_tags(tags)

    @staticmethod
    def mark_blocks(tree) -> None:
        for root in [tree, *tree.template_fragments()]:
            for el in root.css(_BLOCKS):
                first = el.first_child
                if first is None:
                    el.insert_child(" ")
                else:
                    first.insert_before(" ")
                el.insert_after(" ")

    @staticmethod
    def walked(tree) -> list:
        out = []
        stack = [iter(tree.css(_WALKED))]
        while stack:
            for el in stack[-1]:
                if el.tag == "template":
                    for frag in el.template_fragments():
                        stack.append(iter(frag.css(_WALKED)))
                    break
                out.append(el)
            else:
                stack.pop()
        return out

    @staticmethod
    def attrs(el):
        return el.attributes

    @staticmethod
    def anchor(el) -> str:
        raw = el.text(deep=True, separator="", strip=False)
        imgs = el.css("img")
        if imgs:
            raw = " ".join([raw, *filter(None, (i.attributes.get("alt") for i in imgs))])
        return raw

    @staticmethod
    def around(el) -> tuple[str, str]:
        return "".join(reversed(_texts(el, "prev"))), "".join(_texts(el, "next"))

    @staticmethod
    def text_of(el) -> str:
        return el.text(deep=True, separator="", strip=False)

    @staticmethod
    def select(el, selector: str) -> list:
        return el.css(selector)



def _texts(el, step: str, text_of=None) -> list[str]:
    """The text of the text nodes next to el (comments skipped) up to the next
    element, walking by step ("prev", "next": selectolax; resiliparse passes
    its sibling names and text_of: a node's text, "" for a comment, None for
    anything else)."""
    out: list[str] = []
    n, size = getattr(el, step), 0
    while n is not None and size < _BOUND:
        if text_of is not None:
            t = text_of(n)
        elif n.is_text_node:
            t = n.text_content or ""
        else:
            t = "" if n.is_comment_node else None
        if t is None:
            break
        out.append(t)
        size += len(t)
        n = getattr(n, step)
    return out


class Resiliparse(_Lexbor):
    """The same on resiliparse's Lexbor binding (no access to <template>
    content: its links are not seen)."""

    name = "resiliparse"

    def __init__(self) -> None:
        from resiliparse.parse.html import HTMLTree, NodeType
        self.tree_class = HTMLTree
        self.TEXT, self.COMMENT = NodeType.TEXT, NodeType.COMMENT

    def parse(self, text: str):
        return self.tree_class.parse(text)

    @staticmethod
    def title(tree) -> str | None:
        doc = tree.document
        el = doc.query_selector("head > title") or _outside_svg(
            _all(doc.query_selector_all("title")))
        return None if el is None else el.text

    @staticmethod
    def drop(tree, tags: list[str]) -> None:
        for el in _all(tree.document.query_selector_all(", ".join(tags))):
            el.decompose()

    @staticmethod
    def mark_blocks(tree) -> None:
        for el in _all(tree.document.query_selector_all(_BLOCKS)):
            el.insert_before(tree.create_text_node(" "), el.first_child)
            parent = el.parent
            if parent is not None:
                parent.insert_before(tree.create_text_node(" "), el.next_sibling)

    @staticmethod
    def walked(tree) -> list:
        return _all(tree.document.query_selector_all("a, area, base, meta, link"))

    @staticmethod
    def attrs(el):
        return el

    @staticmethod
    def anchor(el) -> str:
        raw = el.text
        imgs = el.query_selector_all("img")
        if len(imgs):
            raw = " ".join([raw, *filter(None, (i.getattr("alt") for i in _all(imgs)))])
        return raw

    def around(self, el) -> tuple[str, str]:
        return ("".join(reversed(_texts(el, "previous_sibling", self._text))),
                "".join(_texts(el, "next_sibling", self._text)))

    def _text(self, n) -> str | None:
        kind = n.type
        return n.text if kind is self.TEXT else "" if kind is self.COMMENT else None

    @staticmethod
    def text_of(el) -> str:
        return el.text

    @staticmethod
    def select(el, selector: str) -> list:
        return _all(el.query_selector_all(selector))



def _outside_svg(titles):
    """The first <title> not inside <svg> or <math> (extract._title's rule)."""
    for cand in titles:
        p = cand.parent
        while p is not None and p.tag not in ("svg", "math"):
            p = p.parent
        if p is None:
            return cand
    return None


def _all(collection) -> tuple:
    # one slice: each index into a resiliparse collection runs its query again
    return collection[0:len(collection)]


def _get(attrs, name: str) -> str | None:
    # selectolax gives a dict, resiliparse the element (getattr(name, default))
    return attrs.get(name) if isinstance(attrs, dict) else attrs.getattr(name, None)


def lexbor_extract(p, body: bytes, url: str) -> Extracted:
    """extract_page's job through parser adapter p (Selectolax, Resiliparse)."""
    enc, text = _decode(body, None, b"text/html")
    if not text or text.isspace():
        return Extracted(encoding=enc)
    text = _XML_ILLEGAL_RE.sub(" ", text[:DEFAULT_MAX_HTML_CHARS])
    tree = p.parse(text)
    del text
    raw_title = p.title(tree)
    title = "" if raw_title is None else _norm_ws(
        raw_title[: 4 * DEFAULT_MAX_TITLE_CHARS + 64])[:DEFAULT_MAX_TITLE_CHARS].rstrip()
    p.drop(tree, ["script", "style"])
    p.mark_blocks(tree)
    around: dict[str, str] = {}
    nofollow: set[str] = set()
    tags = _Tags(url)
    links, dropped = extract._extract_links(
        _Root(p, p.walked(tree)), url, enc, DEFAULT_MAX_LINKS, DEFAULT_MAX_ANCHOR_CHARS, around,
        nofollow, tags, NAMES)
    p.drop(tree, ["template"])
    return Extracted(title=title, text=_visible(p, tree), links=links, around=around,
                     links_dropped=dropped, encoding=enc, robots=tags.robots,
                     nofollow=nofollow or frozenset(), canonical=tags.canonical,
                     refresh=tags.refresh)


class _Node:
    """A Lexbor element seen through the part of lxml's element API that
    extract._extract_links uses, so that the walk itself is the crawler's
    code (a cost of a few attribute calls per element, counted against the
    Lexbor parsers). Its previous sibling is never reported: its parent's
    ``text`` is then the text before it, as lxml's ``getprevious().tail`` or
    ``getparent().text`` would be."""

    __slots__ = ("p", "n", "tag", "attrs", "_around")

    def __init__(self, p, n) -> None:
        self.p, self.n = p, n
        self.tag = p.tag(n)
        self.attrs = p.attrs(n)
        self._around: tuple[str, str] | None = None

    def around(self) -> tuple[str, str]:
        if self._around is None:
            self._around = self.p.around(self.n)
        return self._around

    def get(self, name: str) -> str | None:
        return _get(self.attrs, name)

    def itertext(self):
        yield self.p.text_of(self.n)

    def iter(self, tag: str):
        return [_Node(self.p, i) for i in self.p.select(self.n, tag)]

    def getprevious(self) -> None:
        return None

    def getparent(self) -> _Parent:
        return _Parent(self)

    @property
    def tail(self) -> str:
        return self.around()[1]


class _Parent:
    __slots__ = ("child",)

    def __init__(self, child: _Node) -> None:
        self.child = child

    @property
    def tag(self) -> str | None:
        return self.child.p.parent_tag(self.child.n)

    @property
    def text(self) -> str:
        return self.child.around()[0]


class _Root:
    __slots__ = ("p", "elements")

    def __init__(self, p, elements: list) -> None:
        self.p, self.elements = p, elements

    def iter(self, *tags: str):
        # the adapter found a, area, base, meta and link already
        p = self.p
        return (_Node(p, el) for el in self.elements)


def _visible(p, tree) -> str:
    body = p.body(tree)
    if body is None:
        return ""
    raw = p.text_of(body)
    noscripts = p.select(body, "noscript")
    if noscripts:
        total, dropped = len(raw), False
        for ns in noscripts:
            if len(p.text_of(ns)) < total * _NOSCRIPT_SHARE:
                p.remove(ns)  # (one inside a removed one: a detached node)
                dropped = True
        if dropped:
            raw = p.text_of(body)
    return _norm_ws(raw)[:DEFAULT_MAX_TEXT_CHARS].rstrip()


def lxml_extract(body: bytes, url: str) -> Extracted:
    return extract.extract_page(body, url, content_type=b"text/html", robots_names=NAMES)


def differences(a: Extracted, b: Extracted) -> list[str]:
    out = []
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if f == "nofollow":
            x, y = set(x), set(y)
        if x == y:
            continue
        if f == "links":
            xs, ys = dict(x), dict(y)
            only_x = [u for u in xs if u not in ys]
            only_y = [u for u in ys if u not in xs]
            anchors = [(u, xs[u], ys[u]) for u in xs if u in ys and xs[u] != ys[u]]
            order = not only_x and not only_y and not anchors
            out.append(f"links: {len(only_x)} only lxml {only_x[:2]}, {len(only_y)} only "
                       f"this {only_y[:2]}, anchors {len(anchors)} {anchors[:1]}"
                       + (" (order)" if order else ""))
        elif f == "text":
            i = next((k for k, (c, d) in enumerate(zip(x, y)) if c != d), min(len(x), len(y)))
            out.append(f"text: len {len(x)} vs {len(y)}, from {i}: {x[max(0, i - 40):i + 40]!r}"
                       f" vs {y[max(0, i - 40):i + 40]!r}")
        elif f == "around":
            diff = [(u, x.get(u), y.get(u)) for u in {*x, *y} if x.get(u) != y.get(u)]
            out.append(f"around: {len(diff)} {diff[:1]}")
        else:
            out.append(f"{f}: {x!r:.120} vs {y!r:.120}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--html", default=str(Path(__file__).resolve().parents[2] / "shared/data/html"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--show", type=int, default=5, help="differences shown per parser")
    ap.add_argument("--parsers", default="lxml,selectolax,resiliparse")
    ap.add_argument("--parse-only", action="store_true",
                    help="time the parse alone (of the decoded, cleaned page)")
    args = ap.parse_args()
    html_dir = Path(args.html)
    if not html_dir.is_dir():
        ap.exit(2, f"no HTML corpus at {html_dir}\n")
    known = {"lxml": None, "selectolax": Selectolax, "resiliparse": Resiliparse}
    chosen = [n.strip() for n in args.parsers.split(",") if n.strip()]
    if not chosen or any(n not in known for n in chosen):
        ap.exit(2, f"--parsers: choose from {', '.join(known)}\n")
    if args.repeat < 1:
        ap.exit(2, "--repeat: at least 1\n")
    runs = {}
    parsers = {"lxml": extract._parse}
    for name in chosen:
        if known[name] is None:
            runs[name] = lxml_extract
            continue
        try:
            adapter = known[name]()
        except ImportError as exc:
            ap.exit(2, f"{name}: {exc} (pip install selectolax resiliparse)\n")
        runs[name] = lambda body, url, p=adapter: lexbor_extract(p, body, url)
        parsers[name] = adapter.parse
    docs = pages(html_dir)
    if args.parse_only:
        texts = [_XML_ILLEGAL_RE.sub(" ", _decode(b, None, b"text/html")[1]) for _, b in docs]
        docs = [("", t) for t in texts]
        runs = {name: lambda text, _, f=parsers[name]: f(text) for name in runs}
    best = {name: [float("inf")] * len(docs) for name in runs}
    results: dict[str, list[Extracted]] = {name: [] for name in runs}
    order = list(runs)
    for rep in range(args.repeat):
        for i, (url, body) in enumerate(docs):
            order.reverse()
            for name in order:
                t0 = time.process_time()
                got = runs[name](body, url)
                best[name][i] = min(best[name][i], time.process_time() - t0)
                if rep == 0:
                    results[name].append(got)
    load = os.getloadavg()
    print(f"{'parse alone: ' if args.parse_only else ''}pages {len(docs)}, best of {args.repeat}, process CPU; load "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    reference = None if args.parse_only else results.get("lxml")
    for name in runs:
        us = [t * 1e6 for t in best[name]]
        line = (f"{name:12} {statistics.mean(us):7.0f} us/page mean, "
                f"{statistics.median(us):7.0f} median")
        if reference is not None and name != "lxml":
            diffs = [(docs[i][0], d) for i, (a, b) in enumerate(zip(reference, results[name]))
                     if (d := differences(a, b))]
            fields = {f: sum(any(x.startswith(f + ":") for x in d) for _, d in diffs)
                      for f in FIELDS}
            line += (f"; pages differing from lxml {len(diffs)} ("
                     + ", ".join(f"{f} {n}" for f, n in fields.items() if n) + ")")
            print(line)
            for url, d in diffs[: args.show]:
                print(f"    {url}")
                for x in d:
                    print(f"      {x[:400]}")
        else:
            print(line)


if __name__ == "__main__":
    main()
