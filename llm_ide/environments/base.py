from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from llm_ide.errors import EnvironmentFailure

__all__ = ["CommandResult", "Environment", "EnvironmentFailure", "FileSnapshot", "FileSource"]


@dataclass
class CommandResult:
    output: str
    returncode: int
    duration: float = 0.0
    timed_out: bool = False
    truncated: bool = False


@dataclass
class FileSnapshot:
    data: bytes
    mtime_ns: int


class FileSource(Protocol):
    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        """Repo-relative paths → their bytes and mtime; None for a file that does not exist."""
        ...


class Environment(FileSource, Protocol):
    workdir: str
    tools_root: str

    def execute(self, command: str, timeout: float | None = None, cwd: str | None = None) -> CommandResult: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def copy_in(self, source: Path, destination: str) -> None: ...

    def close(self) -> None: ...
