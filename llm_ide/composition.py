"""The composition point: the variants this package ships, the whole settings of a run (the core's sections, every
variant's as its `settings` declare them, the attempts' section), and the variants of a run (those given by the
caller, such as a message channel to another agent, then those its settings ask for). Nothing else in the core names
a variant."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt, create_model, field_validator

from llm_ide.actions import ACTIONS
from llm_ide.messages.variant import Messages
from llm_ide.navigator.variant import Navigator
from llm_ide.patterns import BoundedPattern
from llm_ide.reproduction.variant import Reproduction
from llm_ide.sampling.variant import Demonstrations, Sampling
from llm_ide.settings import BundledTemplates, CoreSettings, Strict
from llm_ide.variant import CombinationError, ModelUse, Variant, Variants

BUNDLED: tuple[type[Variant], ...] = (Reproduction, Navigator, Sampling, Demonstrations, Messages)


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


ROLES = {"review": "reviewer", "choose": "chooser"}  # the attempts' roles and the settings that name their models


def attempt_model(spec: str, name: str) -> str:
    """`{attempt}` in a model spec picks one per attempt (its number) and role (`review`, `choose`)."""
    return spec.replace("{attempt}", name)


def role_spec(attempts: Any, model: str, role: str) -> str:
    """The model spec of the attempts' reviewer or chooser: the one its setting names, else the run's."""
    return attempt_model(getattr(attempts, ROLES[role]).model or model, role)


def attempt_uses(model: str, settings: Any, attempted: bool | None = None) -> list[ModelUse]:
    """With attempts (`attempted`; None: `attempts.max` > 1), the models of attempts 2 to `attempts.max`, the
    reviewer's and the chooser's, each spec once and not the first attempt's; without them, a spec of one model per
    attempt is refused."""
    attempts = getattr(settings, "attempts", None)
    attempted = attempts is not None and attempts.max > 1 if attempted is None else attempted
    if not attempted and "{attempt}" in model:
        raise CombinationError(f"model {model}: `{{attempt}}` names one model per attempt: give attempts.max > 1")
    if not attempted or attempts is None:
        return []
    roles = ["review"] + (["choose"] if attempts.choose == "model" else [])
    tries = [(f"attempt {number}'s model", attempt_model(model, str(number))) for number in range(2, attempts.max + 1)]
    named = [*tries, *((f"attempts.{ROLES[role]}.model", role_spec(attempts, model, role)) for role in roles)]
    uses: dict[str, str] = {}  # spec → the first setting naming it
    for setting, spec in named:
        uses.setdefault(spec, setting)
    return [ModelUse(setting, spec) for spec, setting in uses.items() if spec != attempt_model(model, "1")]


Kind = type[Variant]


def sections(kinds: Iterable[Kind]) -> dict[str, Any]:
    """The settings sections variants declare (`Variant.settings`: name → (its type, its default's factory)), as the
    fields of a settings class."""
    return {
        name: (model, Field(default_factory=default))
        for kind in kinds
        for name, (model, default) in kind.settings.items()
    }


class Settings(create_model("BundledSections", __base__=CoreSettings, **sections(BUNDLED))):  # type: ignore[misc]
    """The whole configuration of a run: the core's sections, each bundled variant's as its `settings` declare it
    (reproduction, navigator, sampling, demonstrations), and the attempts'."""

    attempts: AttemptsSettings = Field(default_factory=AttemptsSettings)


@cache
def settings_class(kinds: tuple[Kind, ...] = ()) -> type[Settings]:
    """The settings of a run with variants of one's own among `kinds`: their sections too (a section a variant of
    the package has already is refused in one line)."""
    fields = sections(kind for kind in kinds if kind not in BUNDLED)
    if taken := sorted(set(fields) & set(Settings.model_fields)):
        raise CombinationError(f"a variant's settings section is taken already: {', '.join(taken)}")
    return create_model("Settings", __base__=Settings, **fields) if fields else Settings


def kinds_of(variants: Iterable[Variant | Kind]) -> tuple[Kind, ...]:
    return tuple(dict.fromkeys(item if isinstance(item, type) else type(item) for item in variants))


def refused(settings: Any, items: list[Variant]) -> str | None:
    """Why variants cannot go together: a person asked in one run beside two agents messaging, or beside attempts."""
    people = [variant.name for variant in items if isinstance(variant, Navigator) and variant.mode == "human"]
    if people and any(isinstance(variant, Messages) for variant in items):
        return f"{', '.join(people)}: asks a person in one run at a time; it does not combine with two agents messaging"
    if people and settings.attempts.max > 1:
        return "navigator.mode human asks on the terminal in one run: it does not combine with attempts.max > 1"
    known = {*ACTIONS, *(name for variant in items for name in variant.actions)}
    if any(isinstance(variant, Navigator) for variant in items) and (unknown := set(settings.navigator.gate) - known):
        return f"navigator.gate: no action {', '.join(sorted(unknown))} (the run's actions: {', '.join(sorted(known))})"
    return None


def compose(settings: Any, given: Iterable[Variant | Kind] = (), from_settings: bool = True) -> Variants:
    """The variants of a run: those `given` (the caller's, outermost: their wrappers see what the others did; a
    variant class of one's own is there when the settings enable it), then the bundled ones its settings ask for
    (unless not `from_settings`: a graph drawn before its settings are known), in order; a variant given takes the
    place of the one its settings would make. The actions of the others answer that they are absent. A combination
    that cannot work is refused."""
    given = list(given)
    kinds_given = [item if isinstance(item, type) else type(item) for item in given]
    if unloaded := [(kind, key) for kind in kinds_given for key in kind.settings if not hasattr(settings, key)]:
        kind, key = unloaded[0]
        raise CombinationError(
            f"variant {kind.name}'s settings section `{key}` is not in the run's settings: load them with it "
            f"(load_config(..., variants=[{kind.__name__}]))"
        )
    made = [item for item in given if not isinstance(item, type)]
    kinds = [*(item for item in given if isinstance(item, type)), *(BUNDLED if from_settings else ())]
    chosen = [found for kind in kinds if (found := kind.enabled(settings)) is not None]
    items = made + [variant for variant in chosen if variant.name not in {g.name for g in made}]
    if reason := refused(settings, items):
        raise CombinationError(reason)
    names = {variant.name for variant in items}
    absent = {name: action for kind in BUNDLED if kind.name not in names for name, action in kind.actions.items()}
    return Variants(tuple(items), absent)
