"""Processes a worker starts for a crawl-wide job: the indexer
(crawlproj/search/process.py) and the ranker (crawlproj/ranker/process.py).

Pinkerton's WebCrawler kept its database apart from the agents that fetch,
each a process of its own; here a worker that holds a job's lock starts the
job as a child, which works on a core of its own (the indexer at a lower
priority than the crawl, NICENESS) and returns its memory to the machine when it exits. The
worker writes one JSON line to the child's standard input: the crawl's
settings (every value JSON can carry), its own pid, and what the job needs.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys

logger = logging.getLogger(__name__)

# A child yields the cores to the crawl: its work waits (in Redis, nothing
# lost) while the workers are busy (docs/benchmarks.md, "What each setting is
# measured to give").
NICENESS = 10


def settings_order(settings, read: tuple[str, ...], **job) -> dict:
    """What a child is told: the settings JSON can carry (a path as its
    string; a class or a function set as a value is left at its default
    there: an error in the log for a setting named by a prefix in `read`,
    which the child reads), the worker's pid, and `job`."""
    values = {}
    for name, value in settings.copy_to_dict().items():
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            if name.startswith(read):
                logger.error("Setting %s (%r) cannot be passed to a child process; "
                             "it uses the default there", name, value)
            continue
        values[name] = value
    return {"settings": values, "parent": os.getpid(), **job}


def spawn(module: str, order: dict) -> subprocess.Popen:
    """`python -m module`, told `order` on its standard input; its standard
    output is the worker's to read."""
    # The child imports crawlproj from wherever this process did (a Scrapyd
    # egg is on sys.path, not on PYTHONPATH).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # The child starts with SIGTERM blocked (a thread's signal mask goes
    # through fork and exec) and unblocks it once its handler is set: a stop
    # sent while it starts is a stop, never a kill.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        proc.stdin.write(json.dumps(order).encode() + b"\n")
        proc.stdin.close()
    except OSError:  # it died at once: poll() says how
        pass
    return proc


def read_order(what: str, starter: str, command: str):
    """In the child: (Scrapy settings, the order), logging configured; or
    None, with one line on the standard error, when started by hand (the
    worker's `starter` starts it; `command` is the one for a person)."""
    from scrapy.settings import Settings
    from scrapy.utils.log import configure_logging

    try:
        order = json.loads(sys.stdin.readline())
    except ValueError:
        print(f"crawlproj: the {what} process is started by a worker ({starter}), "
              f"not by hand: run `{command}`", file=sys.stderr)
        return None
    settings = Settings()
    settings.setdict(order["settings"], priority="cmdline")
    settings.set("LOG_FILE_APPEND", True, priority="cmdline")  # the worker's LOG_FILE, shared
    configure_logging(settings)
    return settings, order


def run(what: str, starter: str, command: str, serve) -> int:
    """A child's main: SIGINT ignored (a Ctrl-C in the terminal reaches the
    whole process group, and the worker, finishing its pages first, ends its
    children after them), SIGTERM unblocked (spawn blocked it), the order
    read, then serve(settings, order, reports); an error is one line on the
    standard error and exit code 1, for the worker to log."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    reports = reports_channel()
    try:
        started = read_order(what, starter, command)
        if started is None:
            return 2
        serve(*started, reports)
    except Exception as exc:  # Redis out of reach, a file unwritable: one line
        print(f"crawlproj: {what} process: {exc}", file=sys.stderr)
        return 1
    return 0


def reports_channel():
    """In the child: the standard output as given, for reports to the worker;
    anything else printed goes to the standard error."""
    reports = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    return reports
