from __future__ import annotations

import typer

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

# Command registration: each area keeps its commands in its own module (imports inside the functions stay lazy).

from llm_ide.run.commands import demo, inspect, run  # noqa: E402

app.command("run")(run)
app.command("demo")(demo)
app.command("inspect")(inspect)
from llm_ide.codeview.cli import context_command  # noqa: E402

app.command("context")(context_command)
from llm_ide.environments.commands import cleanup_command  # noqa: E402

app.command("cleanup")(cleanup_command)

from llm_ide.run.swebench_commands import evaluate_command, swebench_command, swebench_single_command  # noqa: E402

app.command("swebench")(swebench_command)
app.command("swebench-single")(swebench_single_command)
app.command("evaluate")(evaluate_command)
extra_app.command("swebench")(swebench_command)
extra_app.command("swebench-single")(swebench_single_command)
from llm_ide.tools.commands import tools_app  # noqa: E402

app.add_typer(tools_app, name="tools")
