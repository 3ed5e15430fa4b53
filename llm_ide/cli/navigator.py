"""`llm-ide navigator serve`: the navigator as an MCP server on loopback, for any MCP-capable coding agent."""

from __future__ import annotations

import importlib
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_ide.cli.console import check_model_before_start, config_default, fail, interrupted_exit, warnings_on_console

MIN_TOKEN_CHARS = 16  # a bearer token shorter than this is refused (a new one has 43)

navigator_app = typer.Typer(
    name="navigator",
    help="The navigator (planner, permission gate, reviewer) on its own, for other agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


Host = Annotated[str, typer.Option(help="Loopback address to listen on.")]
Port = Annotated[int, typer.Option(help="Port; 0 picks a free one (the URL printed tells which).", min=0, max=65535)]
Repo = Annotated[Path, typer.Option(help="Repository the navigator explores (read-only).")]
NavigatorModel = Annotated[
    str | None,
    typer.Option(
        help="The navigator's model: provider:name, scripted:PATH, or an OpenAI-compatible name.",
        show_default=config_default("navigator.model") + ", else $LLM_IDE_MODEL",
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible endpoint.", show_default="navigator.base_url, else $OPENAI_BASE_URL"),
]
ConfigFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML file(s) overriding any config key.",
        show_default="none: llm_ide/prompts/default.yaml",
    ),
]
Task = Annotated[
    str | None,
    typer.Option(help="The task the agent works on, if the navigator should know it.", show_default="none"),
]
Served = Annotated[
    str | None,
    typer.Option(
        help="MODULE:NAME of any other Navigator object (or a callable returning one) to serve instead.",
        show_default="none: the model navigator",
    ),
]
Log = Annotated[
    Path | None,
    typer.Option(
        help="Append every request, its answer and the navigator's model calls here (JSON lines).",
        show_default="none",
    ),
]
NoToken = Annotated[
    bool,
    typer.Option(
        "--no-token",
        help="Serve without a bearer token: any local process may call the navigator (and spend its budget).",
        show_default="off: a token, $LLM_IDE_NAVIGATOR_TOKEN or a new one printed at start",
    ),
]


@navigator_app.command("serve")
def serve_command(
    host: Host = "127.0.0.1",
    port: Port = 8765,
    repo: Repo = Path("."),
    model: NavigatorModel = None,
    base_url: BaseUrl = None,
    config: ConfigFiles = None,
    task: Task = None,
    navigator: Served = None,
    log: Log = None,
    no_token: NoToken = False,
) -> None:
    """Serve the navigator over MCP (streamable HTTP) at http://HOST:PORT/mcp with the tools request_plan,
    request_permission, request_review and request_guidance. Every request must carry `Authorization: Bearer TOKEN`:
    the token is $LLM_IDE_NAVIGATOR_TOKEN when set, else a new one printed at start (clients, `navigator.mode: mcp`
    included, read it from that variable). Prints `navigator serving at URL` once it accepts requests; Ctrl-C stops
    it."""
    from llm_ide.errors import install_signal_policy
    from llm_ide.navigator.protocol import TOKEN_VARIABLE
    from llm_ide.navigator.server import bind, serve

    if log is not None and not log.parent.is_dir():
        raise fail(f"--log {log}: no such directory: {log.parent}")
    if log is not None and log.is_dir():
        raise fail(f"--log {log}: a directory, not a file")
    given = os.environ.get(TOKEN_VARIABLE, "").strip()
    if given and not no_token and len(given) < MIN_TOKEN_CHARS:
        raise fail(
            f"${TOKEN_VARIABLE}: the token is too short (at least {MIN_TOKEN_CHARS} characters; a shorter one is "
            "guessed by any local process): set a longer one, or unset it for a new one"
        )
    served = import_navigator(navigator) if navigator else model_navigator(repo, model, base_url, config, task)
    install_signal_policy()  # SIGTERM/SIGHUP, after the server's graceful stop: the navigator closed, exit 143/129
    try:
        sock = bind(host, port)
        token = None if no_token else announce_token()
        with warnings_on_console():
            serve(served, sock, announce, log, token)
    except KeyboardInterrupt as interrupt:
        raise interrupted_exit(interrupt) from None
    finally:
        if hasattr(served, "close"):
            served.close()


def announce_token() -> str:
    """The server's bearer token: $LLM_IDE_NAVIGATOR_TOKEN, or a new one, printed for the clients."""
    from llm_ide.navigator.protocol import TOKEN_VARIABLE

    given = os.environ.get(TOKEN_VARIABLE, "").strip()
    if given:
        typer.echo(f"navigator token: the one in ${TOKEN_VARIABLE}")
        return given
    token = secrets.token_urlsafe(32)
    typer.echo(f"navigator token: {token} (clients: export {TOKEN_VARIABLE}={token})")
    return token


def announce(url: str) -> None:
    typer.echo(f"navigator serving at {url}")
    sys.stdout.flush()


def model_navigator(
    repo: Path, model: str | None, base_url: str | None, config: list[Path] | None, task: str | None
) -> Any:
    """The model navigator `serve` runs (the settings, and LangGraph with them, are imported for it alone: a navigator
    of another party, `--navigator`, starts without them)."""
    from llm_ide.config import ConfigError, load_config, with_user_config
    from llm_ide.navigator.model import ModelNavigator

    if not repo.is_dir():
        raise fail(f"repository not found: {repo}")
    try:
        settings = load_config("default", overrides=with_user_config(config))
    except ConfigError as error:
        raise fail(str(error)) from None
    spec = model or settings.navigator.model or os.environ.get("LLM_IDE_MODEL")
    if not spec:
        raise fail("no model: pass --model (e.g. openai:gpt-5-mini, scripted:PATH), navigator.model or LLM_IDE_MODEL")
    base_url = base_url or settings.navigator.base_url
    check_model_before_start(spec, settings, base_url)
    return ModelNavigator.create(settings, spec, repo.resolve(), base_url, task=task or "")


def terminal_asker(settings: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """Before the run starts: `navigator.mode: human` has a terminal to ask on (what the navigator needs besides is
    the preflight's, at every door); then what asks it there (its module, with rich's syntax highlighting, is loaded
    for that mode only)."""
    if settings.navigator.mode != "human":
        return None
    if not sys.stdin.isatty():
        raise fail(
            "navigator.mode human asks on this terminal, and stdin is not one: run it on a terminal, or answer from "
            "Python (run_task returns the question; resume=… carries the answer)"
        )
    from llm_ide.cli.ask import ask_on_terminal

    return ask_on_terminal


def import_navigator(spec: str) -> Any:
    """`package.module:name` → the object (called first when it is a class or factory)."""
    from llm_ide.navigator.mcp_client import TOOLS

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
