from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from llm_ide.errors import EnvironmentFailure

__all__ = ["CommandResult", "Environment", "EnvironmentFailure", "FileSnapshot", "FileSource"]


class OutsideRepository(ValueError):
    """A path that leads outside the repository (`..`, an absolute path, or a symlink pointing out): refused."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} leads outside the repository")
        self.path = path


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

    def write_file(self, path: str, data: bytes) -> None:
        """Raises OutsideRepository when `path`, symlinks resolved, is not inside the repository."""
        ...

    def inside(self, path: str) -> bool:
        """Whether `path`, symlinks resolved, is inside the repository (read_files gives None for one that is not)."""
        ...

    def run_trusted(self, command: str, timeout: float) -> tuple[int, bytes]:
        """Runs one of our own commands (not the agent's) in the workdir: (status, stdout; stderr too on failure)."""
        ...

    def private_dir(self, name: str) -> str:
        """A path for our own data, out of reach of the agent's commands (or as far out as the environment allows)."""
        ...

    def put_private(self, path: str, data: bytes) -> None: ...

    def copy_in(self, source: Path, destination: str) -> None: ...

    def close(self) -> None: ...
