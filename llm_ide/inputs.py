"""What a graph served by LangGraph Studio starts from: the input schemas it shows (required fields marked) and the
check that turns a missing one into one clear message instead of a KeyError deep in a node."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Required

from typing_extensions import TypedDict  # pydantic (Studio's schemas) needs it on Python < 3.12

from llm_ide.errors import ConfigError, UsageError

REQUIRED = {
    "task": "the task text",
    "repo": "a local repository path",
    "model": "as for --model, e.g. scripted:PATH",
}


@dataclass(frozen=True)
class Names:
    """What the door used calls a run's inputs, in a line that asks for one: the command line's options by default,
    the Python API's arguments (API), the graph input's fields in Studio (GRAPH)."""

    base_url: str = "--base-url"
    model: str = "--model"
    repo: str = "--repo"
    image: str = "--image IMAGE (or environment.image)"
    output: str = "--output"
    checkpoint: str = "--checkpoint"


CLI = Names()
API = Names("`base_url`", "`model`", "`repo`", "`image` (or environment.image)", "`output_dir`", "`checkpoint`")
GRAPH = Names(
    *(f"the graph input's `{name}`" for name in ("base_url", "model", "repo")),
    "environment.image in the graph input's `config`",
    "the graph input's `output`",
)


class InputError(UsageError, ValueError):
    """A graph input that lacks a required field (a ValueError: LangGraph's server shows its message to the client)."""


class StudioInput(TypedDict, total=False):
    """The agent graph's input in Studio."""

    task: Required[str]
    repo: Required[str]
    model: Required[str]
    base_url: str
    config: dict[str, Any]  # settings overrides, validated like --config (`base`: the bundled config to start from)


class AttemptsStudioInput(StudioInput, total=False):
    """The attempts graph's input in Studio."""

    output: str  # the folder of the attempts' runs (default runs/<thread id>)


AGENT_KINDS = {name: (str, "text") for name in (*REQUIRED, "base_url", "base_commit", "output")} | {
    "config": (dict, "a mapping of settings, as a --config file holds")
}


def check_fields(
    state: dict[str, Any], kinds: dict[str, tuple[type, str]], required: dict[str, str], blank: tuple[str, ...] = ()
) -> None:
    """An InputError naming every input of the wrong type, else every required one that is missing or blank (those
    in `blank` only when missing: a blank one is the run's preflight's to refuse, as at every door)."""
    wrong = [
        f"`{name}` must be {said}, not {type(state[name]).__name__} {state[name]!r:.60}"
        for name, (kind, said) in kinds.items()
        if state.get(name) is not None and not isinstance(state[name], kind)
    ]
    if wrong:
        raise InputError(f"the graph input's {'; '.join(wrong)}")
    missing = [
        name
        for name in required
        if state.get(name) is None or (name not in blank and (not state[name] or not str(state[name]).strip()))
    ]
    if missing:
        wanted = "; ".join(f"`{name}` ({required[name]})" for name in missing)
        raise InputError(f"the graph input needs {wanted}")


def require_inputs(state: dict[str, Any]) -> None:
    """The agent graph's input: `check_fields` (a blank task: the preflight's), the repository an absolute path."""
    check_fields(state, AGENT_KINDS, REQUIRED, blank=("task",))
    if not Path(state["repo"]).expanduser().is_absolute():  # (relative: to the server's folder, no user's choice)
        repo = state["repo"]
        raise InputError(f"the graph input's `repo` must be an absolute path on the server's machine, not {repo!r}")


def unknown_field(given: dict[str, Any], schema: type) -> InputError | None:
    """The first field of `given` that `schema` (a graph's input) lacks, named as `--confg` is at the command line
    (LangGraph would drop it unsaid: a mistyped `config` ignored), else None."""
    known = list(schema.__annotations__)
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return None
    close = difflib.get_close_matches(unknown[0], known, n=1)
    hint = f"did you mean {close[0]}?; " if close else ""
    return InputError(f"the graph input's `{unknown[0]}`: unknown field ({hint}use {', '.join(known)})")


def input_config_error(error: ConfigError) -> ConfigError:
    """A mistake in the graph input's `config`, named by that field as the other fields' are (the settings it loads
    name their layer `settings`)."""
    said = str(error)
    return (
        ConfigError(f"the graph input's `config`: {said.removeprefix('settings: ')}")
        if said.startswith("settings: ")
        else error
    )
