"""The composition point: the variants this package ships and the variants of a run (those given by the caller, such
as a message channel to another agent, then those its settings ask for); the whole settings of a run, which need
none of the variants' behaviour, are whole_settings.py's. Nothing else in the core names a variant."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llm_ide.actions import ACTIONS
from llm_ide.messages.variant import Messages
from llm_ide.navigator.variant import Navigator
from llm_ide.reproduction.variant import Reproduction
from llm_ide.sampling.variant import Demonstrations, Sampling
from llm_ide.variant import CombinationError, ModelUse, Variant, Variants

BUNDLED: tuple[type[Variant], ...] = (Reproduction, Navigator, Sampling, Demonstrations, Messages)

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


def compose(settings: Any, given: Iterable[Variant | type[Variant]] = (), from_settings: bool = True) -> Variants:
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
