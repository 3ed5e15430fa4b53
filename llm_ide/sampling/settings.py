"""The `sampling:` and `demonstrations:` sections; their prompt templates live in `prompts/sampling.yaml`."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PositiveInt

from llm_ide.settings import BundledTemplates, Strict

MAX_K = 16
TRAJECTORY_FORMAT = "llm-ide-1"  # llm_ide.run.trajectory.FORMAT


class SamplingTemplates(BundledTemplates):
    """Jinja2 templates of the sampler's calls and of the demonstrations; a template left out keeps its default."""

    BUNDLED = ("sampling.yaml", "templates")

    candidate: str
    ask_colleagues: str
    pairwise: str
    demonstration: str
    demonstrations: str


class SamplingSettings(Strict):
    """`k` candidate actions at each `act` (1: no sampling), deduplicated, then one chosen by `choice`."""

    k: PositiveInt = Field(1, le=MAX_K)
    choice: Literal["ask_colleagues", "pairwise"] = "ask_colleagues"
    model: str | None = None  # the model of the choosing calls (discriminator, comparisons); None: the agent's
    n: Literal["auto", "never"] = "auto"  # auto: the k candidates in one request (`n`) where the provider takes it
    demonstration_max_chars: PositiveInt = 16000  # each demonstration's ceiling in the prompt (head and tail kept)
    templates: SamplingTemplates = Field(default_factory=lambda: SamplingTemplates())


@cache
def read_trajectory(path: Path, mtime_ns: int) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable trajectory ({error})") from None
    if not isinstance(data, dict) or data.get("format") != TRAJECTORY_FORMAT or "operations" not in data:
        raise ValueError(f"{path}: not an llm-ide trajectory (format {TRAJECTORY_FORMAT})")
    return data


def read_demonstration(path: Path) -> dict[str, Any]:
    """A trajectory of ours (its task, operations, submission), read once while the file is unchanged."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        raise ValueError(f"no trajectory file {path}") from None
    return read_trajectory(path, mtime)


def check_demonstrations(paths: list[Path]) -> list[Path]:
    for path in paths:
        read_demonstration(path)
    return paths


# trajectories of ours: paths, written as YAML text
Demonstrations = Annotated[list[Annotated[Path, Field(strict=False)]], AfterValidator(check_demonstrations)]


# the Sampling and the Demonstrations variants' `settings`
SAMPLING: dict[str, tuple[Any, Any]] = {"sampling": (SamplingSettings, SamplingSettings)}
DEMONSTRATIONS: dict[str, tuple[Any, Any]] = {"demonstrations": (Demonstrations, list)}
