"""The options of `llm-ide run`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from llm_ide.cli.console import config_default
from llm_ide.environments import KINDS


class NavigatorMode(StrEnum):
    off = "off"
    model = "model"
    human = "human"
    mcp = "mcp"


def environment_kind(value: str | None) -> str | None:
    """--environment, one kind of KINDS (mini-swe-agent's class names too, `DockerEnvironment`); another is refused
    as click refuses a choice."""
    if value is None:
        return None
    kind = value.lower().removesuffix("environment")
    if kind not in KINDS:
        raise typer.BadParameter(
            f"{value!r} is not one of {', '.join(map(repr, KINDS))}.", param_hint="'--environment'"
        )
    return kind


def environment_option(show_default: str | bool = True, *aliases: str) -> typer.models.OptionInfo:
    """The --environment of every command that runs the agent: one type, one check, one help (`show_default`: the
    command's default)."""
    return typer.Option(
        "--environment",
        *aliases,
        callback=environment_kind,
        metavar=f"<{'|'.join(KINDS)}>",
        help="local (on this host, in the repository) or docker (in a container, on a copy).",
        show_default=show_default,
    )


Repo = Annotated[
    Path,
    typer.Option(
        help="Repository to work on (local: edited in place; docker: copied in).", show_default="the current folder"
    ),
]
Task = Annotated[str | None, typer.Option("--task", "-t", help="The task text.", show_default="none; or --task-file")]
TaskFile = Annotated[
    Path | None, typer.Option(help="A file holding the task text (-: standard input).", show_default="none; or --task")
]
MODEL_HELP = "provider:name, scripted:PATH, or an OpenAI-compatible name."
RunModel = Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP, show_default="$LLM_IDE_MODEL")]
RunConfig = Annotated[
    list[Path] | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML file(s) overriding any config key.",
        show_default="none: llm_ide/prompts/default.yaml",
    ),
]
Output = Annotated[
    Path | None, typer.Option("--output", "-o", help="Output directory.", show_default="runs/<thread id>")
]
STEP_LIMIT = "Maximum number of operations{}; 0: no limit."  # {}: whose (a batch's: " per instance")
COST_LIMIT = "Maximum model cost in USD{}; 0: no limit."
StepLimit = Annotated[
    int | None, typer.Option(help=STEP_LIMIT.format(""), show_default=config_default("agent.step_limit"))
]
CostLimit = Annotated[
    float | None, typer.Option(help=COST_LIMIT.format(""), show_default=config_default("agent.cost_limit"))
]
ThreadId = Annotated[
    str | None,
    typer.Option(
        help="Run id; an unfinished run with this id resumes (with the same task; none given: the run's own).",
        show_default="run-<YYYYmmdd-HHMMSS>",
    ),
]


STORES = ("sqlite:", "postgres://", "postgresql://")


def store(spec: str | None) -> str | None:
    """A --checkpoint of a known kind, checked before anything runs (a batch's every instance failed on it)."""
    if spec is None or spec == "memory" or (spec.startswith(STORES) and spec != "sqlite:"):
        return spec
    raise typer.BadParameter(f"use sqlite:PATH, postgres://… or memory (got {spec})")


Checkpoint = Annotated[
    str | None,
    typer.Option(
        callback=store,
        help="sqlite:PATH | postgres://… | memory.",
        show_default="sqlite:<output>/<thread id>.checkpoint.sqlite",
    ),
]
Environment = Annotated[str | None, environment_option(config_default("environment.type") + "; docker with --image")]
Image = Annotated[
    str | None,
    typer.Option(help="Docker image; implies --environment docker.", show_default=config_default("environment.image")),
]
Navigator = Annotated[
    NavigatorMode | None,
    typer.Option(
        case_sensitive=False,
        help="A navigator beside the agent: model, human (asks here: y/n and a reason) or mcp (navigator.url).",
        show_default=config_default("navigator.mode"),
    ),
]
Reproduction = Annotated[
    Path | None,
    typer.Option(
        help="A script that reproduces the issue (Python, or .sh): installed beside the tools, run on the original "
        "code (its output in the task), by the `reproduce` action and at submit.",
        show_default="none",
    ),
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Show each model reply as it streams in (model.stream on).", show_default="off"
    ),
]
