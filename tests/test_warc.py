"""The content store's WARC files: records, digests, rotation, CDXJ, crash
repair and write failures, checked with warcio (an independent reader)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse, Request
from surt import surt
from warcio.archiveiterator import ArchiveIterator

from crawlproj.internals import RESPONSE_HEAD
from crawlproj.stores.cdxj import index_file, parse_record, scan, urlkey
from crawlproj.stores.exchange import Exchange, sha1_b32
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import NOT_MODIFIED_PROFILE, OPEN_SUFFIX, WarcWriter, recover, warc_date

ROOT = Path(__file__).resolve().parent.parent


def exchange(url="http://h1.example/p1.html", body=b"<html><a href='x'>x</a></html>", status=200,
             headers=None):
    req = Request(url, headers={"User-Agent": "crawlproj-test", "Accept-Encoding": "gzip"},
                  meta={"depth": 1})
    resp = HtmlResponse(url, status=status, body=body, request=req,
                        headers=headers or {"Content-Type": "text/html; charset=utf-8"})
    return Exchange.capture(req, resp, time.time() - 0.05, time.time())


def records(path: Path):
    """(type, target URI, headers, content) of every record, digests checked."""
    out = []
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"),
                        rec.rec_headers, rec.content_stream().read()))
    return out


def test_request_response_pairs_with_digests(tmp_path):
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    ex1 = exchange()
    ex2 = exchange("http://h2.example/gone", b"not here", 404,
                   {"Content-Type": "text/plain", "Transfer-Encoding": "chunked"})
    w.write(ex1)
    w.write(ex2)
    w.close()
    (name,) = [p for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    assert not [p for p in os.listdir(tmp_path) if p.endswith(OPEN_SUFFIX)]
    recs = records(tmp_path / name)
    assert [r[0] for r in recs] == ["warcinfo", "response", "request", "response", "request"]
    assert recs[0][2].protocol == "WARC/1.1"
    resp = recs[1][2]
    assert resp.get_header("WARC-Payload-Digest") == sha1_b32(ex1.body)
    assert resp.get_header("WARC-Block-Digest")
    assert recs[1][3] == ex1.body
    # the request record is tied to its response
    assert recs[2][2].get_header("WARC-Concurrent-To") == resp.get_header("WARC-Record-ID")
    # a de-chunked body must not claim to be chunked
    with open(tmp_path / name, "rb") as f:
        resp404 = [r for r in ArchiveIterator(f) if r.rec_type == "response"][1]
        assert resp404.http_headers.get_statuscode() == "404"
        assert resp404.http_headers.get_header("Transfer-Encoding") is None
        assert resp404.http_headers.get_header("X-Crawlproj-Transfer-Encoding") == "chunked"
        # a Response made without Scrapy's HTTP/1.1 handler: its head is rebuilt, and says so
        assert resp404.rec_headers.get_header("Crawlproj-HTTP-Head") == "rebuilt"


def test_head_as_received_is_kept():
    raw = (b"HTTP/1.1 200 Fine\r\nx-b: 1\r\nTRANSFER-ENCODING: chunked\r\nConnection: close\r\n"
           b"X-A: 2\r\n\r\n")
    req = Request("http://h1.example/", meta={RESPONSE_HEAD: raw})
    resp = HtmlResponse("http://h1.example/", status=200, body=b"x", request=req)
    ex = Exchange.capture(req, resp, time.time(), time.time())
    assert not ex.head_rebuilt
    assert ex.response_head == raw.replace(b"TRANSFER-ENCODING", b"X-Crawlproj-Transfer-Encoding")
    # a head of another status (an interim 1xx) is not this response's
    req = Request("http://h1.example/", meta={RESPONSE_HEAD: b"HTTP/1.1 100 Continue\r\n\r\n"})
    ex = Exchange.capture(req, HtmlResponse(req.url, body=b"x", request=req), time.time(), time.time())
    assert ex.head_rebuilt and ex.response_head.startswith(b"HTTP/1.1 200 OK\r\n")


def test_record_block_is_the_head_as_received_byte_for_byte(tmp_path):
    """The response record's block is the head exactly as it came off the
    wire (no space after a colon, a Latin-1 byte, header case and order),
    then the body; warcio reads the record and its digests check."""
    raw = (b"HTTP/1.1 200 Fine\r\nx-b:1\r\nX-Name: caf\xe9\r\nContent-Type: text/html\r\n"
           b"Set-Cookie: a=1\r\nset-cookie: b=2\r\n\r\n")
    req = Request("http://h1.example/", meta={RESPONSE_HEAD: raw})
    body = b"<html>caf\xc3\xa9</html>"
    ex = Exchange.capture(req, HtmlResponse(req.url, body=body, request=req), time.time(), time.time())
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    w.write(ex)
    w.close()
    (name,) = [p for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    recs = records(tmp_path / name)  # digests checked by warcio
    assert [r[0] for r in recs] == ["warcinfo", "response", "request"]
    assert recs[1][3] == body
    with open(tmp_path / name, "rb") as f:
        blocks = [parse_record(m.record)[1] for m in scan(f)]
    assert blocks[1] == raw + body
    assert blocks[2] == ex.request_head


def test_index_made_while_writing_is_the_index_read_from_the_file(tmp_path):
    """The CDXJ lines written with a file (made from the exchange, as the
    records are serialised) are the lines an index of the finished file has
    (cdxj.index_file reads every record back): responses, revisits of both
    profiles, a record without Content-Type, a rebuilt head, a file rotated
    in the middle of a batch."""
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=4000)
    orig = exchange("http://h1.example/orig.html", b"same" * 300)
    batch = [(orig, None),
             (exchange("http://h1.example/copy.html?b=2&a=%7e", orig.body),
              {"url": orig.url, "date": warc_date(orig.started)}),
             (exchange("http://h1.example/undated.html", orig.body), {"url": orig.url}),
             (exchange("http://h1.example/same", b"", status=304),
              {"url": "http://h1.example/same", "profile": NOT_MODIFIED_PROFILE}),
             (exchange("http://h1.example/none", b"x", status=404, headers={"Server": "t"}), None)]
    batch += [(exchange(f"http://h2.example/p{i}", os.urandom(900)), None) for i in range(8)]
    assert w.write_many(batch) == [None] * len(batch)
    w.close()
    warcs = sorted(p for p in os.listdir(tmp_path) if p.endswith(".warc.gz"))
    assert len(warcs) > 1
    lines = 0
    for name in warcs:
        written = (tmp_path / name.replace(".warc.gz", ".cdxj")).read_text().splitlines()
        with open(tmp_path / name, "rb") as f:
            assert written == index_file(f, name)
        lines += len(written)
        records(tmp_path / name)  # every digest checks
    assert lines == len(batch)


def test_warcio_check_command_passes(tmp_path):
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    for i in range(5):
        w.write(exchange(f"http://h1.example/p{i}.html", b"x" * (1000 * i)))
    w.close()
    files = [str(tmp_path / p) for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    run = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", *files],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "digest pass" in run.stdout


def test_rotation_names_and_cdxj(tmp_path):
    w = WarcWriter(LocalStorage(tmp_path), "my crawl", "w1", max_size=3000)
    urls = [f"http://h{i % 3}.example/p{i}.html" for i in range(12)]
    for u in urls:
        w.write(exchange(u, os.urandom(700)))
    w.close()
    warcs = sorted(p for p in os.listdir(tmp_path) if p.endswith(".warc.gz"))
    assert len(warcs) > 2
    serials = [int(n.split("-")[2]) for n in warcs]
    assert sorted(serials) == list(range(1, len(warcs) + 1))
    assert all(n.startswith("my_crawl-") for n in warcs)
    seen = []
    for name in warcs:
        assert os.path.getsize(tmp_path / name) < 3000 + 2000  # one pair past the limit at most
        recs = records(tmp_path / name)
        assert recs[0][0] == "warcinfo"
        cdxj = (tmp_path / name.replace(".warc.gz", ".cdxj")).read_text().splitlines()
        assert cdxj == sorted(cdxj)
        for line in cdxj:
            key, stamp, fields = line.split(" ", 2)
            fields = json.loads(fields)
            assert key == surt(fields["url"]) and len(stamp) == 14
            with open(tmp_path / fields["filename"], "rb") as f:
                f.seek(int(fields["offset"]))
                rec = next(iter(ArchiveIterator(f)))
                assert rec.rec_headers.get_header("WARC-Target-URI") == fields["url"]
                assert rec.rec_headers.get_header("WARC-Payload-Digest") == "sha1:" + fields["digest"]
            seen.append(fields["url"])
    assert sorted(seen) == sorted(urls)


def test_revisit_record(tmp_path):
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    ex = exchange("http://h1.example/copy.html")
    orig = exchange("http://h1.example/orig.html", ex.body)
    w.write(orig)
    w.write(ex, revisit_of={"url": orig.url, "date": warc_date(orig.started)})
    w.close()
    (name,) = [p for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    rec = [r for r in records(tmp_path / name) if r[0] == "revisit"][0]
    (original,) = [r for r in records(tmp_path / name) if r[0] == "response"]
    h = rec[2]
    assert h.get_header("WARC-Profile").endswith("/warc/1.1/revisit/identical-payload-digest")
    assert h.get_header("WARC-Refers-To-Target-URI") == "http://h1.example/orig.html"
    # the response record holding the payload, by its id and its exact date
    assert h.get_header("WARC-Refers-To") == original[2].get_header("WARC-Record-ID")
    assert h.get_header("WARC-Refers-To-Date") == original[2].get_header("WARC-Date")
    assert h.get_header("WARC-Payload-Digest") == sha1_b32(ex.body)
    assert ex.body not in rec[3]  # headers only
    line = (tmp_path / name.replace(".warc.gz", ".cdxj")).read_text()
    assert '"mime": "warc/revisit"' in line


def test_a_noarchive_page_is_kept_marked_and_left_out_of_replay(tmp_path):
    """noarchive (crawlproj/robots/meta.py): the record is written, whole and
    valid, with the mark; the CDXJ index made while writing and the one
    made again from the file (`scrapy cdx --rebuild`) both leave it out."""
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    kept, hidden = exchange("http://h1.example/kept.html"), exchange("http://h1.example/hidden.html")
    hidden.noarchive = True
    w.write(kept)
    w.write(hidden)
    w.close()
    (name,) = [p for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    responses = {r[1]: r for r in records(tmp_path / name) if r[0] == "response"}
    assert set(responses) == {kept.url, hidden.url}
    assert responses[hidden.url][3].endswith(hidden.body)
    assert responses[hidden.url][2].get_header("Crawlproj-Robots") == "noarchive"
    assert responses[kept.url][2].get_header("Crawlproj-Robots") is None
    written = (tmp_path / name.replace(".warc.gz", ".cdxj")).read_text().splitlines()
    with open(tmp_path / name, "rb") as f:
        again = index_file(f, name)
    for lines in (written, again):
        assert [json.loads(x.split(" ", 2)[2])["url"] for x in lines] == [kept.url]


def test_dates_are_the_ones_datetime_makes_of_the_same_time():
    """A revisit names its first capture's record by the date the first
    writer made of the fetch's start time: the formatting cached per second
    must round the microseconds exactly as datetime.fromtimestamp does
    (half to even), at every half-microsecond edge."""
    import random
    from datetime import datetime, timezone

    from crawlproj.stores.crawllog import _iso_ms, _stamp17

    rnd = random.Random(7)
    times = [rnd.uniform(0, 4e9) for _ in range(20000)]
    times += [1.7e9 + k / 1e6 + 0.5e-6 for k in range(2000)]   # halves, both ways
    times += [1.7e9 + 0.9999995, 1.7e9 + 0.99999949, 0.0, 59.9999996, 1e9 + 0.5e-6]
    for t in times:
        d = datetime.fromtimestamp(t, timezone.utc)
        assert warc_date(t) == d.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), t
        assert _iso_ms(t) == d.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z", t
        assert _stamp17(t) == d.strftime("%Y%m%d%H%M%S%f")[:17], t


def test_urlkey_is_the_web_archives_key():
    """The keys pywb and the Wayback Machine look these URLs up by."""
    assert urlkey("http://www.Example.com:80/A/b.html?b=2&a=1") == "com,example)/a/b.html?a=1&b=2"
    assert urlkey("http://h1.example:8080/") == "example,h1:8080)/"
    assert urlkey("http://h1.example/s1/") == "example,h1)/s1"
    assert urlkey("http://h1.example/%7Euser/") == "example,h1)/~user"
    assert urlkey("http://www2.h1.example/a.html") == "example,h1)/a.html"
    assert urlkey("http://h1.example/q.html?b") == "example,h1)/q.html?b"
    assert urlkey("http://h1.example/p.html?x=1+2&y=a%20b") == "example,h1)/p.html?x=1+2&y=a%20b"
    assert urlkey("http://h1.example/d//e.html") == "example,h1)/d/e.html"
    assert urlkey("http://h1.example/a.html?jsessionid=0123456789ABCDEF0123456789ABCDEF&x=1") \
        == "example,h1)/a.html?x=1"
    assert urlkey("urn:x-crawlproj:a") == "urn:x-crawlproj:a"


def test_record_ids_name_a_capture_and_are_unique_otherwise(tmp_path):
    """A response record's id is a name-based UUID of the crawl, the date and
    the URL (so a revisit by any worker can name it); other records' ids are
    random UUIDs, never repeated."""
    import uuid

    writer = WarcWriter(LocalStorage(Path("/nonexistent")), "crawl é", "h:1:x", 1 << 20)
    date = warc_date(1.7e9)
    rid = writer.record_id("http://h.example/ü?q=%20", date)
    assert rid == writer.record_id("http://h.example/ü?q=%20", date)
    assert rid != writer.record_id("http://h.example/ü?q=%20", warc_date(1.7e9 + 1))
    assert uuid.UUID(rid[len("<urn:uuid:"):-1]).version == 5
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    orig = exchange("http://h1.example/orig.html")
    w.write(orig)
    for i in range(300):
        w.write(exchange(f"http://h1.example/copy{i}.html", orig.body),
                revisit_of={"url": orig.url, "date": warc_date(orig.started)})
    w.close()
    (name,) = [p for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    ids = [(t, h.get_header("WARC-Record-ID")) for t, _, h, _ in records(tmp_path / name)]
    assert [i for t, i in ids if t == "response"] == [w.record_id(orig.url, warc_date(orig.started))]
    others = [i for t, i in ids if t != "response"]  # warcinfo, requests, revisits
    assert len(others) == 2 + 2 * 300 and len(set(others)) == len(others)
    assert all(uuid.UUID(i[len("<urn:uuid:"):-1]).version == 4 for i in others)


def _shapes_warc(directory):
    """A WARC of records whose index fields have rules of their own: no
    Content-Type (unk), a type with parameters and capitals, a 204, a
    redirect, revisits of both profiles (a copy; a 304), a URL with a query
    and escapes. Its path and the index the writer wrote with it."""
    w = WarcWriter(LocalStorage(directory), "c1", "w1", max_size=1 << 30)
    orig = exchange("http://h1.example/orig.html", b"same")
    w.write(orig)
    w.write(exchange("http://h1.example/copy.html?b=2&a=%7e", b"same"),
            revisit_of={"url": orig.url, "date": warc_date(orig.started)})
    w.write(exchange("http://h1.example/same", b"", status=304),
            revisit_of={"url": "http://h1.example/same", "profile": NOT_MODIFIED_PROFILE})
    w.write(exchange("http://h1.example/none", b"x", headers={"Server": "t"}))
    w.write(exchange("http://h1.example/T.CSV", b"a,b", headers={"Content-Type": "Text/CSV ;q=1"}))
    w.write(exchange("http://h1.example/empty", b"", status=204))
    w.write(exchange("http://h1.example/old", b"", status=301, headers={"Location": "/new"}))
    w.close()
    (warc,) = directory.glob("*.warc.gz")
    return warc, warc.with_name(warc.name[: -len(".warc.gz")] + ".cdxj").read_text().splitlines()


def test_cdxj_is_what_cdxj_indexer_writes_for_the_same_records(tmp_path):
    """The per-file index equals cdxj-indexer's (webrecorder's) line for line,
    sorted, revisits with their status too; but the digest is bare base32
    where cdxj-indexer prefixes it with sha1:, and a response without a
    Content-Type has the mime unk, as in pywb's index (pywb reads both)."""
    warc, ours = _shapes_warc(tmp_path)
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "cdxj-indexer"), str(warc)],
                         capture_output=True, text=True, cwd=warc.parent)
    assert run.returncode == 0, run.stderr
    theirs = sorted(line.replace('"digest": "sha1:', '"digest": "')
                    for line in run.stdout.splitlines())
    assert [line.replace('"mime": "unk", ', "") for line in ours] == theirs
    assert sum('"status": "' in line for line in ours if "warc/revisit" in line) == 2


