from __future__ import annotations

import os
from pathlib import Path

from llm_ide.environments.base import FileSnapshot
from llm_ide.state.context import normalize_path


class LocalFiles:
    """A `FileSource` over a directory of this machine: repo-relative POSIX paths (absolute ones inside `root` too)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self._root_text = self.root.as_posix()

    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        snapshots: dict[str, FileSnapshot | None] = {}
        for path in paths:
            target = self.root / normalize_path(path, self._root_text)
            try:
                with open(target, "rb") as handle:
                    mtime_ns = os.fstat(handle.fileno()).st_mtime_ns
                    snapshots[path] = FileSnapshot(handle.read(), mtime_ns)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
                snapshots[path] = None
        return snapshots
