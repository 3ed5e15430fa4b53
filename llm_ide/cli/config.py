"""`llm-ide config show`: the effective settings of a command and where each value comes from."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_ide.cli.console import console, fail

config_app = typer.Typer(
    name="config",
    help="The settings a command runs with: bundled config, user config file, --config files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
SHORT = 70  # characters of a value shown without --full


def shown_value(value: Any, full: bool) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if full or len(text) <= SHORT:
        return text
    return f"{text[:SHORT]}… ({len(text)} chars; --full shows it)"


def shown_origin(origin: str, user: Path | None, configs: list[Path]) -> str:
    from llm_ide.config import PROMPTS_DIR

    path = Path(origin)
    if path.parent == PROMPTS_DIR:
        return f"bundled {path.name}"
    if user is not None and path == user:
        return f"user config {user}"
    if origin == "built-in":
        return origin
    return f"--config {origin}" if path in configs else f"--base {origin}"  # a base file, or one it extends


def why_no_user_config() -> str:
    from llm_ide.config import USER_CONFIG_VARIABLE, default_user_config

    value = os.environ.get(USER_CONFIG_VARIABLE)
    if value == "off":
        return f"none ({USER_CONFIG_VARIABLE}=off)"
    said = "is unset" if value is None else "is empty (read as unset)"
    return f"none ({USER_CONFIG_VARIABLE} {said} and {default_user_config()} does not exist)"


@config_app.command("show")
def show_command(
    keys: Annotated[
        list[str] | None,
        typer.Argument(help="Only these settings or sections (e.g. agent.step_limit, model).", show_default="all"),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config", "-c", help="YAML file(s) merged over the rest, as a command's --config.", show_default="none"
        ),
    ] = None,
    base: Annotated[
        str,
        typer.Option(
            help="The bundled config: default (run) or swebench (swebench, evaluate); or a YAML file that extends one."
        ),
    ] = "default",
    full: Annotated[
        bool, typer.Option("--full", help="Long values (prompt templates) in full.", show_default="shortened")
    ] = False,
) -> None:
    """Every effective setting, `key: value  # origin`: bundled config < user config file < --config files."""
    from llm_ide.config import ConfigError, config_layers, explain, user_config_path

    try:
        user = user_config_path()
        rows = explain(config_layers(base, [*([user] if user else []), *(config or [])]))
    except ConfigError as error:
        raise fail(str(error)) from None
    marked = {str(name).upper() for key, value, _ in rows if key == "secrets" for name in value or []}
    wanted = keys or []
    names = {".".join(row[0].split(".")[:end]) for row in rows for end in range(1, row[0].count(".") + 2)}
    if unknown := [key for key in wanted if key not in names]:
        section, _, last = unknown[0].rpartition(".")
        siblings = sorted(name.rpartition(".")[2] for name in names if name.rpartition(".")[0] == section)
        close = difflib.get_close_matches(last, siblings, n=1)
        hint = f"did you mean {'.'.join(filter(None, [section, close[0]]))}? " if close else ""
        raise fail(f"no setting named {', '.join(unknown)} ({hint}llm-ide config show lists them all)")
    rows = [row for row in rows if not wanted or any(row[0] == k or row[0].startswith(k + ".") for k in wanted)]
    console.print(f"# user config: {user or why_no_user_config()}", markup=False)
    for key, value, origin in rows:
        shown = shown_value(masked(key, value, marked), full)
        console.print(f"{key}: {shown}  # {shown_origin(origin, user, config or [])}", markup=False)


def masked(key: str, value: Any, marked: set[str]) -> Any:
    """A setting as `config show` prints it: a secret (by its key's name, a name the settings list under `secrets`,
    or a credential by its shape) masked."""
    from llm_ide.credentials import is_secret_name, redacted

    if key == "secrets":  # the names of secrets, not secrets
        return value
    return redacted(value, any(is_secret_name(part) or part.upper() in marked for part in key.split(".")))
