"""What the URL filters cost per URL, on the links of a real site.

    .venv/bin/python bench/urlfilter_bench.py [--docs /usr/share/doc/python3.11/html]
        [--repeat 7] [--json]

URLs: every link of every page of Debian's Python manual, resolved as the
web spider resolves them (crawlproj.extract.extract_page, base
http://docs.python.test/...), each page's links in page order, duplicates
across pages kept: the stream of URLs a crawl of the manual offers the
frontier's admission, before any cache. Each configuration's filter
(crawlproj/frontier/urlfilter.py, built from the settings as a worker builds
it) is asked about every URL; the figure is the minimum over --repeat passes
(the machine is shared; the minimum is the least disturbed), in µs per URL.
"none" times what admission does with no filter set: the test that there is
none. Reported beside it: links per page of the manual, and so the filter's
µs per page.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy.settings import Settings  # noqa: E402

from crawlproj.addon import apply_table  # noqa: E402
from crawlproj.extract import extract_page  # noqa: E402
from crawlproj.frontier.urlfilter import URLFilter  # noqa: E402

HOST = "docs.python.test"

# A rules file of the usual kind: schemes and suffixes not crawled, URLs with
# query characters, a path segment three times, then the site itself.
RULES = r"""# schemes
-^(?:file|ftp|mailto|javascript):
# suffixes of what is not parsed
-(?i)\.(?:gif|jpe?g|png|ico|css|js|zip|gz|tgz|bz2|exe|pdf|mp[34]|mov|svg|woff2?)$
# query characters
-[?*!@=]
# a segment three times
-.*(/[^/]+)/[^/]+\1/[^/]+\1/
+^https?://docs\.python\.test/
"""


def urls_of(docs: Path) -> tuple[list[str], int]:
    urls, pages = [], 0
    for path in sorted(docs.rglob("*.html")):
        url = f"http://{HOST}/{path.relative_to(docs).as_posix()}"
        urls += [u for u, _ in extract_page(path.read_bytes(), url, "utf-8").links]
        pages += 1
    return urls, pages


def build(settings: dict) -> URLFilter | None:
    s = Settings()
    apply_table(s)
    for k, v in settings.items():
        s.set(k, v, priority="cmdline")
    return URLFilter.from_settings(s)


def per_url(f: URLFilter | None, urls: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        if f is None:
            for url in urls:
                if f is not None:  # what admission asks when no filter is set
                    f.refusal(url)
        else:
            refusal = f.refusal
            for url in urls:
                refusal(url)
        best = min(best, time.perf_counter() - t)
    return best / len(urls) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", default="/usr/share/doc/python3.11/html")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    urls, pages = urls_of(Path(args.docs))
    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "regex-urlfilter.txt")
        Path(rules).write_text(RULES)
        configs = {
            "none": {},
            "exclude x1": {"URLFILTER_EXCLUDE": [r"/whatsnew/"]},
            "exclude x3": {"URLFILTER_EXCLUDE": [r"/whatsnew/", r"\.txt$", r"(?i)/print/"]},
            "include x1": {"URLFILTER_INCLUDE": [rf"^https?://{HOST.replace('.', '[.]')}/"]},
            "file (5 rules)": {"URLFILTER_FILE": rules},
            "all three": {"URLFILTER_EXCLUDE": [r"/whatsnew/", r"\.txt$", r"(?i)/print/"],
                          "URLFILTER_INCLUDE": [rf"^https?://{HOST.replace('.', '[.]')}/"],
                          "URLFILTER_FILE": rules},
        }
        out = {}
        for name, settings in configs.items():
            f = build(settings)
            refused = 0 if f is None else sum(f.refusal(u) is not None for u in urls)
            us = per_url(f, urls, args.repeat)
            out[name] = {"us_per_url": round(us, 4), "us_per_page": round(us * len(urls) / pages, 1),
                         "refused": refused}
    if args.json:
        print(json.dumps({"urls": len(urls), "pages": pages, "configs": out}, indent=2))
        return
    print(f"{len(urls)} links on {pages} pages ({len(urls) / pages:.1f} a page)")
    print(f"{'config':<16} {'µs/URL':>8} {'µs/page':>8} {'refused':>8}")
    for name, r in out.items():
        print(f"{name:<16} {r['us_per_url']:>8.3f} {r['us_per_page']:>8.1f} {r['refused']:>8}")


if __name__ == "__main__":
    main()
