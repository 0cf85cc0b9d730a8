"""The similarity prioritizer (Cho et al. 1998 §2 IS'(P), §7 hot queue):
scores of real requests built the way the spider and the link context build
them, the IDF estimated from pages seen (crawl-wide in Redis), the settings'
bad values, and a live crawl of the topical simulated web."""

from __future__ import annotations

import pytest
import redis
from scrapy import Request
from scrapy.http import HtmlResponse

from crawlproj.extract import extract_page
from crawlproj.frontier import codec
from crawlproj.frontier.admission import admit
from crawlproj.frontier.frontier import Batch
from crawlproj.prioritizers.linkcontext import LinkContextMiddleware
from crawlproj.prioritizers.similarity import (
    MAX_QUERY_CHARS,
    DocumentFrequencies,
    SimilarityOrder,
    SimilarityQueryError,
)
from crawlproj.redis.keyspace import Keyspace
from crawlproj.simweb import checks
from crawlproj.simweb.model import SimWeb
from crawlproj.simweb.testing import SimWebServer
from tests.e2e import Workers
from tests.test_bad_inputs import crawl, one_line
from tests.test_frontier import lease, make, release

PAGE = """<html><head><title>{title}</title></head><body><p>{text}</p><ul>
<li><a href="/hot">all about {q}</a> and more</li>
<li><a href="/near">elsewhere</a> read on for {q} {q}</li>
<li><a href="/{q}-guide.html">guide</a></li>
<li><a href="/plain">nothing here</a></li>
</ul></body></html>"""


def links_of(order, body: str, url: str = "http://a.example/", meta=None):
    """The requests a page yields, through the spider's extraction, the
    page_parsed hook and the link context middleware: {path: request}."""
    request = Request(url, meta=dict(meta or {}))
    response = HtmlResponse(url, body=body.encode(), encoding="utf-8", request=request)
    page = extract_page(response.body, url)
    order.page_parsed(response, page.title, page.text)
    out = [Request(u, meta={"link_text": (a, page.around.get(u, ""))}) for u, a in page.links]
    LinkContextMiddleware._annotate(response, out)
    return {r.url.split("/", 3)[3]: r for r in out}


def test_hot_queue_then_near_a_hot_page_then_by_similarity():
    order = SimilarityOrder("jazz", hot_hops=3, hot_count=5)
    # a page that is not hot itself (one mention), reached 3 links from a hot page
    far = links_of(order, PAGE.format(title="t", text="x", q="jazz"), meta={"hot_hops": 3})
    scores = {k: order.score(r) for k, r in far.items()}
    # anchor holds the query, or the URL does: the hot queue, before the rest
    assert scores["hot"] < scores["near"] and scores["jazz-guide.html"] < scores["near"]
    # no link of a page 3 hops away is near one; the text around "near" ranks it
    assert scores["near"] < scores["plain"]
    assert far["plain"].meta.get("hot_hops") is None
    # a hot page (query 5 times in its text): its links are one hop from it
    hot = links_of(order, PAGE.format(title="t", text="jazz " * 5, q="jazz"))
    hs = {k: order.score(r) for k, r in hot.items()}
    assert hot["plain"].meta["hot_hops"] == 1
    assert hs["plain"] < scores["near"]  # near a hot page beats any non-hot IS'
    assert hs["hot"] < hs["plain"]  # the hot queue still first
    # a seed (no link context) keeps a place; a retry keeps its score
    assert order.score(Request("http://s.example/")) > hs["hot"]
    assert order.score(Request("http://s.example/", meta={"frontier_score": -5.0})) == -5.0


def served(frontier, order, *pages) -> list[str]:
    """The pages' links through admission into a real frontier (each page's
    links in one call, as a worker sends them), then leased one at a time:
    their paths in the order served."""
    for body in pages:
        entries = [admit(frontier, order, r, None, 2083)[1] for r in links_of(order, body).values()]
        frontier.sync({0: Batch(enqueue=entries)})
    out = []
    while got := lease(frontier, 1):
        out.append(codec.decode(got[0].payload, host=got[0].host).url.split("/", 3)[3])
        release(frontier, got)
    return out


