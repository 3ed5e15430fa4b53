"""A run whose output folder is deleted while it runs ends in one line, resumable: the folder is recreated with what
the checkpoint holds (copied back from the database the run still has open), the calls it recorded and its
trajectory."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from llm_ide.errors import OutputFolderLost, beside
from llm_ide.run.usage import make_output_folder


def folder_lost(output_dir: Path) -> str:
    """(How the run resumes is the door's to say: `llm-ide run` prints its command, without --thread-id a new run's.)"""
    return (
        f"the output folder {output_dir} was deleted while the run ran: it is recreated with the run's checkpoint, "
        "calls and trajectory, and the run can resume from them"
    )


def folder_gone(output_dir: Path, values: dict[str, Any]) -> OutputFolderLost:
    """The output folder lost: the error that ends the run, after the one its state ended with (if any)."""
    return OutputFolderLost(beside(str(values.get("error") or ""), folder_lost(output_dir)))


def not_recreated(output_dir: Path, error: OSError, first: str) -> str:
    """The line of a run whose output folder cannot be made again (a file in its place, a parent made read-only),
    after `first`, the error that ended it (its loss: then this line alone)."""
    lost = f"the output folder {output_dir} was deleted or replaced while the run ran and"
    failed = f"cannot be recreated ({error.strerror or error}): the run's checkpoint, calls and trajectory are lost"
    return f"{lost} {failed}" if first in ("", folder_lost(output_dir)) else beside(first, f"{output_dir} {failed}")


def ensure_output(output_dir: Path) -> None:
    if not output_dir.is_dir():
        raise OutputFolderLost(folder_lost(output_dir))


def sqlite_path(spec: str) -> Path | None:
    return Path(spec.removeprefix("sqlite:")).expanduser() if spec.startswith("sqlite:") else None


def recreate_output(output_dir: Path, saver: Any, checkpoint: Path | None, recorder: Any) -> None:
    """The folder again: the checkpoint database copied back from its open connection when its file went with the
    folder, the calls log rewritten from the calls held in memory (their prompts were only in the lost file)."""
    make_output_folder(output_dir)
    conn = getattr(saver, "conn", None)
    if checkpoint is not None and not checkpoint.exists() and isinstance(conn, sqlite3.Connection):
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        with saver.lock:
            conn.commit()
            target = sqlite3.connect(str(checkpoint))
            try:
                conn.backup(target)
            finally:
                target.close()
    recorder.calls.rewrite()
