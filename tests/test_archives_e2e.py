"""A crawl's WARC files in a real pywb: its own index of them, replay of every
capture, and the project's CDXJ beside pywb's.

Real `scrapy crawl web` workers crawl a small web of URL shapes that web
archives canonicalise (tests/shapesweb.py) with copies that become revisit
records; pywb 2.10 (tests/pywbenv.py) indexes the same WARC files with
``wb-manager add`` and replays them with its ``wayback`` server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from surt import surt as urlkey
from warcio.archiveiterator import ArchiveIterator

from tests import pywbenv
from tests.e2e import ROOT, Workers
from tests.shapesweb import COPIES, FLAKY_COPIES, HEADS, HOST, MISSING, SHAPES, ShapesWeb

pytestmark = pytest.mark.e2e


def captures(files: list[Path]) -> list[dict]:
    """Every response and revisit record of the files, with what a replay of it must give."""
    out = []
    for path in files:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type not in ("response", "revisit"):
                    continue
                h = rec.rec_headers
                out.append({"type": rec.rec_type, "url": h.get_header("WARC-Target-URI"),
                            "date": h.get_header("WARC-Date"), "id": h.get_header("WARC-Record-ID"),
                            "digest": h.get_header("WARC-Payload-Digest"),
                            "refers_to": h.get_header("WARC-Refers-To"),
                            "refers_to_url": h.get_header("WARC-Refers-To-Target-URI"),
                            "refers_to_date": h.get_header("WARC-Refers-To-Date"),
                            "status": int(rec.http_headers.get_statuscode()),
                            "payload": rec.content_stream().read(), "file": path.name})
    return out


@pytest.fixture(scope="module")
def shapes_crawl(redis_server, tmp_path_factory):
    """A finished two-worker crawl of the web of URL shapes, its WARC files
    rotated small so that the collections below mix files."""
    if not redis_server.alive:
        redis_server.restart()
    with redis_server.client() as c:
        c.flushall()
    tmp = tmp_path_factory.mktemp("archives-e2e")
    with ShapesWeb() as web:
        workers = Workers(web, redis_server.url, tmp, [f"http://{HOST}/"], "archives", {
            "FRONTIER_DELAY_FACTOR": 0, "RETRY_TIMES": 2, "WARC_MAX_SIZE": 3000})
        workers.start(2)
        assert workers.wait() == [0, 0], workers.log(0)[-3000:] + workers.log(1)[-3000:]
        records = web.settle_log()
    warc = tmp / "data" / "warc"
    files = sorted(warc.glob("*.warc.gz"))
    assert len(files) >= 6
    return {"tmp": tmp, "warc": warc, "files": files, "records": records,
            "captures": captures(files), "redis_url": redis_server.url}


def own_cdxj(files: list[Path]) -> list[str]:
    """The project's per-file indexes of files, merged and sorted."""
    lines = []
    for f in files:
        lines += f.with_name(f.name[: -len(".warc.gz")] + ".cdxj").read_text().splitlines()
    return sorted(lines)


def test_the_crawl_captured_every_shape_and_wrote_revisits(shapes_crawl):
    caps = shapes_crawl["captures"]
    urls = {c["url"] for c in caps}
    assert {f"http://{HOST}{shape}" for shape in SHAPES} <= urls
    revisits = [c for c in caps if c["type"] == "revisit"]
    assert len(revisits) >= len(COPIES) + len(FLAKY_COPIES) - 1
    assert any(c["status"] == 404 and c["url"].endswith(next(iter(MISSING))) for c in caps)
    # /flaky.html answered 500 before the 200 its copies refer to
    flaky = sorted((c["date"], c["status"]) for c in caps if c["url"] == f"http://{HOST}/flaky.html")
    assert [s for _, s in flaky] == [500, 200]


def test_revisits_refer_to_the_response_record_that_holds_the_payload(shapes_crawl):
    caps = shapes_crawl["captures"]
    by_id = {c["id"]: c for c in caps}
    revisits = [c for c in caps if c["type"] == "revisit"]
    assert revisits
    for r in revisits:
        original = by_id.get(r["refers_to"])
        assert original is not None, r
        assert original["type"] == "response" and original["status"] == 200
        assert original["url"] == r["refers_to_url"]
        assert original["date"] == r["refers_to_date"]
        assert original["digest"] == r["digest"]
    # the copies of /flaky.html name its 200, not the 500 before it
    flaky = [r for r in revisits if r["refers_to_url"] == f"http://{HOST}/flaky.html"]
    assert flaky


