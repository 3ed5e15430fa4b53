from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console


def cleanup_command(
    all_containers: Annotated[
        bool, typer.Option("--all", help="Also remove containers of runs that are still going.")
    ] = False,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only the containers of this run id.")] = None,
) -> None:
    """Remove the containers left behind by llm-ide runs (labelled `llm-ide`) whose process is gone."""
    from llm_ide.environments.base import EnvironmentFailure
    from llm_ide.environments.docker import cleanup_containers

    try:
        removed, skipped = cleanup_containers(include_live=all_containers, run_id=run_id)
    except EnvironmentFailure as error:
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {error}")
        raise typer.Exit(2) from None
    message = f"removed {removed} llm-ide container{'s' if removed != 1 else ''}"
    if skipped:
        message += f"; kept {skipped} of runs still going (--all removes them too)"
    Console(highlight=False, soft_wrap=True).print(message)
