"""What every run of a task shares, a single run of the agent or the outer graph of several runs at it: the run
started (the task, the signal policy, the output folder, the environment kind, the settings' secrets in the filter),
then its thread opened (the folder's lock, the run's log, the checkpointer, the graph's saved state: resumed, never
started over; a thread of another task refused)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_ide.config import register_config_secrets
from llm_ide.errors import ThreadMismatchError, UsageError, install_signal_policy
from llm_ide.run.checkpoint import open_checkpointer
from llm_ide.run.guard import AnotherTask, RunStateError, thread_lock
from llm_ide.run.logfile import run_log
from llm_ide.settings import CoreSettings

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
IGNORE_ALL = "# made by llm-ide: its runs' files are no part of a repository\n*\n"


def make_output_folder(path: Path) -> None:
    """`path` and its missing parents, created; the topmost one created holds a .gitignore of everything in it (as
    pytest's cache does), so that runs' files never enter a repository they are made in: its patches, `git status`."""
    missing = next((folder for folder in reversed([path, *path.parents]) if not folder.exists()), None)
    path.mkdir(parents=True, exist_ok=True)
    if missing is not None:
        (missing / ".gitignore").write_text(IGNORE_ALL, encoding="utf-8")


def refuse_a_file(folder: Path, option: str = "output folder") -> None:
    """A file where an output folder (or one of its parents) should be: a usage error of one line."""
    if blocker := next((path for path in [folder, *folder.parents] if path.is_file()), None):
        said = "it" if blocker == folder else blocker
        raise UsageError(f"{option} {folder}: {said} is a file, not a folder: give a folder (it is created if missing)")


def refuse_a_json_name(folder: Path, run_id: str, option: str) -> None:
    """A run's output folder named as a JSON file (mini-swe-agent's `-o` is its trajectory file) is a usage error, where
    it became a folder of that name; an existing folder of that name is taken."""
    if folder.suffix == ".json" and not folder.is_dir():
        raise UsageError(
            f"{option} {folder}: {option} is the run's output folder (mini-swe-agent's -o is the trajectory file); "
            f"give a folder: the trajectory is <folder>/{run_id}.traj.json"
        )


def check_run_id(run_id: str) -> None:
    """A thread id that cannot name the run's files (an empty one too) is a usage error."""
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"thread id {run_id!r}: use letters, digits, '.', '_' and '-' (it names the run's files)")


def prepare_output(output_dir: Path, run_id: str) -> Path:
    """The run's output folder, created; a thread id that cannot name its files is a usage error."""
    check_run_id(run_id)
    refuse_a_file(output_dir)
    try:
        make_output_folder(output_dir)
    except OSError as error:
        raise UsageError(f"output folder {output_dir}: cannot create it ({error.strerror})") from None
    return output_dir


def start(output_dir: Path, run_id: str, settings: Any, environment: str | None) -> tuple[Path, Any]:
    """The run's output folder and settings (`environment`: the kind asked for); SIGTERM/SIGHUP end it like Ctrl-C,
    and the secrets its settings hold never reach an output."""
    install_signal_policy()
    output_dir = prepare_output(Path(output_dir), run_id)
    if environment:
        settings = settings.merged({"environment": {"type": environment}}, origin="environment")
    register_config_secrets(settings)
    return output_dir, settings


def thread_database(run_id: str) -> str:
    """The SQLite file in a run's folder that holds its thread (unless `--checkpoint` names another store)."""
    return f"{run_id}.checkpoint.sqlite"


def thread_values(spec: str, thread_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each thread's values as its last checkpoint in the store `spec` holds them (a thread not there: left out)."""
    found: dict[str, dict[str, Any]] = {}
    with open_checkpointer(spec, Path(os.devnull)) as saver:
        for thread_id in thread_ids:
            saved = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
            if saved is not None:
                found[thread_id] = dict(saved.checkpoint["channel_values"])
    return found


@dataclass
class Thread:
    spec: str  # the checkpointer's
    saver: Any
    graph: Any
    snapshot: Any
    values: dict[str, Any]

    @property
    def resumed(self) -> bool:
        return self.snapshot.created_at is not None  # any checkpoint: resume it, never start the thread over


def read_snapshot(graph: Any, run_id: str, spec: str) -> Any:
    try:
        return graph.get_state({"configurable": {"thread_id": run_id}})
    except Exception as error:  # a corrupt database, an unreadable blob: one line, nothing overwritten
        detail = " ".join(str(error).split())[:300]
        raise RunStateError(f"checkpoint {spec} cannot be read ({type(error).__name__}: {detail})") from None


@contextmanager
def opened(
    output_dir: Path,
    run_id: str,
    task: str,
    checkpoint: str | None,
    database: str,
    graph: Callable[[Any], Any],
    keep_every: bool = False,
) -> Iterator[Thread]:
    """The run's thread, held for the block: `graph(saver)` with its saved state (`database`: the sqlite file in the
    output folder, unless `checkpoint` names another store)."""
    spec = checkpoint or f"sqlite:{output_dir / database}"
    with (
        thread_lock(output_dir, run_id),
        run_log(output_dir / f"{run_id}.log"),
        open_checkpointer(spec, output_dir / database, keep_every) as saver,
    ):
        compiled = graph(saver)
        snapshot = read_snapshot(compiled, run_id, spec)
        values: dict[str, Any] = dict(snapshot.values or {})
        if values.get("task") and values["task"] != task:  # ("": the channel before any input, see one_task)
            raise AnotherTask(f"thread id {run_id!r} is a run of another task; give ", " (or the same task to resume)")
        yield Thread(spec, saver, compiled, snapshot, values)


__all__ = [
    "CoreSettings",
    "Thread",
    "ThreadMismatchError",
    "opened",
    "check_run_id",
    "prepare_output",
    "start",
    "thread_database",
    "thread_values",
]
