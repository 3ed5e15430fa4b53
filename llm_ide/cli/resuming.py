"""What a run's command line needs so that the command it prints to resume it (or to go on past a limit), pasted in
a fresh shell, does what the run did: a task read from a stream is the thread's (read from its trajectory, not given
again), the model $LLM_IDE_MODEL chose is named and the endpoint $OPENAI_BASE_URL gave it, a `--config` read from a
stream is the copy saved beside the run's outputs."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

from llm_ide.cli.console import Note, err_console, fail

LEFT_TO_VARIABLE = Note("the endpoint is $OPENAI_BASE_URL's, as set now: its URL holds a credential, not printed")
STDIN = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")  # standard input, even a file (`< task.txt`) or a terminal


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
        stdin = str(task_file) in STDIN
        source = f"--task-file {task_file}" if stdin else f"task file {task_file}"
        if stdin and sys.stdin is not None and sys.stdin.isatty():  # else it waited without a word
            err_console.print(f"… {source}: type the task, then Ctrl-D on a line of its own", markup=False)
        try:
            text = (standard_input(source) if stdin else task_file.read_bytes()).decode("utf-8")
        except UnicodeDecodeError:
            raise fail(f"{source}: not UTF-8 text") from None
        except OSError as error:
            raise fail(f"{source}: cannot read it ({error.strerror})") from None
    from llm_ide.errors import UsageError
    from llm_ide.run.usage import check_task

    try:
        check_task(text, source)
    except UsageError as error:
        raise fail(str(error)) from None
    return text


def standard_input(source: str) -> bytes:
    """All of standard input, for the option `source` naming it (`<&-`: closed, a usage error)."""
    if sys.stdin is None:
        raise fail(f"{source}: standard input is closed")
    return sys.stdin.buffer.read()


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
    """A file read from a stream (`-` or another name of standard input, whatever it is; a pipe, `<(…)`), gone once
    read."""
    return path is not None and (str(path) in STDIN or (path.exists() and not path.is_file() and not path.is_dir()))


def config_copy(thread: Path, index: int) -> Path:
    """Where the `index`th `--config` read from a stream is saved (`thread`: `<output>/<thread id>`)."""
    return thread.parent / f"{thread.name}.config{'' if index == 1 else f'-{index}'}.yaml"


def kept_configs(config: list[Path] | None, thread: Path, task_file: Path | None = None) -> list[Path] | None:
    """The `--config` files, each one read from a stream saved first beside the run's outputs (and read from there):
    the command that resumes the run names the copy, the stream being gone. Standard input (`-c -`) is read once,
    by one option."""
    from llm_ide.config import anchored_text
    from llm_ide.run.usage import prepare_output

    readers = [f"--config {path}" for path in config or [] if str(path) in STDIN]
    if len(readers := [*([f"--task-file {task_file}"] if str(task_file) in STDIN else []), *readers]) > 1:
        raise fail(f"{' and '.join(readers)} both read standard input, which is read once: give one of them a file")
    kept, index = [], 0
    for path in config or []:
        if (written := minis_setting(path)) is not None:
            said = f"it takes YAML files, not mini-swe-agent's KEY=VALUE: -c <(echo {shlex.quote(written)})"
            raise fail(f"--config {path}: {said}")
        if streamed(path):
            index += 1
            prepare_output(thread.parent, thread.name)
            try:
                data = standard_input(f"--config {path}") if str(path) in STDIN else path.read_bytes()
                (copy := config_copy(thread, index)).write_bytes(anchored_text(data, Path.cwd()))
            except OSError as error:
                raise fail(f"--config {path}: cannot read it or save it ({error.strerror})") from None
            path = copy
        kept.append(path)
    return kept if config is not None else None


def minis_setting(path: Path) -> str | None:
    """mini-swe-agent's `-c KEY=VALUE` (no such file) as the YAML that says it (`agent: {step_limit: 5}`), else None."""
    key, equals, value = str(path).partition("=")
    if not equals or path.exists() or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", key):
        return None
    *parents, leaf = key.split(".")
    written = f"{leaf}: {value}"
    for parent in reversed(parents):
        written = f"{parent}: {{{written}}}"
    return written


def resuming_args(
    task_file: Path | None, model: str | None, config: list[Path] | None, thread: Path, base_url: str | None
) -> list[str]:
    """The command line's arguments as they resume the run: a task read from a stream left out (the thread holds
    it), a `--config` read from a stream given as its saved copy (`thread`: `<output>/<thread id>`), the model
    $LLM_IDE_MODEL chose named (`model`: the option's, None), the endpoint $OPENAI_BASE_URL gave it named."""
    args = dropped(sys.argv[1:], "--task-file") if streamed(task_file) else sys.argv[1:]
    for index, stream in enumerate([str(path) for path in config or [] if streamed(path)], 1):
        args = replaced(args, stream, str(config_copy(thread, index)))
    chosen = os.environ.get("LLM_IDE_MODEL") if model is None else None  # pasted without the variable: the same model
    args = [*args, "--model", chosen] if chosen else args
    return [*args, *endpoint_args(model or chosen or "", base_url)]


def endpoint_args(model: str, base_url: str | None) -> list[str]:
    """`--base-url` naming the endpoint $OPENAI_BASE_URL gave the run's model (pasted without the variable, or with
    another value, the command went on at another endpoint); none when `--base-url` gave it, the model does not take
    it (scripted, another provider); where the URL holds a credential (never printed), a note leaving it to the
    variable."""
    from llm_ide.credentials import credentials_in

    url = os.environ.get("OPENAI_BASE_URL")
    if base_url or not url or not model or model.startswith("scripted:"):
        return []
    from llm_ide.run.preflight import provider_of  # (the providers LangChain knows: not for the cases above)

    if provider_of(model) not in (None, "openai"):
        return []
    return [LEFT_TO_VARIABLE] if credentials_in(url) else ["--base-url", url]


def replaced(args: list[str], stream: str, copy: str) -> list[str]:
    """`args` with the first `-c STREAM` / `--config STREAM` / `--config=STREAM` naming `copy` instead."""
    for index, arg in enumerate(args):
        if arg == f"--config={stream}":
            return [*args[:index], f"--config={copy}", *args[index + 1 :]]
        if arg in ("-c", "--config") and args[index + 1 : index + 2] == [stream]:
            return [*args[: index + 1], copy, *args[index + 2 :]]
    return args


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
