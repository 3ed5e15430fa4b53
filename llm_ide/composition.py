"""The composition point: the variants this package ships, the whole settings object assembled from the core's
sections and theirs, and the variants of a run (those its settings ask for, then those given by the caller, such as
a message channel to another agent). Nothing else in the core names a variant."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field, create_model

from llm_ide.attempts.variant import Attempts
from llm_ide.messages.variant import Messages
from llm_ide.navigator.variant import Navigator
from llm_ide.reproduction.variant import Reproduction
from llm_ide.sampling.variant import Demonstrations, Sampling
from llm_ide.settings import CoreSettings
from llm_ide.variant import Variant, Variants

BUNDLED: tuple[type[Variant], ...] = (Reproduction, Navigator, Sampling, Demonstrations, Messages, Attempts)


def assemble(core: type[CoreSettings], variants: Iterable[type[Variant]]) -> type[CoreSettings]:
    """The settings class of the core's sections and every variant's (each with its default)."""
    sections: dict[str, Any] = {
        name: (schema, Field(default_factory=default))
        for variant in variants
        for name, (schema, default) in variant.sections.items()
    }
    return create_model("Settings", __base__=core, __doc__="The whole configuration of a run.", **sections)


Settings = assemble(CoreSettings, BUNDLED)


def compose(settings: Any, given: Iterable[Variant] = (), from_settings: bool = True) -> Variants:
    """The variants of a run: the bundled ones its settings ask for (unless not `from_settings`: a graph drawn before
    its settings are known), in order, then `given` (a variant given takes the place of the one its settings would
    make); the actions of the others answer that they are absent."""
    given = list(given)
    kinds = BUNDLED if from_settings else ()
    chosen = [found for kind in kinds if (found := kind.enabled(settings)) is not None]
    items = [variant for variant in chosen if variant.name not in {g.name for g in given}] + given
    names = {variant.name for variant in items}
    absent = {
        name: action for kind in BUNDLED if kind.name not in names for name, action in kind.absent_actions().items()
    }
    return Variants(tuple(items), absent)
