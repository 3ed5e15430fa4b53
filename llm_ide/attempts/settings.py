"""The `attempts:` section of the settings (defaults in prompts/default.yaml, templates in prompts/attempts.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveInt, field_validator

from llm_ide.patterns import BoundedPattern
from llm_ide.settings import Strict, bundled_yaml


class AttemptTemplates(Strict):
    review_system: str
    review: str
    choose_system: str
    choose: str
    carried_lesson: str
    no_patch: str
    no_tests: str
    reasoning_step: str


class RoleSettings(Strict):
    model: str | None = None  # None: the agent's model (`{attempt}` in it becomes the role's name)


class AttemptsSettings(Strict):
    max: PositiveInt = 1  # 1: a plain run, no outer graph
    parallel: bool = False  # all attempts at once (LangGraph Send); otherwise one after another
    accept_score: float | None = 8.0  # a review score this high stops the run; None: never early
    carry_lessons: bool = True  # the reviewer's critique and the attempt's lessons go into the next attempt
    cost_limit: NonNegativeFloat = 0.0  # the task's budget over every attempt, review and choice; 0: none
    choose: Literal["model", "best_score"] = "model"
    test_pattern: str = "test"  # a bash command matching it (regex) ran tests: its output goes to the reviewer
    test_output_chars: PositiveInt = 4000
    patch_chars: PositiveInt = 20000
    reviewer: RoleSettings = Field(default_factory=RoleSettings)
    chooser: RoleSettings = Field(default_factory=RoleSettings)

    @field_validator("test_pattern")
    @classmethod
    def compiles(cls, value: str) -> str:
        BoundedPattern(value, what="the pattern")  # an invalid one is said where the config sets it
        return value

    templates: AttemptTemplates = Field(
        default_factory=lambda: AttemptTemplates(**bundled_yaml("attempts.yaml")["templates"])
    )
