"""How long link extraction takes per page, on real pages.

    .venv/bin/python bench/links_bench.py [--html ../shared/data/html] [--repeat 7]
        [--base REV]

Pages: the HTML corpus's pages with a known http(s) URL (Zyte article
benchmark and Trafilatura evaluation set, ~1,100 pages). Each page is decoded
and parsed once, outside the timing. Each figure is the per-page (or per-pass)
minimum over --repeat passes: the machine is shared, and the minimum is the
least disturbed. Reported:

* links/page: the link stage of extract_page (<base>, every <a>/<area> href
  resolved, de-duplicated, anchor text), µs per page (median and mean) and
  per link found;
* resolve: resolve_link alone over every (base, href) pair of the corpus, no
  per-page cache, µs per href;
* admit check: refusal() and host_of() on every link found, µs per link (the
  URL rule's part of admission).

--base REV times crawlproj/extract.py and crawlproj/urls.py of git revision
REV (read with git show; the crawlproj modules extract.py imports are urls.py
and, since the robots meta tags, crawlproj/robots/meta.py, taken from the
work tree, also where REV names it crawlproj.robotsmeta) in
the same passes as the work tree's, page by page, alternating which goes
first, so that both see the same load.

--whole (with --base) also times extract_page itself, decode and parse
included, on every page (the extraction's whole per-page cost); the work
tree's reads the robots meta tags and nofollow links as the web spider asks
(crawlproj/robots/meta.py), where REV's has them. Reported: µs per page (the
mean of the per-page minima) and the difference.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from lxml import etree

import crawlproj
from crawlproj import extract
from crawlproj.robots import meta as robots_meta
from crawlproj.urls import host_of, refusal


def pages(html_dir: Path) -> list[tuple[str, bytes]]:
    out = []
    zyte = html_dir / "zyte_article_extraction_benchmark"
    gold = json.loads(gzip.decompress((zyte / "ground-truth.json.gz").read_bytes()))
    for key, entry in sorted(gold.items()):
        out.append((entry["url"], gzip.decompress((zyte / "html" / f"{key}.html.gz").read_bytes())))
    traf = html_dir / "trafilatura_eval"
    evaldata = json.loads(gzip.decompress((traf / "evaldata.json.gz").read_bytes()))
    for url, entry in sorted(evaldata.items()):
        for sub in ("eval", "cache"):
            p = traf / sub / f"{entry['file']}.gz"
            if p.exists():
                if url.strip().startswith(("http://", "https://")):
                    out.append((url.strip(), gzip.decompress(p.read_bytes())))
                break
    return out


def prepared(url: str, body: bytes):
    """(root, url, base, encoding) as extract_page has them when it extracts
    links; base is the document base URL, which the link stage finds itself
    (a revision that takes it from a separate pass is given it)."""
    enc, text = extract._decode(body, None, None)
    root = extract._parse(text)
    if root is None:
        return None
    tags = extract._Tags(url)
    extract._extract_links(root, url, enc, extract.DEFAULT_MAX_LINKS,
                           extract.DEFAULT_MAX_ANCHOR_CHARS, tags=tags)
    base = tags.base
    etree.strip_elements(root, *extract._INERT_TAGS, with_tail=False)
    extract._mark_blocks(root)
    return root, url, base, enc


def module(name: str, source: str) -> types.ModuleType:
    m = types.ModuleType(name)
    sys.modules[name] = m  # dataclasses look their module up
    exec(compile(source, f"{name}.py", "exec"), m.__dict__)  # the repository's own code
    return m


def at_revision(rev: str) -> tuple[types.ModuleType, types.ModuleType | None]:
    """(extract, urls) modules of git revision rev; urls None if rev has none."""
    def show(path: str) -> str | None:
        run = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"],
                             capture_output=True, text=True)
        return run.stdout if run.returncode == 0 else None

    urls_src = show("crawlproj/urls.py")
    urls = module(f"urls_at_{rev}", urls_src) if urls_src else None
    saved = sys.modules.get("crawlproj.urls")
    if urls is not None:
        sys.modules["crawlproj.urls"] = urls
    sys.modules["crawlproj.robotsmeta"] = robots_meta  # its name before crawlproj/robots/
    try:
        return module(f"extract_at_{rev}", show("crawlproj/extract.py")), urls
    finally:
        sys.modules["crawlproj.urls"] = saved
        del sys.modules["crawlproj.robotsmeta"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--html", default=str(Path(__file__).resolve().parents[2] / "shared/data/html"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--base", metavar="REV", help="git revision timed in the same passes")
    ap.add_argument("--whole", action="store_true", help="with --base: extract_page per page too")
    args = ap.parse_args()
    html_dir = Path(args.html)
    if not html_dir.exists():
        html_dir = Path("/work/shared/data/html")
    docs = [p for p in (prepared(u, b) for u, b in pages(html_dir)) if p is not None]
    pairs = [(base, a.get("href"), enc) for root, url, base, enc in docs
             for a in root.iter("a", "area") if a.get("href") is not None]
    impls = {"worktree": extract}
    rules = {"worktree": (refusal, host_of)}
    if args.base:
        base_extract, base_urls = at_revision(args.base)
        impls[f"@{args.base}"] = base_extract
        if base_urls is not None:
            rules[f"@{args.base}"] = (base_urls.refusal, base_urls.host_of)

    best = {name: [float("inf")] * len(docs) for name in impls}
    resolve_best = dict.fromkeys(impls, float("inf"))
    links: list[str] = []
    order = list(impls)
    for rep in range(args.repeat):
        for i, (root, url, base, enc) in enumerate(docs):
            order.reverse()
            for name in order:
                module = impls[name]
                t0 = time.perf_counter()
                # a revision with _Tags finds the <base> in its own walk of the links
                start = url if hasattr(module, "_Tags") else base
                got, _ = module._extract_links(root, start, enc, extract.DEFAULT_MAX_LINKS,
                                               extract.DEFAULT_MAX_ANCHOR_CHARS)
                best[name][i] = min(best[name][i], time.perf_counter() - t0)
                if rep == 0 and name == "worktree":
                    links.extend(u for u, _ in got)
        for name in order:
            resolve_link = impls[name].resolve_link
            resolve_best[name] = min(resolve_best[name],
                                     _timed(lambda: [resolve_link(b, h, e) for b, h, e in pairs]))
    admit_best = {name: min(_timed(lambda: [(ref(u, 2083), host(u)) for u in links])
                            for _ in range(args.repeat))
                  for name, (ref, host) in rules.items()}

    print(f"crawlproj from {os.path.dirname(crawlproj.__file__)}; base {args.base}")
    print(f"pages {len(docs)}, links found {len(links)} ({len(links) / len(docs):.0f}/page), "
          f"hrefs {len(pairs)}")
    for name in impls:
        us = [t * 1e6 for t in best[name]]
        print(f"{name:10}  links/page median {statistics.median(us):6.0f} us  mean "
              f"{statistics.mean(us):6.0f} us  per link {sum(us) / len(links):5.2f} us;  "
              f"resolve {resolve_best[name] * 1e6 / len(pairs):5.2f} us per href")
    for name, t in admit_best.items():
        print(f"{name:10}  admit check {t * 1e6 / len(links):5.2f} us per link (refusal + host_of)")
    if args.base and args.whole:
        whole(pages(html_dir), impls, args.repeat)


def whole(bodies: list[tuple[str, bytes]], impls: dict, repeat: int) -> None:
    """extract_page of each implementation on every page, alternating which
    goes first page by page; the mean over pages of each page's least time."""
    names = frozenset({"robots", "crawlproj"})
    best = {name: [float("inf")] * len(bodies) for name in impls}
    order = list(impls)
    for _ in range(repeat):
        for i, (url, body) in enumerate(bodies):
            order.reverse()
            for name in order:
                module = impls[name]
                kw = {"robots_names": names} if hasattr(module, "_Tags") else {}
                t0 = time.thread_time()
                module.extract_page(body, url, content_type=b"text/html", **kw)
                best[name][i] = min(best[name][i], time.thread_time() - t0)
    mean = {name: statistics.mean(v) * 1e6 for name, v in best.items()}
    base = [n for n in impls if n != "worktree"][0]
    print(f"extract_page, whole, per page: worktree {mean['worktree']:.0f} us, {base} "
          f"{mean[base]:.0f} us ({100 * (mean['worktree'] / mean[base] - 1):+.2f} %)")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
