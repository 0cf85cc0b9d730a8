"""Where finished output files go.

A writer always writes into a local *spool* directory: appending record by
record, holding an flock while it writes, and repairing a file a crash left
half-written all need a local file. When a file is finished (rotated or
closed) the writer hands it to :meth:`Storage.publish`, which puts it in its
final place. For a local directory that is a rename in the same directory;
for an object store it is an upload, so an S3-compatible store is one class:

    class FsspecStorage(Storage):            # e.g. "s3://bucket/crawl/warc"
        def __init__(self, url, spool):
            import fsspec
            self.fs, self.root = fsspec.core.url_to_fs(url)
            self.spool = Path(spool)
        def publish(self, local, name):
            self.fs.put_file(str(local), f"{self.root}/{name}")
            local.unlink()
            return f"{self.root}/{name}"
        def names(self, suffix):
            return sorted(p.rsplit("/", 1)[-1] for p in self.fs.glob(f"{self.root}/*{suffix}"))
        def open(self, name):
            return self.fs.open(f"{self.root}/{name}", "rb")

(named in the WARC_STORAGE setting as a dotted path).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from scrapy.utils.misc import load_object


class Storage:
    """A directory of finished files plus a local spool for files being written."""

    spool: Path

    def publish(self, local: Path, name: str) -> str:
        """Make the finished local file `local` available as `name`; returns where."""
        raise NotImplementedError

    def names(self, suffix: str) -> list[str]:
        """Finished files whose names end with suffix, sorted."""
        raise NotImplementedError

    def open(self, name: str) -> BinaryIO:
        raise NotImplementedError


class LocalStorage(Storage):
    """Finished files in one local directory, which is also the spool."""

    def __init__(self, root: str | os.PathLike, spool: str | os.PathLike | None = None):
        self.root = Path(root)
        self.spool = Path(spool) if spool else self.root

    def publish(self, local: Path, name: str) -> str:
        target = self.root / name
        os.replace(local, target)  # atomic: a reader sees the whole file or none
        return str(target)

    def names(self, suffix: str) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name.endswith(suffix))

    def open(self, name: str) -> BinaryIO:
        return open(self.root / name, "rb")


def make_storage(spec: str | None, root: Path) -> Storage:
    """LocalStorage(root) unless spec names another Storage class (dotted path),
    which is built as cls(root)."""
    if not spec:
        return LocalStorage(root)
    cls = load_object(spec)
    return cls(root)
