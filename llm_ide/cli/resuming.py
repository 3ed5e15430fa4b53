"""What a run's command line needs so that the command it prints to resume it (or to go on past a limit), pasted in
a fresh shell, does what the run did: a task read from a stream is the thread's (read from its trajectory, not given
again), the model $LLM_IDE_MODEL chose is named."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from llm_ide.cli.console import err_console, fail


def task_text(task: str | None, task_file: Path | None, thread: Path | None = None) -> str:
    """The task from --task or --task-file; with neither, a thread's (`thread`: `<output>/<thread id>`, given
    `--thread-id`) as its trajectory holds it. A blank one is refused (it would run the whole loop for nothing)."""
    if task is None and task_file is None and thread is not None:
        return saved_task(thread)
    if (task is None) == (task_file is None):
        raise fail("give exactly one of --task TEXT or --task-file FILE")
    if task_file is None:
        text, source = task or "", "--task"
    elif task_file.is_dir():
        raise fail(f"task file {task_file} is a folder: give the file that holds the task")
    elif not streamed(task_file) and not task_file.exists():
        raise fail(f"task file not found: {task_file}")
    else:
        source = "--task-file -" if str(task_file) == "-" else f"task file {task_file}"
        if source == "--task-file -" and sys.stdin.isatty():  # else it waited without a word
            err_console.print("… --task-file -: type the task, then Ctrl-D on a line of its own", markup=False)
        try:
            text = (sys.stdin.buffer.read() if str(task_file) == "-" else task_file.read_bytes()).decode("utf-8")
        except UnicodeDecodeError:
            raise fail(f"{source}: not UTF-8 text") from None
        except OSError as error:
            raise fail(f"{source}: cannot read it ({error.strerror})") from None
    if not text.strip():
        raise fail(f"the task is empty ({source}): say what the agent should do")
    return text


def saved_task(thread: Path) -> str:
    """The task of the run `thread` (`<output>/<thread id>`), from its trajectory: what resumes it needs no other."""
    trajectory = thread.parent / f"{thread.name}.traj.json"
    try:
        task = json.loads(trajectory.read_text(encoding="utf-8")).get("task")
    except (OSError, ValueError, AttributeError):
        task = None
    if not isinstance(task, str) or not task.strip():
        raise fail(
            f"give exactly one of --task TEXT or --task-file FILE (no run {thread.name} in {thread.parent} to take "
            "the task from)"
        )
    return task


def streamed(path: Path | None) -> bool:
    """A file read from a stream (`-`: standard input; a pipe, `<(…)`), gone once read."""
    return path is not None and (str(path) == "-" or (path.exists() and not path.is_file()))


def resuming_args(task_file: Path | None, model: str | None) -> list[str]:
    """The command line's arguments as they resume the run: a task read from a stream left out (the thread holds
    it), the model $LLM_IDE_MODEL chose named (`model`: the option's, None)."""
    args = dropped(sys.argv[1:], "--task-file") if streamed(task_file) else sys.argv[1:]
    chosen = os.environ.get("LLM_IDE_MODEL") if model is None else None
    return [*args, "--model", chosen] if chosen else args


def dropped(args: list[str], option: str, value: str | None = None) -> list[str]:
    """`args` without `option` and its value (`--option VALUE`, `--option=VALUE`); with `value` (`-c`, the limits
    file), only where it is given that value, as `-c` or `--config`."""
    names = ("-c", "--config") if option == "-c" else (option,)
    kept, index = [], 0
    while index < len(args):
        name, equals, given = args[index].partition("=")
        if args[index] in names and index + 1 < len(args) and value in (None, args[index + 1]):
            index += 2
            continue
        if not (equals and name in names and value in (None, given)):
            kept.append(args[index])
        index += 1
    return kept
