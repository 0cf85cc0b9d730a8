"""The worker's child processes (the crawl's indexer, the worker's WARC
writer): how they are started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def spawn(module: str, blocked: set[int]) -> subprocess.Popen:
    """``python -m module`` with pipes on its standard input and output. It
    imports crawlproj from wherever this process did (a Scrapyd egg is on
    sys.path, not on PYTHONPATH), and starts with the signals `blocked`
    blocked (a thread's signal mask goes through fork and exec): it unblocks
    them once its handlers are set, so that a signal sent while it starts is
    handled, never the default's kill."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        return subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
