"""The `llm-ide` and `mini-extra` command-line interfaces: one module per area, registered here."""

from __future__ import annotations

import typer

from llm_ide.cli.cleanup import cleanup_command
from llm_ide.cli.context import context_command
from llm_ide.cli.inspect import inspect
from llm_ide.cli.run import demo, run
from llm_ide.cli.swebench import evaluate_command, swebench_command, swebench_single_command
from llm_ide.cli.tools import tools_app

app = typer.Typer(
    name="llm-ide",
    help="A software-engineering agent with an IDE-like structured memory, built as a LangGraph state machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
extra_app = typer.Typer(
    name="mini-extra",
    help="mini-swe-agent compatible entry points, with llm-ide as the agent.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

app.command("run")(run)
app.command("demo")(demo)
app.command("inspect")(inspect)
app.command("context")(context_command)
app.command("cleanup")(cleanup_command)
app.command("swebench")(swebench_command)
app.command("swebench-single")(swebench_single_command)
app.command("evaluate")(evaluate_command)
app.add_typer(tools_app, name="tools")
extra_app.command("swebench")(swebench_command)
extra_app.command("swebench-single")(swebench_single_command)