def test_cdxj_is_what_pywb_writes_for_the_same_records_but_a_revisits_status(tmp_path):
    """pywb's own index (wb-manager add) has the same lines, but for the status
    it leaves out of a revisit's."""
    from tests import pywbenv
    warc, ours = _shapes_warc(tmp_path / "warc")
    (tmp_path / "pywb").mkdir()
    coll = pywbenv.collection(tmp_path / "pywb", "c", [warc], [warc])
    revisits = [line for line in ours if "warc/revisit" in line]
    assert len(revisits) == 2 and len(ours) == 7
    assert pywbenv.own_index(coll) == pywbenv.as_pywb_writes(ours)


# -- crash repair ---------------------------------------------------------------

WRITER = """
import sys, time
sys.path.insert(0, %(root)r)
from tests.test_warc import exchange
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import WarcWriter
w = WarcWriter(LocalStorage(%(dir)r), "c1", "w1", max_size=1 << 40)
i = 0
while True:
    w.write(exchange("http://h1.example/p%%d.html" %% i, b"y" * 30000))
    i += 1
    if i == 20:
        print("ready", flush=True)
"""


@pytest.mark.faults
def test_an_open_files_index_is_in_the_spool_as_its_records_are_written(tmp_path):
    """A worker holds none of its open file's index lines (a 1 GiB file has
    some 185,000 of them): each batch's go to NAME.cdxj.open as it is
    written, and the published index is that file sorted."""
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    batch = [(exchange(f"http://h{i % 3}.example/p{i}", os.urandom(100)), None) for i in range(6)]
    for one in (batch[:2], batch[2:]):
        assert w.write_many(one) == [None] * len(one)
        (spool,) = [n for n in os.listdir(tmp_path) if n.endswith(".cdxj" + OPEN_SUFFIX)]
        assert len((tmp_path / spool).read_text().splitlines()) == batch.index(one[-1]) + 1
    w.close()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(OPEN_SUFFIX)]
    (name,) = [n for n in os.listdir(tmp_path) if n.endswith(".warc.gz")]
    written = (tmp_path / name.replace(".warc.gz", ".cdxj")).read_text().splitlines()
    with open(tmp_path / name, "rb") as f:
        assert written == sorted(written) == index_file(f, name)
    assert len(written) == len(batch)


