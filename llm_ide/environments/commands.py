from __future__ import annotations

import typer
from rich.console import Console


def cleanup_command() -> None:
    """Remove every container left behind by llm-ide runs (labelled `llm-ide`)."""
    from llm_ide.environments.base import EnvironmentFailure
    from llm_ide.environments.docker import cleanup_containers

    try:
        removed = cleanup_containers()
    except EnvironmentFailure as error:
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {error}")
        raise typer.Exit(2) from None
    Console(highlight=False).print(f"removed {removed} llm-ide container{'s' if removed != 1 else ''}")
