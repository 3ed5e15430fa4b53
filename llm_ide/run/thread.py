"""What every run of a task shares, a single run of the agent or the outer graph of several runs at it: the run
started (the task, the signal policy, the output folder, the environment kind, the settings' secrets in the filter),
then its thread opened (the folder's lock, the run's log, the checkpointer, the graph's saved state: resumed, never
started over; a thread of another task refused)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_ide.config import register_config_secrets
from llm_ide.errors import ThreadMismatchError, install_signal_policy
from llm_ide.run.checkpoint import open_checkpointer
from llm_ide.run.guard import AnotherTask, RunStateError, thread_lock
from llm_ide.run.logfile import run_log
from llm_ide.run.usage import prepare_output
from llm_ide.settings import CoreSettings


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
    "start",
    "thread_database",
    "thread_values",
]
