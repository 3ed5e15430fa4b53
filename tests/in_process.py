"""`llm-ide …` run inside the test's own process: what `subprocess.run([llm-ide, …], capture_output=True,
text=True)` returns, without paying a second interpreter and the agent's imports for each command line.

    from in_process import invoke

    done = invoke("run", "--repo", str(repo), "--task", "t", "--model", model, cwd=tmp_path, env=environ)
    assert done.returncode == 0, done.stderr

The command line goes through the CLI's own entry point (`llm_ide.cli.app`, or `extra_app` for `mini-extra`): its
option parsing, its one-line errors and exit codes, its consoles. For the call's length the process looks like the
command's own: `sys.argv`, the working directory, the environment (`env` replaces it whole, as it would for a
child), stdin (`input`, else empty), stdout and stderr (captured, decoded as UTF-8), the root logger (no handler: a
warning nobody shows goes to stderr, as Python does in a fresh process), the signal handlers. All of it is put back
afterwards, less the CLI's deferred imports (llm_ide/deferred.py), installed for the rest of the test process. An
exception nobody caught is a traceback on stderr and exit code 1, as in a child.

What stays a child process (tests/README.md): exit by a signal, Ctrl-C and SIGTERM, a terminal (pty), a stdin that
blocks or is read interactively, `atexit` and what a process leaves behind when it ends, and start-up itself.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

THREAD_GRACE = 60.0  # seconds for the threads a command started to end once it returned (a child would wait too)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def invoke(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    program: str = "llm-ide",
) -> subprocess.CompletedProcess[str]:
    """`program *args` (llm-ide or mini-extra) as if run as a child: its exit code, stdout and stderr."""
    from llm_ide.cli import app, extra_app

    entry = extra_app if program == "mini-extra" else app
    return called(lambda: entry(list(args)), program, args, cwd, env, input)


def run_script(
    path: Path, *args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python PATH *args` (one of scripts/, run as `__main__` with its folder first on sys.path) as if a child."""
    sys.path.insert(0, str(path.parent))
    try:
        return called(lambda: runpy.run_path(str(path), run_name="__main__"), str(path), args, cwd, env, None)
    finally:
        sys.path.remove(str(path.parent))


def called(
    call: Callable[[], object],
    program: str,
    args: tuple[str, ...],
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    input: str | None,
) -> subprocess.CompletedProcess[str]:
    out, err = streams(), streams()
    before = set(threading.enumerate())
    with process_state(program, args, cwd, env, input or "", out, err):
        code = exit_code(call, err)
    started = [thread for thread in threading.enumerate() if thread not in before]
    for thread in started:
        if not thread.daemon:
            thread.join(THREAD_GRACE)
    lingering = [thread.name for thread in started if thread.is_alive() and not thread.daemon]
    assert not lingering, f"{program} {' '.join(args)} left threads running: {lingering}"
    return subprocess.CompletedProcess([program, *args], code, text(out), text(err))


def streams() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n", write_through=True)


def text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def exit_code(call: Callable[[], object], err: io.TextIOWrapper) -> int:
    try:
        call()
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=err)
        return 1
    except Exception:
        traceback.print_exc(file=err)
        return 1
    return 0


@contextlib.contextmanager
def process_state(
    program: str,
    args: tuple[str, ...],
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    stdin: str,
    out: io.TextIOWrapper,
    err: io.TextIOWrapper,
) -> Iterator[None]:
    saved_argv, saved_cwd, saved_env = sys.argv, os.getcwd(), dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_signals = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        sys.argv = [program, *args]
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        with fresh_logging(), console_width(), said_once():
            yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def fresh_logging() -> Iterator[None]:
    """The root logger as a new process has it (no handler, WARNING), and the package's logger as it was."""
    root, ours = logging.getLogger(), logging.getLogger("llm_ide")
    saved = root.handlers[:], root.level, ours.handlers[:], ours.level
    root.handlers, ours.handlers = [], ours.handlers[:]
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers, root.level, ours.handlers, ours.level = saved


@contextlib.contextmanager
def said_once() -> Iterator[None]:
    """What a process warns about once (a model's missing usage or price, an endpoint that does not stream, the
    missing sandbox, a limit it cannot enforce) is unsaid at a child's start: the call starts with none said, the
    test's own are put back."""
    from llm_ide import errors

    with errors._said_lock:
        saved = set(errors._said)
        errors._said.clear()
    try:
        yield
    finally:
        with errors._said_lock:
            errors._said.clear()
            errors._said.update(saved)


@contextlib.contextmanager
def console_width() -> Iterator[None]:
    """The CLI's consoles are made at import; a child would read $COLUMNS at its start: the call's is used."""
    from llm_ide.cli import console as module

    consoles = [module.console, module.err_console]
    saved = [console._width for console in consoles]
    columns = os.environ.get("COLUMNS", "")
    for console in consoles:
        console._width = int(columns) if columns.isdigit() else None
    try:
        yield
    finally:
        for console, width in zip(consoles, saved, strict=True):
            console._width = width