def nav(paths, anchor=lambda p: f"see {p}") -> str:
    items = "".join(f'<li><a href="/{p}">{anchor(p)}</a></li>' for p in paths)
    return f"<html><head><title>t</title></head><body><ul>{items}</ul></body></html>"


def test_links_nothing_tells_apart_are_served_in_the_order_found(redis_url):
    """Cho's queues are FIFO: among links of one class and IS', the first
    found goes first, down to a page's own order (its links are scored
    within a millisecond)."""
    paths = [f"p{i:02d}" for i in range(40)]
    order = SimilarityOrder("jazz")
    assert served(make(redis_url, "fifo"), order, nav(paths)) == paths


def test_a_later_link_whose_anchor_holds_the_query_puts_a_queued_url_in_the_hot_queue(redis_url):
    """Cho's hot queue holds the URLs "seen in an anchor mentioning" the
    query: a URL first found under another anchor (a hub's link to it) goes
    ahead once a page links it with the query in its anchor."""
    paths = ["a", "b", "target", "c"]
    order = SimilarityOrder("jazz")
    hub = nav(paths)
    index = nav(["target", "d"], anchor=lambda p: "jazz records" if p == "target" else "other")
    got = served(make(redis_url, "hotlater"), order, hub, index)
    assert got[0] == "target", got
    assert sorted(got) == sorted(paths + ["d"])


def test_the_words_of_an_identifier_are_words_as_the_index_reads_them():
    """The session's query runs on the crawl's index, which cuts mod_deflate
    into mod and deflate (tantivy's default tokenizer); the order reads
    anchors and URLs alike, so a link named by identifiers is in the hot
    queue."""
    order = SimilarityOrder("deflate howto")
    sim, hot = order.estimate("Apache Module mod_deflate", "", "http://a.example/ssl_howto.html")
    assert hot and sim > 0
    assert SimilarityOrder("ssl_howto").terms == ["ssl", "howto"]
    # letters and digits stay together, as in the index: sqlite3 is not sqlite
    assert order.estimate("sqlite3", "", "http://a.example/x")[0] == 0.0


def test_idf_from_the_pages_seen_so_far_is_shared_by_workers(redis_url):
    r = redis.Redis.from_url(redis_url)
    key = Keyspace("sim", 1).similarity_df
    workers = [SimilarityOrder("common rare", frequencies=DocumentFrequencies(
        ["common", "rare"], r, key)) for _ in range(2)]
    link = {w: Request(f"http://b.example/{w}", meta={"link_context": (
        None, 2, "a.example", f"about {w}", "", None)}) for w in ("common", "rare")}
    # nothing seen: both words weigh the same
    a = workers[0]
    assert a.score(link["common"]) == pytest.approx(a.score(link["rare"]), abs=1.0)
    for i in range(9):  # "common" on every page, "rare" on one
        links_of(workers[i % 2], PAGE.format(title="t", text="common" + " rare" * (i == 0),
                                             q="zzz"))
    # both workers see all 9 pages, wherever they were parsed
    assert [w.frequencies.pages for w in workers] == [9, 8]
    workers[1].frequencies.add(set())
    assert workers[1].frequencies.pages == 10
    assert workers[1].frequencies.df == {"common": 9, "rare": 1}
    assert r.hget(key, "common") == b"9"
    for w in workers:
        assert w.frequencies.idf("rare") > w.frequencies.idf("common") + 1
    # the rare word's link now ranks first: its IS' is higher
    b = workers[1]
    assert b.score(link["rare"]) < b.score(link["common"]) - 1e9


