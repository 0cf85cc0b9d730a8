"""PendingWrites (crawlproj/stores/pending.py): a page is stored once every
write held for its URL has fired, failed ones included; each who waits gets
a Deferred of its own."""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from crawlproj.stores.pending import PendingWrites


def test_stored_fires_after_every_write_of_the_url_failed_ones_included():
    pending = PendingWrites()
    warc, links, other = Deferred(), Deferred(), Deferred()
    pending.hold("http://a.example/", warc)
    pending.hold("http://a.example/", links)
    pending.hold("http://b.example/", other)
    done = []
    pending.stored("http://a.example/").addCallback(lambda _: done.append("lease"))
    warc.callback(None)
    assert done == [] and len(pending) == 2
    links.errback(Failure(OSError("disk full")))
    links.addErrback(lambda f: None)     # the write's own consumer sees its failure
    assert done == ["lease"]
    assert len(pending) == 1 and pending.stored("http://a.example/") is None


def test_each_waiter_has_its_own_deferred():
    pending = PendingWrites()
    write = Deferred()
    pending.hold("http://a.example/", write)
    later = Deferred()
    order = []
    # one waiter chains a write of its own (a revisit record after its first copy) ...
    pending.stored("http://a.example/").addCallback(lambda _: later)
    # ... which must not hold back another waiter of the same page
    pending.stored("http://a.example/").addCallback(lambda _: order.append("lease"))
    write.callback(None)
    assert order == ["lease"]


def test_a_write_already_done_is_not_held():
    pending = PendingWrites()
    done = Deferred()
    done.callback(None)
    pending.hold("http://a.example/", done)
    assert len(pending) == 0 and pending.stored("http://a.example/") is None
