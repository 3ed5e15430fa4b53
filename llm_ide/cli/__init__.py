"""The `llm-ide` and `mini-extra` command-line interfaces: one module per area, registered here."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llm_ide.cli.cleanup import cleanup_command
from llm_ide.cli.config import config_app
from llm_ide.cli.context import context_command
from llm_ide.cli.coop import coop_app
from llm_ide.cli.inspect import inspect
from llm_ide.cli.inspector import graph_command, report_command
from llm_ide.cli.navigator import navigator_app
from llm_ide.cli.replay import replay_command
from llm_ide.cli.run import demo, run
from llm_ide.cli.swebench import evaluate_command, swebench_command, swebench_single_command
from llm_ide.cli.tools import tools_app
from llm_ide.version import __version__


class App(typer.Typer):
    """Every bad input is one line on stderr and exit code 2, never a traceback or a box: the options' own checks
    (an unknown option, `--environment kube`) and an error of ours that no command caught (e.g. a checkpoint store
    that cannot be opened, with the error's exit code)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from llm_ide.errors import LlmIdeError, ending

        try:
            code = super().__call__(*args, **{"prog_name": self.info.name, **kwargs, "standalone_mode": False})
        except LlmIdeError as error:
            one_line(ending(error)[1])
            sys.exit(error.exit_code)
        except typer.Abort:
            one_line("aborted")
            sys.exit(1)
        except Exception as error:
            if not is_usage_error(error):
                raise
            if type(error).__name__ == "NoArgsIsHelpError":  # `llm-ide` alone: the help
                error.show()
                sys.exit(0)
            command = f" (see: {error.ctx.command_path} --help)" if getattr(error, "ctx", None) else ""
            one_line(" ".join(error.format_message().split()) + command)
            sys.exit(error.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def is_usage_error(error: Exception) -> bool:
    """Click's own errors (typer vendors click in some versions: told by their shape, not their module)."""
    return any(cls.__name__ == "ClickException" for cls in type(error).__mro__)


def one_line(message: str) -> None:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}")


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


app = App(
    name="llm-ide",
    help="A software-engineering agent with an IDE-like structured memory, built as a LangGraph state machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    callback=options,
)
extra_app = App(
    name="mini-extra",
    help="mini-swe-agent compatible entry points, with llm-ide as the agent.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    callback=options,
)

app.command("run")(run)
app.command("demo")(demo)
app.command("inspect")(inspect)
app.command("replay")(replay_command)
app.command("report")(report_command)
app.command("graph")(graph_command)
app.command("context")(context_command)
app.command("cleanup")(cleanup_command)
app.command("swebench")(swebench_command)
app.command("swebench-single")(swebench_single_command)
app.command("evaluate")(evaluate_command)
app.add_typer(config_app, name="config")
app.add_typer(tools_app, name="tools")
app.add_typer(coop_app, name="coop")
app.add_typer(navigator_app, name="navigator")
extra_app.command("swebench")(swebench_command)
extra_app.command("swebench-single")(swebench_single_command)
