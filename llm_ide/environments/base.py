from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from llm_ide.environments.output import OnOutput
from llm_ide.environments.snapshots import FileSnapshot
from llm_ide.errors import EnvironmentFailure

__all__ = [
    "Capabilities",
    "CommandResult",
    "Environment",
    "EnvironmentFailure",
    "FileSnapshot",
    "FileSource",
    "OnOutput",
]


@dataclass(frozen=True)
class Capabilities:
    """What a kind of environment offers, declared by its class: what the rest of the program asks instead of its
    name."""

    ephemeral: bool  # works on a copy of the repository made for the run (gone after it), not the repository itself
    image: bool  # runs from an image (the image, and a container engine on the machine, are needed)
    tools_mount: bool  # its tools folder is a host folder: tools are built there and cached as they are
    system_path: bool  # tools may be linked onto its own PATH (a container's /usr/local/bin)


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


class FileSource(Protocol):
    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        """Repo-relative paths → their bytes and mtime; None for a file that does not exist."""
        ...


class Environment(FileSource, Protocol):
    kind: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    workdir: str
    tools_root: str
    own_paths: list[str]  # the run's own folders inside the repository (relative to it): never part of the patch
    notes: list[str]  # what the run's start says of it (which Python its commands use)

    @classmethod
    def from_config(cls, settings: Any, *, repo: Path | None, run_id: str, **options: Any) -> Environment:
        """The environment the `environment` settings ask for (`options`: image, tools_dir, leftovers)."""
        ...

    def execute(
        self, command: str, timeout: float | None = None, cwd: str | None = None, on_output: OnOutput = None
    ) -> CommandResult:
        """`command` run with `bash -c` in the workdir (or `cwd`); `on_output` gets its output as it arrives."""
        ...

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
