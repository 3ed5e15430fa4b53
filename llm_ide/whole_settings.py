"""The whole settings of a run: the core's sections, each bundled variant's as its settings module declares it (the
section a variant's `settings` names: its behaviour, nodes and LangGraph, not imported), and the attempts'. With
composition.py, the composition point: loading and checking a config needs no more than this."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt, create_model, field_validator

from llm_ide.errors import CombinationError
from llm_ide.navigator.settings import SECTION as NAVIGATOR
from llm_ide.patterns import BoundedPattern
from llm_ide.reproduction.settings import SECTION as REPRODUCTION
from llm_ide.sampling.settings import DEMONSTRATIONS, SAMPLING
from llm_ide.settings import BundledTemplates, CoreSettings, Strict

if TYPE_CHECKING:
    from llm_ide.variant import Variant

Declared = Mapping[str, tuple[Any, Any]]  # a variant's `settings`: section name → (its type, its default's factory)
BUNDLED_SECTIONS: tuple[Declared, ...] = (REPRODUCTION, NAVIGATOR, SAMPLING, DEMONSTRATIONS)  # composition.BUNDLED's


class AttemptTemplates(BundledTemplates):
    BUNDLED = ("attempts.yaml", "templates")

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
    """Several attempts at the task, reviewed, one patch chosen: a variant of the run, not of the agent's graph
    (llm_ide/attempts; templates in prompts/attempts.yaml)."""

    max: PositiveInt = 1  # 1: a plain run, no outer graph
    parallel: bool = False  # all attempts at once (LangGraph Send); otherwise one after another
    accept_score: Annotated[float, Field(ge=0, le=10)] | None = 8.0  # a review this high stops the run; None: never
    carry_lessons: bool = True  # the reviewer's critique and the attempt's lessons go into the next attempt
    cost_limit: NonNegativeFloat = 0.0  # the task's budget over every attempt, review and choice; 0: none
    choose: Literal["model", "best_score"] = "model"
    test_pattern: str = "test"  # a bash command matching it (regex) ran tests: its output goes to the reviewer
    test_output_chars: PositiveInt = 4000
    patch_chars: PositiveInt = 20000
    reviewer: RoleSettings = Field(default_factory=RoleSettings)
    chooser: RoleSettings = Field(default_factory=RoleSettings)
    templates: AttemptTemplates = Field(default_factory=lambda: AttemptTemplates())

    @field_validator("test_pattern")
    @classmethod
    def compiles(cls, value: str) -> str:
        BoundedPattern(value, what="the pattern")  # an invalid one is said where the config sets it
        return value


def sections(declared: Iterable[Declared]) -> dict[str, Any]:
    """The settings sections variants declare, as the fields of a settings class."""
    fields = (item for section in declared for item in section.items())
    return {name: (model, Field(default_factory=default)) for name, (model, default) in fields}


class Settings(create_model("BundledSections", __base__=CoreSettings, **sections(BUNDLED_SECTIONS))):  # type: ignore[misc]
    """The whole configuration of a run: the core's sections, each bundled variant's as its `settings` declare it
    (reproduction, navigator, sampling, demonstrations), and the attempts'."""

    attempts: AttemptsSettings = Field(default_factory=AttemptsSettings)


@cache
def settings_class(kinds: tuple[type[Variant], ...] = ()) -> type[Settings]:
    """The settings of a run with variants of one's own among `kinds`: their sections too (a section a variant of
    the package has already is refused in one line)."""
    fields = sections(kind.settings for kind in kinds if kind.settings not in BUNDLED_SECTIONS)
    if taken := sorted(set(fields) & set(Settings.model_fields)):
        raise CombinationError(f"a variant's settings section is taken already: {', '.join(taken)}")
    return create_model("Settings", __base__=Settings, **fields) if fields else Settings


def kinds_of(variants: Iterable[Variant | type[Variant]]) -> tuple[type[Variant], ...]:
    return tuple(dict.fromkeys(item if isinstance(item, type) else type(item) for item in variants))
