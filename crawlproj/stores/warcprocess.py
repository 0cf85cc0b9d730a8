"""The WARC writer in a process of its own, one for each worker.

In the worker's own thread, the writer's records, their compression and the
file writes cost two to three times what they cost alone (330 µs a page
against 121 on the benchmark web): its Python and the reactor's passed the
worker's GIL back and forth, each pass a thread woken on the other core.
Switched off, the WARC writer saved 1.3-1.9 of the worker's 20-21 CPU units
(docs/benchmarks.md, "The stores' share on the simulated web's scale"). As
the indexer (crawlproj/search/process.py), it writes on a core of its own;
unlike the indexer it is on each page's path (the page's lease waits for its
records: crawlproj/stores/pending.py), so it runs at the worker's priority.

The worker (WarcChild, in the WARC pipeline's one thread) and the child
speak in frames, a 4-byte length and a msgpack value, on the child's
standard input and output:

    worker -> child   {"storage", "root", "crawl_id", "worker", "max_size",
                       "info", "log"}     the writer's arguments, first
                      ["write", [item, ...]]   a batch of exchanges
                      ["close"]
    child -> worker   error or None       after the first frame (the file opened?)
                      [error or None, ...]  after each batch, one per item
                      [published, error]  after close, then it exits

An error is [errno, strerror, filename]: the worker raises it as the
OSError it was. The child writes nothing the worker did not send, and a
batch is answered once its records are in the file.

A worker that dies (kill -9) closes the pipe: the child then leaves its file
open, unpublished, as the worker's own death would have, for the next
worker's recover() (crawlproj/stores/warc.py). It ignores SIGINT and
SIGTERM: a Ctrl-C or a service manager's stop reaches the whole process
group, and the worker, which finishes its pages first, closes it after them.
"""

from __future__ import annotations

import logging
import os
import signal
import struct
import sys
from pathlib import Path

import msgpack

from crawlproj.childprocess import spawn

# not __name__: run with -m, this module is __main__
logger = logging.getLogger("crawlproj.stores.warcprocess")

_LENGTH = struct.Struct("<I")


def _send(stream, value) -> None:
    data = msgpack.packb(value, use_bin_type=True)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    """The next frame's value; EOFError when the other side is gone."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    size = _LENGTH.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return msgpack.unpackb(data, raw=False)


def _error(exc: OSError | None):
    return None if exc is None else [exc.errno, exc.strerror or str(exc), exc.filename]


def _oserror(value) -> OSError | None:
    if value is None:
        return None
    errno, strerror, filename = value
    return OSError(errno, strerror) if filename is None else OSError(errno, strerror, filename)


def item(exchange, revisit: dict | None) -> list:
    """What the child needs of an exchange to write its records."""
    return [exchange.url, exchange.status, exchange.request_head, exchange.response_head,
            exchange.body, exchange.content_type, exchange.started, exchange.duration,
            exchange.ip, exchange.head_rebuilt, exchange.sha1, revisit]


class WarcChild:
    """A running WARC writer process. Not thread-safe: one thread uses it
    (the WARC pipeline's), and every call waits for the child's answer."""

    def __init__(self, order: dict):
        self.proc = spawn("crawlproj.stores.warcprocess", {signal.SIGINT, signal.SIGTERM})
        self.pid = self.proc.pid
        self._closed = False
        error = self._call(order)
        if error is not None:
            self.proc.stdin.close()
            self.proc.wait()
            raise _oserror(error)

    def _call(self, value):
        try:
            _send(self.proc.stdin, value)
            return _receive(self.proc.stdout)
        except (OSError, EOFError):
            code = self.proc.wait()
            raise OSError(f"the WARC writer process {self.pid} exited "
                          f"(code {code})") from None

    def write_many(self, items: list[list]) -> list[OSError | None]:
        """Write a batch of item()s; for each, None or the OSError that kept
        it out of the file."""
        return [_oserror(e) for e in self._call(["write", items])]

    def close(self) -> list[str]:
        """Close and publish the file; the published places. Raises the
        OSError that kept the file from being closed."""
        if self._closed:
            return []
        self._closed = True
        published, error = self._call(["close"])
        self.proc.stdin.close()
        self.proc.wait()
        if error is not None:
            raise _oserror(error)
        return published

    def kill(self) -> None:
        """Stop at once, the file left open for recover() (the reactor stops
        without the spider closing)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _serve(requests, answers) -> int:
    from scrapy.settings import Settings
    from scrapy.utils.log import configure_logging

    from crawlproj.stores.exchange import Exchange
    from crawlproj.stores.storage import make_storage
    from crawlproj.stores.warc import WarcWriter

    order = _receive(requests)
    settings = Settings()
    settings.setdict(order["log"], priority="cmdline")
    settings.set("LOG_FILE_APPEND", True, priority="cmdline")  # the worker's LOG_FILE, shared
    configure_logging(settings, install_root_handler=True)
    writer = WarcWriter(make_storage(order["storage"], Path(order["root"])), order["crawl_id"],
                        order["worker"], order["max_size"], info=order["info"])
    try:
        writer.open()
    except OSError as exc:
        _send(answers, _error(exc))
        return 1
    _send(answers, None)
    while True:
        try:
            message = _receive(requests)
        except EOFError:
            logger.warning("WARC writer: worker %d is gone; %s stays open for the next "
                           "worker to repair", os.getppid(),
                           writer.current.path.name if writer.current else "no file")
            return 1
        if message[0] == "write":
            items = []
            for (url, status, request_head, response_head, body, content_type, started,
                 duration, ip, head_rebuilt, sha1, revisit) in message[1]:
                items.append((Exchange(None, url, status, request_head, response_head, body,
                                       content_type, started, duration, ip,
                                       head_rebuilt=head_rebuilt, _sha1=sha1), revisit))
            _send(answers, [_error(e) for e in writer.write_many(items)])
        elif message[0] == "close":
            try:
                writer.close()
                error = None
            except OSError as exc:
                error = exc
            _send(answers, [writer.published, _error(error)])
            return 0


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    # Answers go to the worker on the standard output as it was given;
    # anything else printed goes to the standard error.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = os.fdopen(os.dup(0), "rb")
    if os.isatty(0):
        print("crawlproj: the WARC writer process is started by a worker's WARC pipeline "
              "(crawlproj/pipelines/warc.py), not by hand", file=sys.stderr)
        return 2
    try:
        return _serve(requests, answers)
    except (BrokenPipeError, EOFError):
        return 1


if __name__ == "__main__":
    sys.exit(main())
