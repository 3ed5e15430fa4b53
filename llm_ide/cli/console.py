"""What every command shares: the consoles, the one-line failure, live run events, model warnings, help defaults."""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from llm_ide.config import bundled_config
from llm_ide.secrets import redact
from llm_ide.terminal import terminal_safe

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # `openai:x:` is no emoji


def fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(2)


def print_event(event: Any) -> None:
    if event.kind == "tool":
        tool_progress()(event.tool)
    elif event.kind == "phase":
        style = "yellow" if event.phase.startswith("warning:") else "dim"
        console.print(f"[{style}]… {escape(terminal_safe(event.phase))}[/]")
    elif event.kind == "step":
        observation = terminal_safe(event.observation)  # a command's escape codes never reach the terminal
        first = next((line for line in observation.splitlines() if line.strip()), "")
        console.print(f"[bold cyan]step {event.step:>3}[/] {escape(terminal_safe(event.action)[:110])}")
        if first:
            console.print(f"         [dim]→ {escape(first[:110])}[/]  [green]${event.cost:.4f}[/]")


@cache
def tool_progress() -> Any:
    from llm_ide.tools.progress import ToolProgress

    return ToolProgress(console)


def interrupted_exit(interrupt: KeyboardInterrupt) -> typer.Exit:
    """Ctrl-C exits 130; SIGTERM/SIGHUP (`errors.Terminated`) 128 + the signal number."""
    from llm_ide.errors import Terminated

    return typer.Exit(interrupt.code if isinstance(interrupt, Terminated) else 130)


PROGRAMS = ("llm-ide", "mini-extra")


def command_line(*extra: str) -> str:
    """This process's command line, shell-quoted, with `extra` arguments appended: what resumes a run."""
    program = Path(sys.argv[0]).name
    return shlex.join([program if program in PROGRAMS else "llm-ide", *sys.argv[1:], *extra])


def print_interrupted(note: str, *extra: str) -> None:
    """Ctrl-C or SIGTERM: say so, what was kept, and the exact command that continues."""
    err_console.print(f"[bold yellow]interrupted[/]: {escape(note)}")
    err_console.print("resume with:")
    err_console.print(command_line(*extra), markup=False)


class _ConsoleWarnings(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(f"[yellow]{escape(terminal_safe(redact(record.getMessage())))}[/]")


@contextmanager
def warnings_on_console() -> Iterator[None]:
    """Warnings shown as they happen, not only logged: the model's retries (with their reason) and its other
    warnings, and the environment's (local commands that run unsandboxed, without bubblewrap)."""
    handler = _ConsoleWarnings(logging.WARNING)
    loggers = [logging.getLogger(name) for name in ("llm_ide.models", "llm_ide.environment")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def config_default(key: str, config: str = "default") -> str:
    """`key` and its value in a bundled config, for `--help`: `config agent.step_limit = 100`."""
    value: Any = bundled_config(config)
    for part in key.split("."):
        value = getattr(value, part)
    return f"{'' if config == 'default' else config + ' '}config {key} = {'none' if value is None else value}"


PREFLIGHT_TIMEOUT = 2.0  # seconds to connect to the model's endpoint before the run starts


def check_model_before_start(model: str, settings, base_url: str | None) -> None:
    """Model name, API key and endpoint: checked before the environment starts and the tools install."""
    from llm_ide.swebench.preflight import SWEbenchError, check_model

    try:
        check_model(model, settings, base_url, timeout=PREFLIGHT_TIMEOUT)
    except SWEbenchError as error:
        raise fail(str(error)) from None
