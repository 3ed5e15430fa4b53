"""`llm-ide cleanup`: remove the containers this user's llm-ide runs left on this host, saying which."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from llm_ide.cli.console import console, fail, many


def cleanup_command(
    all_containers: Annotated[
        bool, typer.Option("--all", help="Also remove containers of runs that are still going.", show_default="off")
    ] = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Only the containers of this run id.", show_default="every run")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.", show_default="off")
    ] = False,
) -> None:
    """Remove the containers that your llm-ide runs on this host left behind (their process is gone).

    Only containers labelled with your user name and this host name at creation are considered: another user's, or
    another host's on a shared engine, are never touched."""
    from llm_ide.environments.base import EnvironmentFailure
    from llm_ide.environments.docker import cleanup_containers

    if run_id is not None and not run_id.strip():  # (`--run-id "$R"`, R unset): not every run's containers
        raise fail("--run-id is empty: give a run's id, or leave the option out for every run's containers")
    try:
        sweep = cleanup_containers(include_live=all_containers, run_id=run_id, dry_run=dry_run)
    except EnvironmentFailure as error:
        raise fail(str(error)) from None
    verb = "would remove" if dry_run else "removed"
    for container in sweep.removed:
        console.print(f"{verb} {escape(str(container))}")
    count = len(sweep.removed)
    message = f"{verb} {many(count, 'llm-ide container')}"
    if sweep.kept_live:
        message += f"; kept {len(sweep.kept_live)} of runs still going (--all removes them too)"
    console.print(message)
