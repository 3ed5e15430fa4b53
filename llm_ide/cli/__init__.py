"""The `llm-ide` and `mini-extra` command-line interfaces: one module per area, registered here."""

from __future__ import annotations

import atexit
import difflib
import gc
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llm_ide import deferred
from llm_ide.cli.lazy import lazy_group
from llm_ide.credentials import credentials_in
from llm_ide.errors import LlmIdeError, Terminated
from llm_ide.secrets import redact, register, registered
from llm_ide.terminal import terminal_safe
from llm_ide.version import __version__

COMMAND_GC_THRESHOLD = 100_000


class App(typer.Typer):
    """Every bad input is one line on stderr and exit code 2, never a traceback or a box: the options' own checks
    (an unknown option, `--environment kube`) and an error of ours that no command caught (e.g. a checkpoint store
    that cannot be opened, with the error's exit code)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from llm_ide.errors import ending

        deferred.install()
        given = kwargs.get("args", args[0] if args else sys.argv[1:])
        values = [part for argument in given or () for part in str(argument).split("=", 1)]  # (`--base-url=URL`)
        register(found for value in values for found in credentials_in(value))  # a URL's password
        with collected_rarely(), pipe_guarded() as guard:
            try:
                code = super().__call__(*args, **{"prog_name": self.info.name, **kwargs, "standalone_mode": False})
            except LlmIdeError as error:
                one_line(ending(error)[1])
                sys.exit(error.exit_code)
            except typer.Abort:
                one_line("aborted")
                sys.exit(1)
            except Exception as error:
                if interrupted(error):  # as typer ends a command on Ctrl-C
                    sys.exit(guard.code or 130)
                if not is_usage_error(error):
                    raise
                if type(error).__name__ == "NoArgsIsHelpError":  # `llm-ide` alone: the help
                    error.show()
                    sys.exit(0)
                command = f" (see: {error.ctx.command_path} --help)" if getattr(error, "ctx", None) else ""
                one_line(usage_message(error.format_message()) + command)
                sys.exit(error.exit_code)
            if guard.failed is not None:  # (click's probe of a stream's kind swallows the error)
                one_line(str(guard.failed))
                sys.exit(guard.failed.exit_code)
            sys.exit(guard.code or (code if isinstance(code, int) else 0))


def interrupted(error: BaseException | None) -> bool:
    """Whether a Ctrl-C caused `error`: Python 3.11 wraps one that arrives in an import's `__set_name__` into a
    RuntimeError."""
    while error is not None and not isinstance(error, KeyboardInterrupt):
        error = error.__cause__
    return error is not None


@contextmanager
def collected_rarely() -> Iterator[None]:
    """A command's start-up makes ~200,000 objects that live as long as its process (the imports): collecting the
    young generation every 700 allocations, ~250 passes walk them (~0.15 s of CPU); every COMMAND_GC_THRESHOLD, one
    or two. A run's loop sets its own (run/outputs.py, settled_heap)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(COMMAND_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def frozen_at_exit() -> None:
    """The process's garbage collected once more at exit, as the interpreter would, then what is still alive frozen:
    the interpreter's own full passes as it tears the modules down (three, each walking the ~300,000 objects of the
    imports and the run: ~0.3 s of CPU per `llm-ide run`) then walk nothing. The last exit handler: registered when
    the command line is imported, before any of a command's own."""
    gc.collect()
    gc.freeze()


atexit.register(frozen_at_exit)


class PipeGuard:
    """The command's stdout. When its reader goes (`llm-ide run … | head`), the write that finds the pipe closed
    ends the command as SIGPIPE would, but as Ctrl-C ends a run (interrupted, resumable, told on stderr; exit 141):
    the stream is pointed at /dev/null first, so that nothing written after, nor the flush at exit, fails again."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.code = 0  # 141 once the pipe closed: where typer ended it as a Ctrl-C (130), any command exits so
        self.failed: LlmIdeError | None = None  # a write that failed: said at the end, if click swallowed it

    def write(self, text: str) -> int:
        return self.guarded(self.stream.write, text)

    def flush(self) -> None:
        self.guarded(self.stream.flush)

    def guarded(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            self.code = 128 + signal.SIGPIPE
            raise Terminated(signal.SIGPIPE) from None
        except OSError as error:  # (a full disk, /dev/full)
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            self.failed = LlmIdeError(f"cannot write the command's output: {error.strerror or error}")
            raise self.failed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def pipe_guarded() -> Iterator[PipeGuard]:
    stdout = sys.stdout
    sys.stdout = guard = PipeGuard(stdout)
    try:
        yield guard
    finally:
        sys.stdout = stdout


def is_usage_error(error: Exception) -> bool:
    """Click's own errors (typer vendors click in some versions: told by their shape, not their module)."""
    return any(cls.__name__ == "ClickException" for cls in type(error).__mro__)


def usage_message(message: str) -> str:
    """Click's message on one line, without pydantic's `Value error, ` (typer validates with it), and an unknown
    choice with the nearest one: `'lokal' is not one of 'local', 'docker'. (did you mean local?)`."""
    message = " ".join(message.replace("Value error, ", "").split())
    choice = re.search(r"'([^']*)' is not one of ((?:'[^']*'(?:, )?)+)\.", message)
    close = difflib.get_close_matches(choice[1], re.findall(r"'([^']*)'", choice[2]), n=1) if choice else []
    return message + (f" (did you mean {close[0]}?)" if close else "")


def one_line(message: str) -> None:
    error = escape(terminal_safe(redact(message, registered())))
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {error}")


def print_version(value: bool) -> None:
    if value:
        typer.echo(f"llm-ide {__version__}")
        raise typer.Exit()


def options(
    version: Annotated[
        bool, typer.Option("--version", callback=print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """The options every command line starts with (`--install-completion` and `--show-completion`: typer's)."""


COMMANDS = {
    "run": "run:run",
    "demo": "demo:demo",
    "inspect": "inspect:inspect",
    "replay": "replay:replay_command",
    "report": "inspector:report_command",
    "graph": "inspector:graph_command",
    "context": "context:context_command",
    "cleanup": "cleanup:cleanup_command",
    "swebench": "swebench:swebench_command",
    "swebench-single": "swebench:swebench_single_command",
    "evaluate": "evaluation:evaluate_command",
    "config": "config:config_app",
    "tools": "tools:tools_app",
    "coop": "coop:coop_app",
    "navigator": "navigator:navigator_app",
}  # each command's module is imported when it runs: --version, --help and completion import none (cli/lazy.py)
EXTRA_COMMANDS = {name: COMMANDS[name] for name in ("swebench", "swebench-single")}

app = App(
    name="llm-ide",
    help="A software-engineering agent with an IDE-like structured memory, built as a LangGraph state machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    callback=options,
    cls=lazy_group(COMMANDS),
)
extra_app = App(
    name="mini-extra",
    help="mini-swe-agent compatible entry points, with llm-ide as the agent.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    callback=options,
    cls=lazy_group(EXTRA_COMMANDS),
)
