"""A file as an environment read it (`FileSnapshot`: its bytes and mtime), and a local environment's latest reads
(`LatestReads`): a file read again only when its stat says it changed since, as git trusts a settled index entry."""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

UNNAMEABLE = frozenset({errno.ENAMETOOLONG, errno.ELOOP})  # a path no file can have: no such file
READS = 64 << 20  # bytes of the files whose latest read is kept, the least recently read out first
SETTLED_NS = (50_000_000, 2_000_000_000)  # a file changed this long before it was read (its file system's timestamps
# in fractions of a second, or in whole seconds as FAT's, some network ones'): any later change shows in its stat


@dataclass
class FileSnapshot:
    data: bytes
    mtime_ns: int
    stamp: tuple[int, ...] = field(default=(), compare=False)  # size, mtime, ctime, inode, device (a write: the ctime)
    settled: bool = field(default=False, compare=False)  # changed SETTLED_NS before the read: equal stamp, equal bytes

    @classmethod
    def read(cls, path: Path) -> FileSnapshot | None:
        """The file at `path` as it is now; None when there is none (missing, a folder, a name no file can have)."""
        started = time.time_ns()
        try:
            with open(path, "rb", buffering=0) as handle:  # (no buffer: it is read whole)
                data, stat = handle.read(), os.fstat(handle.fileno())
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as error:
            if error.errno in UNNAMEABLE:
                return None
            raise
        whole_seconds = stat.st_ctime_ns % 1_000_000_000 == 0
        settled = stat.st_ctime_ns < started - SETTLED_NS[whole_seconds]  # (a write during the read: later)
        return cls(data, stat.st_mtime_ns, _stamp(stat), settled)

    def again(self, path: Path) -> FileSnapshot | None:
        """The file at `path` as it is now: this snapshot while its stamp says it is unchanged (no read; as git trusts
        a racily clean index entry only once it is settled), else read anew."""
        if self.settled:
            try:
                if _stamp(os.stat(path)) == self.stamp:
                    return self
            except OSError:
                pass
        return FileSnapshot.read(path)


def _stamp(stat: os.stat_result) -> tuple[int, ...]:
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev


class LatestReads:
    """The latest read of each file, READS bytes of them kept (the least recently read out first): a file's read again
    while its stamp says it is unchanged."""

    def __init__(self, limit: int = READS) -> None:
        self.limit, self.size = limit, 0  # (size: the bytes kept)
        self.kept: dict[Path, FileSnapshot] = {}

    def read(self, target: Path) -> FileSnapshot | None:
        """The file at `target` as it is now (a path resolved, inside the repository)."""
        known = self.kept.pop(target, None)
        self.size -= len(known.data) if known else 0
        snapshot = known.again(target) if known else FileSnapshot.read(target)
        if snapshot is not None and snapshot.settled:
            self.kept[target], self.size = snapshot, self.size + len(snapshot.data)  # (the most recent last)
            while self.size > self.limit:
                self.size -= len(self.kept.pop(next(iter(self.kept))).data)
        return snapshot
