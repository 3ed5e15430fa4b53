"""A run's keep (`Keep`): the named lists of lines a model keeps across a run's processes; `FolderKeep`: the keep in
a folder (the run's)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Keep(Protocol):
    """Where a model keeps what it needs across a run's processes (a scripted model: its place): named lists of lines,
    as durable as the run's checkpoints (a file in the run's folder; rows in Postgres: llm_ide/run/pg_thread.py)."""

    def lines(self, name: str) -> list[str]: ...
    def write(self, name: str, lines: list[str], append: bool = True) -> None: ...


class FolderKeep:
    """A keep in a folder (the run's): a file per name, after `prefix` (`<run id>.` in a folder runs share)."""

    def __init__(self, folder: Path, prefix: str = "") -> None:
        self.folder, self.prefix = folder, prefix

    def lines(self, name: str) -> list[str]:
        path = self.folder / f"{self.prefix}{name}"
        return path.read_text(encoding="utf-8").splitlines() if path.is_file() else []

    def write(self, name: str, lines: list[str], append: bool = True) -> None:
        with (self.folder / f"{self.prefix}{name}").open("a" if append else "w", encoding="utf-8") as file:
            file.writelines(f"{line}\n" for line in lines)
