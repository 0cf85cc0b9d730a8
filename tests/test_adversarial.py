"""The adversarial suite: crawler traps and hostile servers, on loopback.

One crawl with default settings of an ordinary simulated web and, beside it,
every trap host of crawlproj/simweb/traps.py (URL spaces without end,
redirect loops, decompression bombs, endless and dripping responses, huge
headers, a 10 MB page, 100,000 links). Each case is then checked against its
bound from the simulated web's own request log and the worker's stats:

* a URL-space trap costs at most WASTED fetches beyond the pages it has that
  are worth fetching;
* a hostile response is fetched at most 1 + RETRY_TIMES times, cut where it
  must be cut, and the worker's memory stays within MEMORY of its start;
* meanwhile every page of the ordinary web is fetched (the worker kept
  crawling the other hosts), and the worker finishes by itself.

A second crawl, of the default generated web alone (3,000 pages), must meet
no refusal of any trap-guard rule: the defaults are measured there
(docs/hardening.md).

Time is bounded by the worker finishing, never by a clock.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlproj.pipelines.warc import THREAD_BODY
from crawlproj.simweb import checks
from crawlproj.simweb.testing import SimWebServer
from crawlproj.simweb.traps import TRAPS
from tests.e2e import Workers, stat

pytestmark = pytest.mark.e2e

WASTED = 20                  # fetches a trap host may cost
# Growth of a worker's peak RSS over its start. A page costs about 25 times
# its size while lxml holds its tree (alone, measured by bench/traps_bench.py:
# the 10 MB page 240 MB, the 12 MB page of 100,000 links 160 MB); a bomb
# expanded would cost its 1 GiB, endless headers 100 MB a second.
MEMORY = 512 * 1024 * 1024
RETRIES = 1
# An ordinary web of over a thousand pages, and every trap beside it.
WEB = {"seed": 11, "hosts": 60, "pages": 1200, "page_bytes": 4000, "latency_ms": [1, 4],
       "traps": "all"}
# Default settings, but for a short download deadline and politeness wait (a
# dripping host would otherwise hold the test for minutes) and a memory
# reading every second (Scrapy's MemoryUsage extension; its memusage/max is the
# process's peak RSS so far).
SETTINGS = {"DOWNLOAD_TIMEOUT": 5, "RETRY_TIMES": RETRIES, "FRONTIER_DELAY_FACTOR": 2,
            "MEMUSAGE_CHECK_INTERVAL_SECONDS": 1}

URL_TRAPS = sorted(n for n, t in TRAPS.items() if not t.hostile)
HOSTILE = sorted(n for n, t in TRAPS.items() if t.hostile)


def stats_dump(log: str) -> dict[str, int]:
    """Every integer counter of the stats dump at the end of a worker's log."""
    assert "Dumping Scrapy stats" in log, log[-2000:]
    dump = log[log.index("Dumping Scrapy stats"):]
    return {k: int(v) for k, v in re.findall(r"'([^']+)': (\d+)[,}]", dump)}


class Crawl:
    def __init__(self, sw, workers: Workers, codes: list[int]):
        self.sw, self.workers, self.codes = sw, workers, codes
        self.records = sw.settle_log()
        self.by_host = defaultdict(list)
        for r in self.records:
            self.by_host[r["host"]].append(r)
        self.logs = [workers.log(i) for i in range(len(workers.procs))]
        self.stats: dict[str, int] = defaultdict(int)
        for log in self.logs:
            for k, v in stats_dump(log).items():
                self.stats[k] += v

    def paths(self, name: str) -> list[str]:
        return [r["path"] for r in self.by_host[f"{name}.trap.example"]]

    def attempts(self, name: str) -> list[str]:
        """How each download attempt of the trap's entry ended, by the crawl
        log (the status of a response, the err= annotation of a failure)."""
        url = f"http://{name}.trap.example{TRAPS[name].entry}"
        out = []
        for path in (self.workers.tmp / "data" / "logs").glob("*.log"):
            for line in path.read_text().splitlines():
                fields = line.split()
                if fields[3] == url:
                    err = re.search(r"err=([\w-]+)", fields[-1])
                    out.append(err[1] if err else fields[1])
        return out