def test_cdxj_is_pywbs_own_index_line_for_line(shapes_crawl, tmp_path):
    files = shapes_crawl["files"]
    coll = pywbenv.collection(tmp_path, "all", files, files)
    theirs = pywbenv.own_index(coll)
    ours = own_cdxj(files)
    assert len(theirs) == len(shapes_crawl["captures"])
    assert pywbenv.as_pywb_writes(ours) == theirs
    assert pywbenv.as_pywb_writes(ours) != ours  # the revisits' status, which pywb leaves out
    digests = {json.loads(line.split(" ", 2)[2]).get("digest") for line in ours}
    assert not any(d.startswith("sha1:") for d in digests if d)


@pytest.mark.parametrize("index", ["pywb", "own", "mixed"])
def test_every_capture_replays_in_pywb(shapes_crawl, tmp_path, index):
    """Every response and revisit replays with its own status and payload,
    with pywb's index of the files, with the project's, and with a
    collection whose index mixes both (revisits whose original is indexed
    by the other)."""
    files = shapes_crawl["files"]
    if index == "pywb":
        pywbenv.collection(tmp_path, "c", files, files)
    elif index == "own":
        idx = tmp_path / "own.cdxj"
        idx.write_text("".join(line + "\n" for line in own_cdxj(files)))
        pywbenv.collection(tmp_path, "c", files, [], [idx])
    else:
        idx = tmp_path / "own.cdxj"
        idx.write_text("".join(line + "\n" for line in own_cdxj(files[1::2])))
        pywbenv.collection(tmp_path, "c", files, files[0::2], [idx])
    caps = shapes_crawl["captures"]
    payload_of = {(c["url"], c["digest"]): c["payload"] for c in caps if c["type"] == "response"}
    # A replay is asked for by URL and second: captures of one SURT key in
    # one second (/flaky.html's 500 and 200) are one answer, any of theirs.
    answers = defaultdict(set)
    for c in caps:
        c["stamp"] = "".join(ch for ch in c["date"] if ch.isdigit())[:14]
        want = c["payload"] if c["type"] == "response" else \
            payload_of[(c["refers_to_url"], c["digest"])]
        answers[(urlkey(c["url"]), c["stamp"])].add((c["status"], want))
    wrong = []
    with pywbenv.Wayback(tmp_path) as wb:
        for c in caps:
            status, body = wb.get("c", c["stamp"], c["url"])
            if (status, body) not in answers[(urlkey(c["url"]), c["stamp"])]:
                wrong.append((c["type"], c["url"], c["status"], status, body[:80]))
    assert wrong == [], f"{len(wrong)} of {len(caps)} captures: {wrong[:10]}"
    assert Counter(c["type"] for c in caps)["revisit"] > 0
    shutil.rmtree(tmp_path / "collections")


def scrapy(*args, crawl) -> subprocess.CompletedProcess:
    env = dict(os.environ, CRAWL_DATA_DIR=str(crawl["tmp"] / "data"), CRAWL_ID="archives",
               REDIS_URL=crawl["redis_url"])
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_exported_graph_marks_the_copies(shapes_crawl, tmp_path):
    """urls.parquet's duplicate_of names the page each copy repeats, so the
    copies (crawled, without out-links of their own) are not dangling pages."""
    run = scrapy("export-graph", str(tmp_path / "g"), crawl=shapes_crawl)
    assert run.returncode == 0, run.stderr
    urls = pq.read_table(tmp_path / "g" / "urls.parquet").to_pylist()
    url_of = {u["id"]: u["url"] for u in urls}
    marked = {u["url"]: url_of[u["duplicate_of"]] for u in urls if u["duplicate_of"] is not None}
    revisits = {c["url"]: c["refers_to_url"] for c in shapes_crawl["captures"] if c["type"] == "revisit"}
    assert marked == revisits
    # each group of copies: one original, every other page marked
    groups = {f"http://{HOST}{p}" for p in COPIES + FLAKY_COPIES + ["/orig.html", "/flaky.html"]}
    assert len(set(marked.values())) == 2
    assert set(marked) | set(marked.values()) == groups
    assert all(u["crawled"] for u in urls if u["url"] in marked)


def test_response_heads_are_the_ones_received(shapes_crawl):
    """The WARC response record has the head the server sent: its reason
    phrase, its headers in their order and case, Connection; a chunked body
    is stored de-chunked, so its Transfer-Encoding header is renamed."""
    heads = {}
    for path in shapes_crawl["files"]:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    heads[rec.rec_headers.get_header("WARC-Target-URI")] = (
                        rec.http_headers, rec.rec_headers.get_header("Crawlproj-HTTP-Head"))
    for path, (reason, headers) in HEADS.items():
        http, rebuilt = heads[f"http://{HOST}{path}"]
        assert rebuilt is None
        assert http.statusline == f"200 {reason}"
        sent = [("X-Crawlproj-Transfer-Encoding" if n == "Transfer-Encoding" else n, v) for n, v in headers]
        assert [(n, v) for n, v in http.headers if n not in ("Server", "Date")] == sent
    assert all(rebuilt is None for _, rebuilt in heads.values())
