"""The four things the frontier needs from Scrapy's engine that it has no API for.

Kept in this one small module, tested against the installed Scrapy (see
../shared/scrapy-notes.md §2): if Scrapy changes these internals, this breaks
loudly here and nowhere else.

1. wake(): the engine stops pulling from the scheduler at the first None and
   otherwise only looks again on its 5 s heartbeat. When leases arrive, or a
   host's politeness delay ends, the frontier schedules the engine's next pull.
2. on_request_done(): a request is done for the frontier when the engine has
   downloaded it AND the scraper has finished with its output (links enqueued,
   items through the pipelines): that is when the engine removes it from its
   in-progress set. The URL's lease ends only then (its host's ended with the
   download), so a worker that dies mid-page has its URL re-crawled, never its
   links lost.
3. start_freed(): the engine counts a request against CONCURRENT_REQUESTS
   until its response has come back up through the downloader middlewares,
   three or four event-loop turns after the transfer ended; the frontier
   starts the next download at the transfer's end instead (the downloader's
   request_left_downloader signal), keeping at most CONCURRENT_REQUESTS
   transfers at a time.
4. scheduler(): the engine's scheduler object, which a spider middleware
   (middlewares/recentlinks.py) asks which links were sent lately.
"""

from __future__ import annotations


def _slot(crawler):
    engine = getattr(crawler, "engine", None)
    return getattr(engine, "_slot", None) if engine is not None else None


# request.meta key set when a request's transfer has ended (not stored: codec
# leaves out meta keys starting with "_")
ENDED = "_crawlproj_transfer_ended"


def end_transfer(request) -> None:
    """Mark request's transfer as ended (at request_left_downloader)."""
    request.meta[ENDED] = True


def transfers(crawler) -> int:
    """Downloads the downloader holds that have not ended their transfer."""
    return sum(1 for r in crawler.engine.downloader.active if ENDED not in r.meta)


def start_freed(crawler) -> int:
    """Start downloads while fewer than CONCURRENT_REQUESTS are transferring.

    The engine counts a request against CONCURRENT_REQUESTS until its response
    has come back up through the downloader middlewares (three or four event
    loop turns after the transfer ended, each behind whatever the loop has to
    run), so on a busy worker a finished transfer's slot stays empty for
    milliseconds. Started here at the transfer's end instead, the next request
    takes the wire the last one left: still at most CONCURRENT_REQUESTS
    transfers at a time, and the scraper's own limit is kept."""
    eng = crawler.engine
    slot = _slot(crawler)
    if slot is None or slot.closing is not None or not eng.running or eng.paused:
        return 0
    limit = eng.downloader.total_concurrency
    started = 0
    while transfers(crawler) < limit and not eng.scraper.slot.needs_backout():
        if not eng._start_scheduled_request():
            break
        started += 1
    return started


def scheduler(crawler):
    """The engine's scheduler, once the spider is open (else None)."""
    slot = _slot(crawler)
    return slot.scheduler if slot is not None else None


def wake(crawler) -> None:
    slot = _slot(crawler)
    if slot is not None and slot.closing is None:
        slot.nextcall.schedule()


def on_request_done(crawler, callback) -> bool:
    """Call callback(request) whenever the engine finishes a request."""
    slot = _slot(crawler)
    if slot is None:
        return False
    if getattr(slot, "_crawlproj_done_hook", None) == callback:  # bound methods: ==, not is
        return True
    remove = slot.remove_request

    def remove_request(request):
        try:
            callback(request)
        finally:
            remove(request)

    slot.remove_request = remove_request
    slot._crawlproj_done_hook = callback
    return True