@pytest.fixture(scope="module")
def crawl(redis_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adversarial")
    with redis_server.client() as c:
        c.flushall()
    with SimWebServer(WEB, log_path=str(tmp / "web.jsonl")) as sw:
        seeds = sw.web.seeds(3) + sw.web.trap_seeds()
        workers = Workers(sw, redis_server.url, tmp, seeds, "adversarial", SETTINGS)
        workers.start(1)
        codes = workers.wait(timeout=600)
        yield Crawl(sw, workers, codes)


def test_the_worker_finishes_and_crawls_the_whole_ordinary_web(crawl):
    assert crawl.codes == [0], crawl.logs[0][-3000:]
    ordinary = crawl.sw.web.reachable(crawl.sw.web.seeds(3))
    assert len(ordinary) >= 1000
    fetched = set(checks.fetch_counts(r for r in crawl.records if not r["host"].endswith(".trap.example")))
    assert fetched == ordinary, sorted(ordinary - fetched)[:5]


@pytest.mark.parametrize("name", URL_TRAPS)
def test_a_url_space_trap_costs_at_most_its_budget_of_fetches(crawl, name):
    paths = crawl.paths(name)
    assert "/" in paths, f"{name}: never entered"
    wasted = crawl.sw.web.traps.wasted(f"{name}.trap.example", paths)
    assert wasted <= WASTED, f"{name}: {wasted} wasted fetches: {paths[:30]}"


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_response_is_fetched_a_bounded_number_of_times(crawl, name):
    paths = crawl.paths(name)
    entry = TRAPS[name].entry
    assert paths.count(entry) >= 1, f"{name}: never fetched {entry}"
    assert paths.count(entry) <= 1 + RETRIES, paths
    assert crawl.sw.web.traps.wasted(f"{name}.trap.example", paths) <= WASTED


def test_hostile_responses_are_cut_at_their_bounds(crawl):
    s = crawl.stats
    # slow-drip, slow-head and silent: each attempt ends at the download
    # deadline (Scrapy's DOWNLOAD_TIMEOUT counts the whole download); endless
    # headers are cut at TRAPGUARD_MAX_HEAD_BYTES, before it; a body that
    # claims or sends more than DOWNLOAD_MAXSIZE is cancelled there (or at the
    # deadline, if the worker is too busy to read 16 MiB before it)
    timeout, failed = {"DownloadTimeoutError"}, {"DownloadFailedError"}
    too_big = {"size-exceeded", "DownloadCancelledError"}
    for name, ends in [("slow-drip", timeout), ("slow-head", timeout), ("silent", timeout),
                       ("endless-head", failed), ("many-headers", failed),
                       ("endless-body", too_big | timeout), ("length-lie", too_big)]:
        attempts = crawl.attempts(name)
        assert attempts and set(attempts) <= ends, (name, attempts)
    # bombs: decompression stopped past DOWNLOAD_MAXSIZE (Scrapy's
    # HttpCompressionMiddleware, in 64 KiB steps), the page dropped
    for name in (n for n in HOSTILE if n.endswith(("bomb", "bomb-twice"))):
        assert f"Ignored response <200 http://{name}.trap.example/bomb> because its body" \
            in "".join(crawl.logs), name
    # the 100,000 links: 10,000 kept by the extractor, each refused by a rule
    assert s["web/links/capped"] >= 90_000
    assert s["trapguard/refused/query_params"] >= 10_000
    # memory: no bomb was expanded, no endless response kept
    growth = s["memusage/max"] - s["memusage/startup"]
    assert 0 < growth < MEMORY, growth


def test_the_10_mb_page_is_in_the_warc_whole(crawl):
    # its records are made in the writer thread (THREAD_BODY), every other
    # page's on the reactor: both kinds end up in the same files, digests right
    url = "http://big-page.trap.example/big"
    bodies = []
    for path in sorted((crawl.workers.tmp / "data" / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, check_digests="raise"):
                if rec.rec_type == "response" and \
                        rec.rec_headers.get_header("WARC-Target-URI") == url:
                    bodies.append(rec.content_stream().read())
    assert bodies and all(len(b) > THREAD_BODY for b in bodies), [len(b) for b in bodies]
    assert crawl.stats["warc/responses"] > 1000


@pytest.mark.parametrize("rule", ["segment_run", "segment_repeats", "path_segments",
                                  "query_params", "near_duplicates"])
def test_each_rule_stops_a_trap_of_its_kind(crawl, rule):
    assert crawl.stats[f"trapguard/refused/{rule}"] > 0


@pytest.mark.slow
def test_no_rule_refuses_anything_on_the_default_generated_web(redis_url, tmp_path):
    with SimWebServer({}, log_path=str(tmp_path / "web.jsonl")) as sw:
        seeds = sw.web.seeds(3)
        reachable = sw.web.reachable(seeds)
        workers = Workers(sw, redis_url, tmp_path, seeds, "benign", {"FRONTIER_DELAY_FACTOR": 2})
        workers.start(2)
        assert workers.wait(timeout=900) == [0, 0]
        fetched = set(checks.fetch_counts(sw.settle_log()))
        assert fetched == reachable and len(reachable) >= 1000
        for i in range(2):
            refused = {k: v for k, v in stats_dump(workers.log(i)).items()
                       if k.startswith("trapguard/refused/")}
            assert refused == {}, refused
            assert stat(workers.log(i), "trapguard/errors") == 0
