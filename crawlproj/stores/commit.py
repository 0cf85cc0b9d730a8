"""StoreCommit: the Redis-backed stores' writes of a worker, in one group commit.

The link store, page metadata and the index hand-over each write a few
commands for every page. A group commit of their own each would make a round
trip and a thread hand-off per batch and store, and since a round trip takes
a fraction of a millisecond, batches of three or four pages each. Here the
stores are parts of one group commit (crawlproj/redis/groupcommit.py): what they add
while a write is out goes in the next one, all parts' commands in one
pipeline, so a worker makes one round trip for the three, carrying more
pages.

A part queues its commands on the shared pipeline (``queue(pipe, entries)``)
and reads its own replies (``answer(token, replies)``), both in the writer
thread, where the round trip is made, as the frontier's (redis-py is
blocking); ``on_result`` gets the answer on the reactor thread. A part whose
answer raises fails the write: it is retried, every confirmation held until
it goes through, but the entries of the parts that were answered are not
written again (a failing index hand-over does not push a link store page
twice). Its retries, its refusal handling and its close are the group
commit's: a write Redis refuses for good (out of memory, an ACL) stops the
crawl (crawlproj/redis/guard.py), whichever store it was for, since the others
could not be written past it. A round trip cut short (the connection lost
before the replies) is retried whole, as any group commit's: writes are at
least once.

A part may also answer: call(name, value) asks it in the next write and
fires with its answer, for the per-page content-seen test (Mercator §3 step
4), which thus rides the stores' round trip instead of making one of its own
in a thread of its own. An asker does not wait out an
outage as a write does: while writes fail, a call fails at once, and one in a
write that fails fails with it, and is not asked again (the asker goes on
without the answer, as a test may).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import redis as redis_py
from twisted.internet import reactor
from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from crawlproj.redis.client import embedded_restarter, get_redis
from crawlproj.redis.groupcommit import GroupCommit
from crawlproj.redis.guard import RedisGuard
from crawlproj.redis.keyspace import Keyspace


class Part(NamedTuple):
    queue: Callable[[Any, list], Any]          # (pipe, entries) -> token
    answer: Callable[[Any, list], Any]         # (token, its replies) -> result
    on_result: Callable[[Any], None] | None    # result, on the reactor thread


class _Entry:
    """An entry of one part; written once its part's commands went through
    (in a write that failed for another part)."""

    __slots__ = ("part", "value", "written")

    def __init__(self, part: str, value):
        self.part = part
        self.value = value
        self.written = False


class _Call(_Entry):
    """An entry asked of a part: `asked` fires with its answer (`answer`, set
    where the round trip is answered) or its failure (`error`)."""

    __slots__ = ("asked", "answer", "error")

    def __init__(self, part: str, value):
        super().__init__(part, value)
        self.asked = Deferred()
        self.answer = self.error = None

    def settle(self, _=None) -> None:
        """On the reactor thread, once answered, failed, or let go unasked (at
        close, or when Redis refuses the writes)."""
        if self.asked.called:
            return
        if self.written and self.error is None:
            self.asked.callback(self.answer)
        else:
            self.asked.errback(Failure(self.error or redis_py.ConnectionError(
                "not asked: the crawl is closing or Redis refuses its writes")))


class StoreCommit:
    def __init__(self, redis, stats=None, on_unreachable=None, state_key: str | None = None):
        self.redis = redis
        self.parts: dict[str, Part] = {}
        # A key that exists while the crawl's state is on the server (a
        # partition's DUE record). After a failed write the server may have
        # come back empty: the next write first asks for it, so that nothing
        # is written into a server that lost the crawl (CRAWLLOST).
        self.state_key = state_key
        self.commit = GroupCommit(self._write, "stores", stats, on_result=self._answered,
                                  on_unreachable=on_unreachable)

    @classmethod
    def of(cls, crawler) -> StoreCommit:
        """The crawler's one store commit, watched by its RedisGuard."""
        from crawlproj.components import component

        def build(crawler) -> StoreCommit:
            s = crawler.settings
            redis = get_redis(s)
            commit = cls(redis, crawler.stats, embedded_restarter(s),
                         Keyspace.from_settings(s, redis).due(0))
            RedisGuard.of(crawler).watch(commit.commit)
            return commit
        return component(crawler, cls, build)

    def part(self, name: str, queue, answer, on_result=None) -> None:
        self.parts[name] = Part(queue, answer, on_result)

    def add(self, name: str, entry, within: float = 0.0) -> None:
        """Write entry of part name within `within` seconds."""
        self.commit.add(_Entry(name, entry), within)

    def add_confirmed(self, name: str, entry) -> Deferred:
        """Write entry of part name in the next write; fires once it is written."""
        return self.commit.add_confirmed(_Entry(name, entry))

    def call(self, name: str, value) -> Deferred:
        """Ask part name about value in the next write; fires with the part's
        answer for it (answer() gives one per value, in order)."""
        if self.commit.failing:
            return fail(redis_py.ConnectionError("Redis does not take this worker's writes now"))
        entry = _Call(name, value)
        self.commit.add_confirmed(entry).addCallback(entry.settle)
        return entry.asked

    def close(self) -> Deferred:
        """Fires once everything added is written (or given up): each part
        closing waits for the one write."""
        done = Deferred()
        self.commit.close().addBoth(done.callback)
        return done

    def _checked(self) -> bool:
        """Whether the crawl's state must be seen before this write: the last one failed."""
        return self.state_key is not None and self.commit.failing

    @staticmethod
    def _crawl_there(exists) -> None:
        if not int(exists):
            raise redis_py.ResponseError("CRAWLLOST the crawl's state is not on this server: it "
                                         "came back without its data, or was flushed")

    def _write(self, entries: list[_Entry]) -> list[tuple[Part, Any]]:
        """In the writer thread: every part's commands in one pipeline."""
        per, calls = _todo(entries)
        try:
            if self._checked():
                self._crawl_there(self.redis.exists(self.state_key))
            pipe = self.redis.pipeline(transaction=False)
            queued = self._queue(pipe, per)
            return self._answer(queued, pipe.execute(raise_on_error=False) if len(pipe) else [])
        except Exception as exc:
            if _unasked(calls, exc):
                reactor.callFromThread(_settle, calls)
            raise

    def _queue(self, pipe, per: dict[str, list[_Entry]]) -> list:
        queued = []
        for name, part_entries in per.items():
            part = self.parts[name]
            start = len(pipe)
            token = part.queue(pipe, [e.value for e in part_entries])
            queued.append((name, part, part_entries, token, start, len(pipe)))
        return queued

    @staticmethod
    def _answer(queued: list, replies: list) -> list[tuple[Part, Any]]:
        """Each part's answer from its replies; raises the first part's failure
        (its name in front), once every part that could answer has."""
        results, failed = [], None
        for name, part, part_entries, token, start, end in queued:
            try:
                result = part.answer(token, replies[start:end])
            except Exception as exc:
                failed = failed or (name, exc)
                if isinstance(part_entries[0], _Call):  # fail with their own part's error
                    for entry in part_entries:
                        entry.error, entry.written = _named(name, exc), True
                continue
            if isinstance(part_entries[0], _Call):
                for entry, answer in zip(part_entries, result, strict=True):
                    entry.answer = answer
            for entry in part_entries:
                entry.written = True
            results.append((part, result))
        if failed is not None:
            raise _named(*failed)
        return results

    def _answered(self, results: list[tuple[Part, Any]]) -> None:
        for part, result in results:
            if part.on_result is not None:
                part.on_result(result)


def _todo(entries: list[_Entry]) -> tuple[dict[str, list[_Entry]], list[_Call]]:
    """The entries not written yet, by part; and the questions among them."""
    per: dict[str, list[_Entry]] = {}
    for entry in entries:
        if not entry.written:
            per.setdefault(entry.part, []).append(entry)
    calls = [e for part_entries in per.values() for e in part_entries if isinstance(e, _Call)]
    return per, calls


def _unasked(calls: list[_Call], exc: BaseException) -> bool:
    """The questions of a write that failed fail with it (they are not asked
    again); whether there are any to settle."""
    for e in calls:
        if not e.written:
            e.error, e.written = exc, True
    return bool(calls)


def _settle(calls: list[_Call]) -> None:
    for call in calls:
        call.settle()


def _named(part: str, exc: Exception) -> Exception:
    """exc with the part's name in front of its message (the group commit logs
    the message, and crawlproj.redis.client.refusal reads it); exc itself when its type
    cannot be made from a message."""
    try:
        named = type(exc)(f"{part}: {exc}")
    except Exception:
        return exc
    named.__cause__ = exc
    return named
