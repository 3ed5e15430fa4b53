"""The `reproduction:` section of the settings (defaults in prompts/default.yaml, templates in
prompts/reproduction.yaml)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PositiveInt, model_validator
from pydantic_core import PydanticCustomError

from llm_ide.settings import BundledTemplates, Seconds, Strict

PROMPTS = "reproduction.yaml"


class ReproductionTemplates(BundledTemplates):
    """Jinja2 templates; one left out keeps its default."""

    BUNDLED = (PROMPTS, "templates")

    command: str
    write_system: str
    write: str
    no_test: str
    not_shown: str
    task_notes: str
    observation: str
    none: str
    absent: str


class Markers(Strict):
    """The lines a reproduction prints (Agentless's): without one, its exit status tells (0: resolved)."""

    reproduced: str = "Issue reproduced"
    resolved: str = "Issue resolved"
    other: str = "Other issues"

    @model_validator(mode="after")
    def distinct(self) -> Markers:
        texts = [text for text in (self.reproduced, self.resolved, self.other) if text]
        if len(set(texts)) < len(texts):
            raise PydanticCustomError("markers", "the markers must differ: one line cannot say two verdicts")
        return self


class ReproductionSettings(Strict):
    generate: bool = False  # the agent writes reproduction tests before its first step, each validated
    tries: PositiveInt = 3  # the writing phase's model calls at most
    keep: PositiveInt = 1  # validated tests that end the phase
    timeout: Seconds = 120.0  # seconds per run of a reproduction: a hanging one is cut there
    output_chars: PositiveInt = 3000  # of a reproduction's output, in prompts and records (head and tail)
    files_chars: PositiveInt = 4000  # of the repository's file list shown to the writer
    markers: Markers = Field(default_factory=Markers)
    verify: bool = True  # attempts: each patch run in a clean environment against the reproductions and regressions
    regression: bool = True  # ... and against the repository's tests that passed before and touch the edited files
    regression_files: PositiveInt = 4  # test files at most per patch
    regression_command: str = (
        '"$(command -v python || command -v python3)" -m pytest -rA -p no:cacheprovider -q'
        " --continue-on-collection-errors {{ files }}"
    )
    regression_timeout: Seconds = 900.0
    templates: ReproductionTemplates = Field(default_factory=lambda: ReproductionTemplates())


# the Reproduction variant's `settings`
SECTION: dict[str, tuple[Any, Any]] = {"reproduction": (ReproductionSettings, ReproductionSettings)}
