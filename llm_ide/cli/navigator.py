"""`llm-ide navigator serve`: the navigator as an MCP server on loopback, for any MCP-capable coding agent."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_ide.cli.console import fail
from llm_ide.navigator.mcp_client import TOOLS

navigator_app = typer.Typer(
    name="navigator",
    help="The navigator (planner, permission gate, reviewer) on its own, for other agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@navigator_app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option(help="Loopback address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port; 0 picks a free one (the URL printed tells which).")] = 8765,
    navigator: Annotated[
        str | None,
        typer.Option(
            help="MODULE:NAME of any Navigator object (or a callable returning one) to serve.",
            show_default="none: the model navigator",
        ),
    ] = None,
) -> None:
    """Serve the navigator over MCP (streamable HTTP) at http://HOST:PORT/mcp with the tools request_permission,
    request_review and request_guidance. Prints `navigator serving at URL` once it accepts requests; Ctrl-C stops it."""
    from llm_ide.navigator.server import bind, serve

    if navigator is None:
        raise fail("give --navigator MODULE:NAME")
    served = import_navigator(navigator)
    sock = bind(host, port)
    serve(served, sock, announce)


def announce(url: str) -> None:
    typer.echo(f"navigator serving at {url}")
    sys.stdout.flush()


def import_navigator(spec: str) -> Any:
    """`package.module:name` → the object (called first when it is a class or factory)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise fail(f"--navigator {spec}: expected MODULE:NAME")
    sys.path.insert(0, str(Path.cwd()))
    try:
        target = getattr(importlib.import_module(module_name), attribute)
        factory = isinstance(target, type) or (callable(target) and not hasattr(target, "request_permission"))
        served = target() if factory else target
    except (ImportError, AttributeError, TypeError) as error:
        raise fail(f"--navigator {spec}: {error}") from None
    finally:
        sys.path.pop(0)
    missing = [name for name in TOOLS if not hasattr(served, name)]
    if missing:
        raise fail(f"--navigator {spec}: not a navigator (no {', '.join(missing)})")
    return served
