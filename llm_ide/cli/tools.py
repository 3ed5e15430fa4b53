"""`llm-ide tools list`, `llm-ide tools plan NAME` and `llm-ide tools cache`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from llm_ide.cli.console import fail

tools_app = typer.Typer(
    name="tools",
    help="The tools installed into each run's environment (llm_ide/tools/<name>.yaml).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

ToolsDir = Annotated[
    Path | None, typer.Option("--tools-dir", help="Folder of tool yaml files.", show_default="llm_ide/tools (bundled)")
]


@tools_app.command("list")
def list_command(tools_dir: ToolsDir = None) -> None:
    """Name, version, source, standalone Python and the first line of usage of each tool."""
    from llm_ide.tools.config import TOOLS_DIR, ToolConfigError, available_tools, load_tools

    folder = tools_dir or TOOLS_DIR
    try:
        configs = load_tools(available_tools(folder), folder)
    except ToolConfigError as error:
        raise fail(str(error)) from None
    rows = [("NAME", "VERSION", "SOURCE", "PYTHON", "USAGE")] + [
        (
            tool.tool_name,
            tool.version or "-",
            _shown(tool.source),
            tool.py_standalone or "-",
            tool.first_usage_line,
        )
        for tool in configs
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4])


def _shown(source: Path | None) -> str:
    if source is None:
        return "-"
    try:
        return str(source.relative_to(Path.cwd()))
    except ValueError:
        return str(source)


@tools_app.command("plan")
def plan_command(
    name: Annotated[str, typer.Argument(help="A tool name (or a path to a tool yaml).")],
    environment: Annotated[
        str, typer.Option("--environment", "-e", help="docker or local (they differ in the tools root).")
    ] = "docker",
    conda: Annotated[
        bool,
        typer.Option(
            "--conda", help="Plan for an image with conda (SWE-bench images): conda, not venv.", show_default="off"
        ),
    ] = False,
    tools_root: Annotated[
        str | None,
        typer.Option(
            "--tools-root",
            help="Where tools are installed.",
            show_default="/tools (docker), $TOOLS_ROOT (local: the tool's cache entry)",
        ),
    ] = None,
    tools_dir: ToolsDir = None,
) -> None:
    """Print the exact commands that install the tool, one per line, in order."""
    from llm_ide.environments import KINDS
    from llm_ide.tools.config import TOOLS_DIR, ToolConfigError, load_tool_config, tool_config_path
    from llm_ide.tools.plan import ScriptError, plan

    if environment not in KINDS:
        raise fail(f"--environment must be {' or '.join(sorted(KINDS))}, not {environment!r}")
    kind: Literal["docker", "local"] = "docker" if KINDS[environment].capabilities.image else "local"
    try:
        tool = load_tool_config(tool_config_path(name, tools_dir or TOOLS_DIR))
    except ToolConfigError as error:
        raise fail(str(error)) from None
    try:
        commands = plan(tool, kind, conda=conda, tools_root=tools_root)
    except ScriptError as error:
        raise fail(f"{tool_config_path(name, tools_dir or TOOLS_DIR)}: key `{error.key}`: {error}") from None
    for command in commands:
        typer.echo(command)


@tools_app.command("cache")
def cache_command(
    clear: Annotated[
        bool,
        typer.Option(
            "--clear", help="Remove every cached tool environment (refused while a run uses them).", show_default="off"
        ),
    ] = False,
) -> None:
    """The per-user cache of built tool environments: its folder, then each entry (where it is used, tool and key,
    size). Runs fill it; a changed tool source or another interpreter gets a new entry."""
    from llm_ide.environments.tools_cache import CACHE_VARIABLE, cache_alone, default_root
    from llm_ide.tools.cache import cache_entries, clear_cache

    root = default_root()
    if root is None:
        typer.echo(f"the tool cache is off ({CACHE_VARIABLE})")
        return
    if root.exists() and not root.is_dir():
        raise fail(f"{CACHE_VARIABLE}={root}: not a folder, so no run can use the cache (give a folder, or =off)")
    if clear:
        with cache_alone(root) as alone:
            if not alone:
                raise fail(
                    f"the tool cache {root} is in use by a run going on (its tools are there): clear it once none is"
                )
            removed = len(cache_entries(root))  # counted under the lock: what a run completed before it, too
            clear_cache(root)
        typer.echo(f"removed {removed} entries from {root}")
        return
    entries = cache_entries(root)
    typer.echo(f"{root} ({CACHE_VARIABLE}=DIR or =off to change)")
    for kind, name, size in entries:
        typer.echo(f"{kind:<7} {name:<40} {size / 1e6:8.1f} MB")
    if not entries:
        typer.echo("(empty)")
