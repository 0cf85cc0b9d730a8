"""The topical simulated web (the generate option ``topics``): pages with
topics, each topic its own vocabulary, links preferring their own topic, so
that the hot pages of a query are known (crawlproj/simweb/model.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from crawlproj.extract import extract_page
from crawlproj.simweb.model import SimWeb, topic_words

TOPICAL = {"seed": 11, "hosts": 40, "pages": 800, "page_bytes": 2500, "topics": 6}


def digest(web) -> str:
    h = hashlib.sha256()
    for v in range(web.n_nodes):
        r = web.respond(*web.host_path(v), t=0.0)
        h.update(f"{web.url(v)} {r.status} {r.location}\n".encode() + r.body)
    return h.hexdigest()


def test_the_topical_web_is_a_function_of_its_spec():
    a = SimWeb.generate(**TOPICAL)
    b = SimWeb.from_spec(json.dumps(a.spec))
    assert digest(a) == digest(b)
    assert [a.topic(v) for v in range(a.n_nodes)] == [b.topic(v) for v in range(b.n_nodes)]
    other = SimWeb.generate(**dict(TOPICAL, seed=12))
    assert digest(other) != digest(a)
    # the option changes the web: titles come from topics
    plain = SimWeb.generate(**dict(TOPICAL, topics=0))
    assert digest(plain) != digest(a)
    assert plain.topic(0) is None


def test_topic_vocabularies_are_disjoint_and_make_titles_and_text():
    web = SimWeb.generate(**TOPICAL)
    vocab = [set(topic_words(t)) for t in range(6)]
    assert all(not (vocab[i] & vocab[j]) for i in range(6) for j in range(i + 1, 6))
    for v in range(0, web.n_nodes, 37):
        if not web.is_html(v):
            continue
        t = web.topic(v)
        words = web.title(v).split()
        assert set(words[:2]) <= vocab[t]
        page = extract_page(web.render(v), web.url(v))
        own = [w for w in page.text.split() if w in vocab[t]]
        assert len(own) >= 20  # half of the page's own 80 words
        # each anchor is the target's title: words of the target's topic
        for url, anchor in page.links:
            target = web.node_of(url)
            if target is not None and web.is_html(target):
                assert set(anchor.split()[:2]) <= vocab[web.topic(target)]


def test_links_prefer_pages_of_their_own_topic():
    def same_topic_share(web):
        same = total = 0
        for v in range(web.n_nodes):
            for x in web.out_links(v):
                total += 1
                same += web.topic(x) == web.topic(v)
        return same / total

    local = same_topic_share(SimWeb.generate(**TOPICAL))
    # topic_locality 0: only hosts (mostly one topic each) keep links topical
    loose = same_topic_share(SimWeb.generate(**dict(TOPICAL, topic_locality=0.0,
                                                     topic_host=1 / 6)))
    assert local > 0.85
    assert loose < 0.5
    assert local > loose + 0.4


def test_hot_pages_of_a_topic_query_are_the_pages_of_the_topic():
    web = SimWeb.generate(**TOPICAL)
    for t in range(6):
        q = web.topic_query(t)
        hot = web.hot_pages(q)
        topic = {v for v in range(web.n_nodes) if web.topic(v) == t and web._kind(v) == 0}
        assert hot <= topic
        assert len(hot) >= 0.97 * len(topic) > 0
    # a word of no page is hot nowhere; every word of a query must be there
    assert web.hot_pages("nosuchword") == set()
    assert web.hot_pages(f"{web.topic_query(0)} {web.topic_query(1)}") <= web.hot_pages(
        web.topic_query(0))


def test_bad_topic_options_are_refused():
    with pytest.raises(ValueError):
        SimWeb.generate(**dict(TOPICAL, topics=-1))
    with pytest.raises(ValueError):
        SimWeb.generate(**dict(TOPICAL, topic_locality=1.5))
    with pytest.raises(ValueError):
        SimWeb.generate(**dict(TOPICAL, topics=0)).hot_pages("x")
