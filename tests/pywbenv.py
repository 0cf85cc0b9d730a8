"""A real pywb for the tests: its own virtualenv, its own server on loopback.

pywb 2.10 pins ``redis==2.10.6`` (and ``fakeredis<1.0``), while crawlproj
needs redis-py 5 or later, so pip cannot install pywb into the project's
environment (``ResolutionImpossible``). pywb is a set of command-line tools
(``wb-manager``, ``cdx-indexer``, ``wayback``), so the tests run them from a
virtualenv of their own, built from the package registry on first use and
kept in ``.venv-pywb/`` of the checkout (``CRAWLPROJ_PYWB_VENV`` names
another); a file lock makes parallel test processes build it once.
"""

from __future__ import annotations

import fcntl
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e import ROOT

PYWB = "pywb==2.10.0"


def venv() -> Path:
    """The virtualenv holding pywb, built when missing."""
    where = Path(os.environ.get("CRAWLPROJ_PYWB_VENV") or ROOT / ".venv-pywb")
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.parent / (where.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / "bin" / "wayback").exists():
            shutil.rmtree(where, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
            subprocess.run([str(where / "bin" / "pip"), "install", "-q", PYWB], check=True,
                           timeout=600)
    return where


def tool(name: str) -> str:
    return str(venv() / "bin" / name)


def run(name: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    out = subprocess.run([tool(name), *map(str, args)], cwd=cwd, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, f"{name} {args}: {out.stdout}{out.stderr}"
    return out


def collection(root: Path, name: str, warcs: list[Path], indexed_by_pywb: list[Path],
               own_indexes: list[Path] = ()) -> Path:
    """A pywb collection under root holding warcs: the files in
    indexed_by_pywb are indexed by ``wb-manager add`` (pywb's own index,
    indexes/index.cdxj), and the CDXJ files in own_indexes are put beside it
    as they are (pywb reads every .cdxj of indexes/)."""
    run("wb-manager", "init", name, cwd=root)
    coll = root / "collections" / name
    for w in warcs:
        if w not in indexed_by_pywb:
            shutil.copy(w, coll / "archive" / w.name)
    if indexed_by_pywb:
        run("wb-manager", "add", name, *indexed_by_pywb, cwd=root)
    for i in own_indexes:
        shutil.copy(i, coll / "indexes" / i.name)
    return coll


def own_index(coll: Path) -> list[str]:
    """The lines pywb wrote into a collection's index.cdxj."""
    return (coll / "indexes" / "index.cdxj").read_text(encoding="utf-8").splitlines()


def as_pywb_writes(lines: list[str]) -> list[str]:
    """CDXJ lines as pywb's wb-manager add writes them: a revisit's line
    without the status cdxj-indexer (and crawlproj) give it."""
    return [re.sub(r', "status": "[0-9]+"', "", line) if '"mime": "warc/revisit"' in line
            else line for line in lines]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Wayback:
    """pywb's replay server over the collections of root, on 127.0.0.1."""

    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Wayback:
        self.log = open(self.root / "wayback.log", "wb")
        self.proc = subprocess.Popen([tool("wayback"), "-b", "127.0.0.1", "-p", str(self.port)],
                                     cwd=self.root, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.root / "wayback.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        raise AssertionError("pywb did not start: " + (self.root / "wayback.log").read_text())

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def get(self, coll: str, timestamp: str, url: str) -> tuple[int, bytes]:
        """(status, body) of a capture replayed as it was (``id_``: no rewriting)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", f"/{coll}/{timestamp}id_/{url}")
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()