def test_kill9_leaves_a_file_the_next_start_repairs(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", WRITER % {"root": str(ROOT), "dir": str(tmp_path)}],
                         stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    (left,) = [n for n in os.listdir(tmp_path) if n.endswith(".warc.gz" + OPEN_SUFFIX)]
    # whatever the kill interrupted, a partial record at the end is cut off:
    # make sure there is one by appending half a record
    with open(tmp_path / left, "ab") as f:
        f.write(open(tmp_path / left, "rb").read()[200:9000])
    done = recover(LocalStorage(tmp_path))
    assert len(done) == 1 and "cut" in done[0][1]
    name = left[: -len(OPEN_SUFFIX)]
    assert not (tmp_path / left).exists()
    recs = records(tmp_path / name)  # every remaining record is whole and checks
    assert len(recs) >= 1 + 2 * 20 and recs[0][0] == "warcinfo"
    index = (tmp_path / name.replace(".warc.gz", ".cdxj")).read_text().splitlines()
    assert len(index) == sum(1 for r in recs if r[0] == "response")
    assert not [n for n in os.listdir(tmp_path) if n.endswith(OPEN_SUFFIX)]  # its index's too


def test_unreadable_open_file_is_set_aside_and_locked_file_left_alone(tmp_path):
    (tmp_path / "junk.warc.gz.open").write_bytes(b"\x1f\x8b\x08garbage")
    live = WarcWriter(LocalStorage(tmp_path), "c1", "live", max_size=1 << 30)
    live.write(exchange())
    live_file = live.current.path
    done = recover(LocalStorage(tmp_path))
    assert [n for n, _ in done] == ["junk.warc.gz"]
    assert (tmp_path / "damaged" / "junk.warc.gz").exists()
    assert live_file.exists()  # a running writer's file is not touched
    live.close()
    assert not live_file.exists()


# -- write failures -------------------------------------------------------------

def _limited_writer(tmp_path, limit):
    """Write until RLIMIT_FSIZE refuses (EFBIG) in a child process; report what it saw."""
    code = f"""
import sys, resource, errno, json
sys.path.insert(0, {str(ROOT)!r})
from tests.test_warc import exchange
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import WarcWriter
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
w = WarcWriter(LocalStorage({str(tmp_path)!r}), "c1", "w1", max_size=1 << 40)
ok = 0
err = None
for i in range(200):
    try:
        w.write(exchange("http://h1.example/p%d.html" % i, bytes(range(256)) * 40))
        ok += 1
    except OSError as exc:
        err = exc.errno
        break
again = None
try:
    w.write(exchange("http://h1.example/after.html"))
except OSError as exc:
    again = exc.errno
print(json.dumps({{"ok": ok, "errno": err, "again": again, "path": str(w.current.path)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.faults
def test_batch_past_the_file_limit_is_reported_exchange_by_exchange(tmp_path):
    """Batches of exchanges written until RLIMIT_FSIZE refuses: every
    exchange reported written has its records whole in the file, and none
    reported failed has any."""
    code = f"""
import sys, resource, json
sys.path.insert(0, {str(ROOT)!r})
from tests.test_warc import exchange
from crawlproj.stores.storage import LocalStorage
from crawlproj.stores.warc import WarcWriter
resource.setrlimit(resource.RLIMIT_FSIZE, (60000, 60000))
w = WarcWriter(LocalStorage({str(tmp_path)!r}), "c1", "w1", max_size=1 << 40)
results = []
for b in range(20):
    batch = [(exchange("http://h1.example/p%d-%d.html" % (b, i), bytes(range(256)) * 8 * (i + 1)), None)
             for i in range(5)]
    results += [None if e is None else e.errno for e in w.write_many(batch)]
print(json.dumps({{"results": results, "path": str(w.current.path)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    import errno
    written = [i for i, e in enumerate(res["results"]) if e is None]
    assert written and len(written) < len(res["results"])
    assert set(res["results"][len(written):]) == {errno.EFBIG}  # nothing after the first failure
    with open(res["path"], "rb") as f:
        urls = [r.rec_headers.get_header("WARC-Target-URI")
                for r in ArchiveIterator(f, check_digests="raise") if r.rec_type == "response"]
    assert urls == [f"http://h1.example/p{i // 5}-{i % 5}.html" for i in written]


@pytest.mark.faults
def test_full_file_limit_never_leaves_half_a_record(tmp_path):
    import errno
    res = _limited_writer(tmp_path, 60_000)
    assert res["errno"] == errno.EFBIG and res["ok"] > 0
    assert res["again"] == errno.EFBIG  # refused whole afterwards, not retried in part
    # the file holds exactly the records written before the failure, all whole
    path = Path(res["path"])
    with open(path, "rb") as f:
        recs = [r.rec_type for r in ArchiveIterator(f, check_digests="raise")]
    assert recs.count("response") == res["ok"]
    assert os.path.getsize(path) <= 60_000


def test_every_exchange_of_a_batch_gets_its_result(tmp_path):
    # the pipeline fires each page's write by its place in the results: one
    # missing would hold that page's lease for ever
    w = WarcWriter(LocalStorage(tmp_path), "c1", "w1", max_size=1 << 30)
    made = w.members(exchange())
    assert w.append_many([made, [], made]) == [None, None, None]
    assert w.append_many([[]]) == [None]
    w.close()
    (name,) = [p for p in os.listdir(tmp_path) if p.endswith(".warc.gz")]
    assert [r[0] for r in records(tmp_path / name)] == ["warcinfo"] + ["response", "request"] * 2


GATHER = r"""
import json, sys, time
from scrapy.http import HtmlResponse, Request
from scrapy.utils.test import get_crawler
from twisted.internet import reactor
from crawlproj.components import register
from crawlproj.pipelines.warc import WarcPipeline
from crawlproj.stores.common import WorkerId
from crawlproj.stores.exchange import Exchange
from crawlproj.stores.signals import exchange_recorded
from settings import base

settings = {k: getattr(base, k) for k in dir(base) if k.isupper()}
# no extension and no downloader middleware: the project's reach Redis (an
# embedded server, started in the checkout's .crawlproj, would outlive the test)
settings.update(CRAWL_ID="gather", WARC_DIR=sys.argv[1], PAGEMETA_ENABLED=False,
                WARC_GATHER=float(sys.argv[2]), EXTENSIONS={}, DOWNLOADER_MIDDLEWARES={},
                DOWNLOADER_MIDDLEWARES_BASE={}, CRAWL_DATA_DIR=sys.argv[1] + "/data")
crawler = get_crawler(settings_dict=settings)
register(crawler, WorkerId("h:1:gather"))  # a scheduler's id
pipeline = WarcPipeline.from_crawler(crawler)
if sys.argv[4] == "downloading":
    # a download that stays in flight: its transfer began and has not ended
    from scrapy import signals
    crawler.signals.send_catch_log(signals.request_reached_downloader,
                                   request=Request("http://h2.example/slow.html"))
pipeline.open_spider()

def record(i):  # a 404: written at once, no item to wait for
    url = f"http://h1.example/gone{i}.html"
    req = Request(url)
    resp = HtmlResponse(url, status=404, body=b"<html>gone</html>", request=req)
    crawler.signals.send_catch_log(exchange_recorded,
                                   exchange=Exchange.capture(req, resp, time.time(), time.time()))

for i in range(5):  # five responses in five reactor turns, 40 ms apart
    reactor.callLater(0.04 * i, record, i)

async def close():
    await pipeline.close_spider()
    reactor.stop()

from twisted.internet.defer import Deferred
reactor.callLater(float(sys.argv[3]), lambda: Deferred.fromCoroutine(close()))
reactor.run()
print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("warc/")}))
"""


@pytest.mark.parametrize("gather,downloads,batches", [
    (0.5, "downloading", 1), (0.0, "downloading", 5), (0.5, "idle", 5)])
def test_responses_recorded_within_the_gather_window_are_written_in_one_batch(
        tmp_path, gather, downloads, batches):
    """WARC_GATHER: what is recorded within it, while a download is in flight,
    is made and written together, in the order recorded; with 0, or with no
    download on its way (nothing could join the batch), each reactor turn's
    responses are a batch."""
    run = subprocess.run([sys.executable, "-c", GATHER, str(tmp_path), str(gather), "1.0",
                          downloads], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stdout.strip().splitlines()[-1])
    assert stats["warc/batches"] == batches
    assert stats["warc/responses"] == 5
    (path,) = tmp_path.glob("*.warc.gz")
    assert [uri for t, uri, _, _ in records(path) if t == "response"] == [
        f"http://h1.example/gone{i}.html" for i in range(5)]


def test_close_writes_what_is_gathered_without_waiting_out_the_window(tmp_path):
    """A spider closing within a long WARC_GATHER: the gathered records are
    written at once (the child would run past the test's timeout otherwise)."""
    run = subprocess.run([sys.executable, "-c", GATHER, str(tmp_path), "3600", "0.5",
                          "downloading"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stdout.strip().splitlines()[-1])
    assert stats["warc/responses"] == 5 and stats["warc/batches"] == 1


@pytest.mark.e2e
def test_a_crawl_with_one_request_at_a_time_does_not_wait_out_the_gather_window(redis_url,
                                                                               tmp_path):
    """A page's URL lease ends once its records are written, and with one
    request at a time nothing else is on its way to join them: the window
    closes at once. With the hour-long window waited on every page the crawl
    could not finish within the workers' timeout."""
    from crawlproj.simweb import checks
    from crawlproj.simweb.testing import SimWebServer
    from tests.e2e import Workers, stat

    web = {"seed": 3, "hosts": 5, "pages": 30, "p_redirect": 0, "p500": 0,
           "robots_fraction": 0, "crawl_delay_fraction": 0}
    with SimWebServer(web, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(1)
        workers = Workers(sw, redis_url, tmp_path, seeds, "gather-one", {
            "CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1, "FRONTIER_DELAY_FACTOR": 0,
            "WARC_GATHER": 3600})
        workers.start(1)
        assert workers.wait(timeout=120) == [0]
        log = workers.log(0)
        fetched = checks.fetch_counts(sw.read_log())
        assert set(fetched) == sw.web.reachable(seeds)
        # robots.txt of each host is recorded too
        assert stat(log, "warc/responses") >= len(fetched)
        assert stat(log, "warc/batches") >= len(fetched)