def test_query_words_and_limits():
    assert SimilarityOrder("Jazz,  jazz BLUES").terms == ["jazz", "blues"]
    for bad in ("", "   ", "!!", None):
        with pytest.raises(SimilarityQueryError, match="needs SIMILARITY_QUERY"):
            SimilarityOrder(bad)
    with pytest.raises(SimilarityQueryError, match="characters"):
        SimilarityOrder("a" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(SimilarityQueryError, match="distinct words"):
        SimilarityOrder(" ".join(f"w{i}" for i in range(33)))


@pytest.mark.parametrize("query,said", [
    (None, "crawlproj: FRONTIER_PRIORITIZER similarity needs SIMILARITY_QUERY, the words to "
           "crawl toward (-s SIMILARITY_QUERY='...')"),
    ("x" * 10_000, "crawlproj: SIMILARITY_QUERY is 10000 characters; at most 1000"),
])
def test_similarity_without_a_usable_query_exits_2(redis_url, tmp_path, query, said):
    args = ["-a", "seeds=http://a.example/", "-s", "FRONTIER_PRIORITIZER=similarity"]
    if query is not None:
        args += ["-s", f"SIMILARITY_QUERY={query}"]
    run = crawl(redis_url, tmp_path, *args)
    assert run.returncode == 2, run.stderr[-3000:]
    assert one_line(run) == said
    assert redis.Redis.from_url(redis_url).dbsize() == 0


TOPICAL = {"seed": 3, "hosts": 20, "pages": 400, "topics": 4, "page_bytes": 1500,
           "crawl_delay_fraction": 0.0, "robots_fraction": 0.0}


def fetch_order(redis_url, tmp_path, prioritizer, query, hops=3) -> list[str]:
    run = tmp_path / f"{prioritizer}-{hops}"
    run.mkdir()
    with SimWebServer(TOPICAL, log_path=str(run / "web.jsonl")) as sw:
        workers = Workers(sw, redis_url, run, sw.web.seeds(1),
                          f"topical-{prioritizer}-{hops}", {
                              "CONCURRENT_REQUESTS": 1, "FRONTIER_PREFETCH": 1,
                              "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_PRIORITIZER": prioritizer,
                              "SIMILARITY_QUERY": query, "SIMILARITY_HOT_HOPS": hops,
                              "CRAWL_SCOPE": "any"})
        workers.start(1)
        assert workers.wait() == [0]
        return checks.arrival_order(sw.read_log())


@pytest.mark.e2e
def test_similarity_reaches_the_hot_pages_sooner_than_bfs(redis_url, tmp_path):
    web = SimWeb.generate(**TOPICAL)
    # the biggest topic but the seed's: the crawl has to find it
    start = web.topic(web.node_of(web.seeds(1)[0]))
    t = max((t for t in range(4) if t != start),
            key=lambda t: len(web.hot_pages(web.topic_query(t))))
    query = web.topic_query(t)
    hot = {web.url(v) for v in web.hot_pages(query)}
    assert len(hot) >= 100

    # similarity with the distance rule (Cho Fig. 5), and without it (Fig. 4:
    # the hot queue and IS' alone, which only the links' texts can drive)
    orders = {(p, h): fetch_order(redis_url, tmp_path, p, query, h)
              for p, h in (("bfs", 3), ("similarity", 3), ("similarity", 0))}
    assert all(set(order) >= hot for order in orders.values())
    need = {k: checks.fetches_to_reach(order, hot, 0.8) for k, order in orders.items()}
    assert need[("similarity", 3)] <= 0.6 * need[("bfs", 3)], need
    assert need[("similarity", 0)] <= 0.6 * need[("bfs", 3)], need


def test_the_links_texts_are_never_stored_in_the_frontier():
    order = SimilarityOrder("jazz", hot_hops=3, hot_count=5)
    hot = links_of(order, PAGE.format(title="t", text="jazz " * 5, q="jazz"))
    request = hot["plain"]
    order.score(request)
    assert request.meta["link_context"][3:5] == ("nothing here", "")
    stored = codec.decode(codec.encode(request, host="a.example"), host="a.example").meta
    assert stored == {"hot_hops": 1}  # the distance to a hot page, nothing else
    # a callback's link_text that no link context took off is not stored either
    raw = Request("http://a.example/x", meta={"link_text": ("a" * 5000, "b")})
    assert "link_text" not in codec.decode(codec.encode(raw, host="a.example"),
                                           host="a.example").meta


def test_the_link_context_bounds_the_texts_it_carries():
    response = HtmlResponse("http://a.example/", body=b"<html></html>", encoding="utf-8",
                            request=Request("http://a.example/"))
    big = Request("http://a.example/x", meta={"link_text": ("jazz " * 10_000, "y" * 10_000)})
    LinkContextMiddleware._annotate(response, [big])
    assert [len(t) for t in big.meta["link_context"][3:5]] == [400, 400]
    assert "link_text" not in big.meta
