from __future__ import annotations

import os
import stat
from pathlib import Path

from llm_ide.environments.base import FileSnapshot
from llm_ide.state.context import normalize_path


class LocalFiles:
    """A `FileSource` over a directory of this machine: repo-relative POSIX paths (absolute ones inside `root` too)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self._targets: dict[str, str] = {}

    def target(self, path: str) -> str:
        target = self._targets.get(path)
        if target is None:
            target = self._targets[path] = os.path.join(self.root, normalize_path(path, self.root.as_posix()))
        return target

    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        return {path: _read(self.target(path)) for path in paths}


def _read(target: str) -> FileSnapshot | None:
    try:
        fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        parts = [os.read(fd, info.st_size + 1)]
        while parts[-1]:
            parts.append(os.read(fd, 1 << 20))
        return FileSnapshot(b"".join(parts), info.st_mtime_ns)
    finally:
        os.close(fd)
