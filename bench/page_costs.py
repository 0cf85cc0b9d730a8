"""What each per-page part of the default stack costs by itself: CPU per page
of its own work, alone in one thread, over pages of the simulated web that
bench/crawl_bench.py crawls.

    .venv/bin/python bench/page_costs.py [--hosts 200 --pages 5000 --page-bytes 10000]
        [--sample 200] [--rounds 3] [--html DIR]

--html DIR takes the pages from the HTML files under DIR (up to --sample of
them, in name order) instead of the simulated web, whose pages are drawn from
one vocabulary and compress unlike real ones: what the gzip lines say of the
WARC files' size. Each gzip line also gives the compressed size over the
pages' size.

--beside also times the extraction of each page right after another part has
run on the same page (the WARC records, the SURT of the URL, ...), against
the extraction alone: what a part's work costs the crawl's own work beside it
in one thread (the caches it leaves cold), which its own time does not show.

Against a whole crawl's figures (crawl_bench.py: worker CPU per page with a
part on and off) this says how much of a part's cost is its own work and how
much is what it does to the rest of the worker (threads, hand-offs, the GIL).
No Redis, no network: the parts' computations only.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import time
import zlib
from pathlib import Path

import msgpack
from isal import isal_zlib
from warcio.warcwriter import WARCWriter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlproj.due.contentseen import content_fingerprint  # noqa: E402
from crawlproj.extract import extract_page  # noqa: E402
from crawlproj.simweb.model import SimWeb  # noqa: E402
from crawlproj.stores.cdxj import urlkey  # noqa: E402
from crawlproj.stores.exchange import Exchange  # noqa: E402
from crawlproj.stores.linkstore import TEXT_LEVEL, encode_page  # noqa: E402
from crawlproj.stores.storage import LocalStorage  # noqa: E402
from crawlproj.stores.warc import GZIP_LEVEL, WarcWriter, _index_fields  # noqa: E402
from crawlproj.traps.nearhost import simhash  # noqa: E402


def zlib_member(level: int):
    """A gzip member by zlib (warcio's writer uses level 9)."""
    def run(body: bytes) -> bytes:
        c = zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        return c.compress(body) + c.flush()
    return run


def isal_member(body: bytes) -> bytes:
    """A gzip member as the content store makes one."""
    return isal_zlib.compress(body, GZIP_LEVEL, isal_zlib.MAX_WBITS | 16)


def per_page_us(fn, inputs: list, rounds: int) -> float:
    """Least CPU time per input over rounds (µs): the least is the part's own
    cost, the others carry the machine's noise."""
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for x in inputs:
            fn(x)
        best = min(best, (time.process_time() - t) / len(inputs))
    return best * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--pages", type=int, default=5000)
    p.add_argument("--page-bytes", type=int, default=10000)
    p.add_argument("--sample", type=int, default=200, help="HTML pages timed")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--html", type=Path, help="a directory of HTML files to take the pages from")
    p.add_argument("--beside", action="store_true",
                   help="also the extraction's CPU per page right after each WARC part")
    a = p.parse_args()
    bodies = []
    if a.html is not None:
        for path in sorted(a.html.rglob("*.htm*")):
            if path.is_file():
                bodies.append(path.read_bytes())
            if len(bodies) == a.sample:
                break
        if not bodies:
            p.error(f"no HTML file under {a.html}")
    else:
        web = SimWeb.from_spec({"seed": a.seed, "hosts": a.hosts, "pages": a.pages,
                                "page_bytes": a.page_bytes})
        step = max(1, a.pages // (4 * a.sample))
        for node in range(0, a.pages, step):
            body = web.render(node)
            if body.lstrip()[:1] == b"<":
                bodies.append(body)
            if len(bodies) == a.sample:
                break
    extracted = [extract_page(b, "http://h.example/p.html", "utf-8", content_type=b"text/html",
                              max_text_chars=10 ** 6) for b in bodies]
    texts = [e.text for e in extracted]
    links = [[{"url": u, "anchor": t} for u, t in e.links] for e in extracted]
    # the link store's text of a page (msgpack of its URL, links and anchors)
    packed = [msgpack.packb(["http://h.example/p.html", [x["url"] for x in page],
                             [x["anchor"] for x in page]]) for page in links]
    print(f"{len(bodies)} HTML pages, {sum(map(len, bodies)) / len(bodies):.0f} bytes, "
          f"{sum(map(len, texts)) / len(texts):.0f} characters of text on average")
    # a fetch of each page as the record middleware captures it (a request
    # head as Scrapy sends it, a response head as the simulated web answers)
    exchanges = []
    for i, body in enumerate(bodies):
        url = f"http://h{i % 200:04d}.example/doc/{i}.html"
        exchanges.append(Exchange(
            request=None, url=url, status=200,
            request_head=(f"GET /doc/{i}.html HTTP/1.1\r\nHost: h{i % 200:04d}.example\r\n"
                          "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
                          "\r\nAccept-Language: en\r\nUser-Agent: crawlproj/1.0\r\n"
                          "Accept-Encoding: gzip, deflate, br\r\n\r\n").encode(),
            response_head=(f"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                           f"Content-Length: {len(body)}\r\nServer: simweb\r\n\r\n").encode(),
            body=body, content_type="text/html", started=time.time(), duration=0.01,
            ip="127.0.0.1"))
    writer = WarcWriter(LocalStorage(Path("/nonexistent")), "bench", "h:1:x", 1 << 40)

    def records(e: Exchange) -> list:
        e._sha1 = e._digest = None  # the payload's digest, made once a page, counted here
        return writer.members(e)

    parts = [
        ("WARC: one exchange's records made (digests, both gzip members, the index "
         "key: WarcWriter.members, on the reactor)", records, exchanges),
        ("link and text extraction (the spider, every configuration)",
         lambda b: extract_page(b, "http://h.example/p.html", "utf-8",
                                content_type=b"text/html", max_text_chars=10 ** 6), bodies),
        ("trap guard: simhash of the text", simhash, texts),
        ("content-seen: normalise + hash", content_fingerprint, bodies),
        (f"WARC: gzip of the body (ISA-L level {GZIP_LEVEL}, the content store's)",
         isal_member, bodies),
        ("WARC: gzip of the body, zlib level 9 (warcio's own gzip)", zlib_member(9), bodies),
        ("WARC: gzip of the body, zlib level 6", zlib_member(6), bodies),
        ("WARC: gzip of the body, zlib level 1", zlib_member(1), bodies),
        ("WARC: SHA-1 of the body", lambda b: hashlib.sha1(b).digest(), bodies),
        ("link store: encode a page", lambda x: encode_page("http://h.example/p.html", 0.0, x),
         links),
        (f"link store: compress a page's text, ISA-L level {TEXT_LEVEL} (the link store's)",
         lambda b: isal_zlib.compress(b, TEXT_LEVEL), packed),
        ("link store: compress a page's text, zlib level 6",
         lambda b: zlib.compress(b, 6), packed),
    ]
    size = sum(map(len, bodies))
    for name, fn, inputs in parts:
        ratio = ""
        if name.startswith("WARC: gzip"):
            ratio = f", {sum(len(fn(b)) for b in bodies) / size:.3f} of the size"
        elif name.startswith("link store: compress"):
            ratio = (f", {sum(len(fn(b)) for b in inputs) / len(inputs):.0f} bytes a page"
                     f" of {sum(map(len, inputs)) / len(inputs):.0f}")
        print(f"{per_page_us(fn, inputs, a.rounds):8.1f} µs  {name}{ratio}")
    if a.beside:
        beside(exchanges, writer, a.rounds)
    return 0


def beside(exchanges: list, writer: WarcWriter, rounds: int) -> None:
    """The extraction's CPU per page (least of rounds, µs) alone and right
    after each part of the WARC records on the same page, the parts
    interleaved round by round so that the machine's drift falls on all."""
    def extract(e: Exchange) -> None:
        extract_page(e.body, e.url, "utf-8", content_type=b"text/html", max_text_chars=10 ** 6)

    def records(e: Exchange) -> None:
        e._sha1 = e._digest = None
        plain = WARCWriter(io.BytesIO(), gzip=False, warc_version="1.1")
        for record, _ in writer.records(plain, e):
            plain.write_record(record)

    date = "2026-01-01T00:00:00.000000Z"
    before = [("alone", None),
              ("WARC records made and written by warcio, gzip apart", records),
              ("gzip of the body (ISA-L)", lambda e: isal_member(e.body)),
              ("SURT of the URL (cdxj.urlkey)", lambda e: urlkey(e.url)),
              ("the response's index fields (cdxj.fields)",
               lambda e: _index_fields("response", e.url, "sha1:X", e.response_head)),
              ("the record id (uuid5)", lambda e: writer.record_id(e.url, date)),
              ("SHA-1 of head and body", lambda e: hashlib.sha1(e.response_head + e.body).digest())]
    best = {name: float("inf") for name, _ in before}
    for _ in range(rounds):
        for name, part in before:
            spent = 0.0
            for e in exchanges:
                if part is not None:
                    part(e)
                t = time.thread_time()
                extract(e)
                spent += time.thread_time() - t
            best[name] = min(best[name], spent / len(exchanges))
    alone = best["alone"]
    print(f"link and text extraction, µs a page: {alone * 1e6:.1f} alone; right after")
    for name, _ in before[1:]:
        print(f"{best[name] * 1e6:8.1f} µs (+{(best[name] - alone) * 1e6:.1f})  {name}")
    # the same work in batches: n pages' records made, then their n extractions
    sizes = (1, 4, 16, 64)
    spent = {n: (float("inf"), float("inf")) for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            made = done = 0.0
            for i in range(0, len(exchanges), n):
                batch = exchanges[i:i + n]
                t = time.thread_time()
                for e in batch:
                    records(e)
                made += time.thread_time() - t
                t = time.thread_time()
                for e in batch:
                    extract(e)
                done += time.thread_time() - t
            spent[n] = min(spent[n], (made / len(exchanges), done / len(exchanges)),
                           key=sum)
    print("records made n pages at a time, then their extractions: µs a page")
    for n, (made, done) in spent.items():
        print(f"{n:5d}  records {made * 1e6:6.1f}  extraction {done * 1e6:6.1f}  "
              f"both {(made + done) * 1e6:6.1f}")


if __name__ == "__main__":
    sys.exit(main())
