"""How long link extraction takes per page, on real pages.

    python bench/links_bench.py [--html ../shared/data/html] [--repeat 7]
        [--baseline OTHER/extract.py]

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

--baseline times another extract.py (e.g. `git show main:crawlproj/extract.py
> /tmp/extract_main.py`) in the same passes, page by page, alternating which
goes first, so that both see the same load; its links/page and resolve
figures are printed beside.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from lxml import etree  # noqa: E402

import crawlproj  # noqa: E402
from crawlproj import extract  # noqa: E402
from crawlproj.urls import host_of, refusal  # noqa: E402


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
    """(root, base, encoding) as extract_page has them when it extracts links."""
    enc, text = extract._decode(body, None, None)
    root = extract._parse(text)
    if root is None:
        return None
    base = extract._base_url(root, url)
    etree.strip_elements(root, *extract._INERT_TAGS, with_tail=False)
    extract._mark_blocks(root)
    return root, base, enc


def load(path: str):
    spec = importlib.util.spec_from_file_location("baseline_extract", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--html", default=str(Path(__file__).resolve().parents[2] / "shared/data/html"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", help="another extract.py, timed in the same passes")
    args = ap.parse_args()
    html_dir = Path(args.html)
    if not html_dir.exists():
        html_dir = Path("/work/shared/data/html")
    docs = [p for p in (prepared(u, b) for u, b in pages(html_dir)) if p is not None]
    pairs = [(base, a.get("href"), enc) for root, base, enc in docs
             for a in root.iter("a", "area") if a.get("href") is not None]
    impls = {"this": extract}
    if args.baseline:
        impls["baseline"] = load(args.baseline)

    best = {name: [float("inf")] * len(docs) for name in impls}
    resolve_best = dict.fromkeys(impls, float("inf"))
    links: list[str] = []
    order = list(impls)
    for rep in range(args.repeat):
        for i, (root, base, enc) in enumerate(docs):
            order.reverse()
            for name in order:
                module = impls[name]
                t0 = time.perf_counter()
                got, _ = module._extract_links(root, base, enc, extract.DEFAULT_MAX_LINKS,
                                               extract.DEFAULT_MAX_ANCHOR_CHARS)
                best[name][i] = min(best[name][i], time.perf_counter() - t0)
                if rep == 0 and name == "this":
                    links.extend(u for u, _ in got)
        for name in order:
            resolve_link = impls[name].resolve_link
            resolve_best[name] = min(resolve_best[name],
                                     _timed(lambda: [resolve_link(b, h, e) for b, h, e in pairs]))
    admit_best = min(_timed(lambda: [(refusal(u, 2083), host_of(u)) for u in links])
                     for _ in range(args.repeat))

    print(f"crawlproj from {os.path.dirname(crawlproj.__file__)}; baseline {args.baseline}")
    print(f"pages {len(docs)}, links found {len(links)} ({len(links) / len(docs):.0f}/page), "
          f"hrefs {len(pairs)}")
    for name in impls:
        us = [t * 1e6 for t in best[name]]
        print(f"{name:8}  links/page median {statistics.median(us):6.0f} us  mean "
              f"{statistics.mean(us):6.0f} us  per link {sum(us) / len(links):5.2f} us;  "
              f"resolve {resolve_best[name] * 1e6 / len(pairs):5.2f} us per href")
    print(f"admit check {admit_best * 1e6 / len(links):5.2f} us per link (refusal + host_of)")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
