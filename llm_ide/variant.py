"""How a variant plugs into the agent without the core naming it, the way LangChain's agents take middleware objects
(each with its own state, tools and hooks) in one list. A variant brings, every part optional:

- `sections`: its settings sections (name → its pydantic model, validated with the rest; the whole settings object is
  assembled at the top, llm_ide/composition.py), which its code reads as `ctx.settings.<section>`;
- `state` (channels in the run's state and output) and `scratch` (private ones): TypedDicts; and on an operation node
  its `marks` (a dict it alone writes, flattened into the trajectory's operation);
- `nodes()` and where each goes: `prelude` (once, before the first step: a plan, a subgraph), `step_start` (before
  each step's memory), `gates` (between `act` and the action: a gate that gives the pending operation its return code
  settles it, and it is recorded without running), `after_action` (after the action, before the operation is
  committed), `routes` (action types one of its nodes answers instead of the environment), `replaces` (a core node it
  takes the place of, under the same name);
- `actions()`: actions run like the core's (`Action`), and `absent_actions()`: what they answer in a run without it;
- hooks: `open` (the environment is ready: files beside the tools; returns its resource for the run, in
  `ctx.resources[name]`), `system_section` (text ahead of the task in the system prompt), `task_notes` (text after
  the task, in the Task section), `action_lines` (its lines of the action list), `preface` (text ahead of the memory
  snapshot), `news` (what arrived between steps), `at_submit` (a state update when the agent submits),
  `foreign_calls` (model calls on a model of its own), `info` (its part of the trajectory's info), `facts` (what a
  reviewer and a chooser of several runs at a task are told of one);
- `verify(bench, runs, record)`: for a driver of several runs at a task, what running their patches found
  (`bench.clean(label, patch)`: a clean environment at the base commit with the patch applied): facts for the
  reviewer and the chooser, and a rank per run that the choice uses before any model judges;
- `refuse(variants)`: one line when it cannot go with the others.

The node functions take `(state, runtime)` like the core's; `ctx` below is the run's AgentContext.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from llm_ide.actions import CORE_GRAMMAR, ActionOutcome
from llm_ide.calls import CallListener
from llm_ide.errors import UsageError
from llm_ide.parsing import Grammar

Node = Callable[..., dict[str, Any]]
Step = Callable[[int], bool]  # which steps a message arrived after


@dataclass(frozen=True)
class Action:
    """An action of a variant: `run(ctx, params)`, with `ParamError` for bad parameters like the core's actions."""

    run: Callable[[Any, dict[str, Any]], ActionOutcome]
    bare: bool = False  # its parameters may be left out (`<name></name>`)


@dataclass(frozen=True)
class Opening:
    """What a run tells a variant opening its resources: the agent's model spec and endpoint (a variant may ask a
    model of its own), the listener of model calls."""

    model: str
    base_url: str | None = None
    listener: CallListener | None = None


@dataclass(frozen=True)
class Finished:
    """A finished run at the task as a driver of several runs shows it to `verify`: its number, its patch, its
    trajectory's info (the variants' records)."""

    index: int
    patch: str
    info: dict[str, Any]


@dataclass(frozen=True)
class Verified:
    """What `verify` found: its `record` (what it ran; the driver keeps it and gives it back next time), `facts` and
    `ranks` by run number. A rank is compared before any model judges: lower is better; all zeros: nothing found
    wrong."""

    record: dict[str, Any]
    facts: dict[int, dict[str, Any]] = field(default_factory=dict)
    ranks: dict[int, tuple[int, ...]] = field(default_factory=dict)


class Variant:
    name: ClassVar[str] = ""
    interactive: ClassVar[bool] = False  # it may stop the run to ask a person (a LangGraph interrupt)
    sections: ClassVar[dict[str, tuple[Any, Any]]] = {}  # section → (type, default)
    state: ClassVar[type | None] = None
    scratch: ClassVar[type | None] = None
    prelude: ClassVar[tuple[str, ...]] = ()
    step_start: ClassVar[tuple[str, ...]] = ()
    gates: ClassVar[tuple[str, ...]] = ()
    after_action: ClassVar[tuple[str, ...]] = ()
    routes: ClassVar[dict[str, str]] = {}  # action type → its node

    @classmethod
    def enabled(cls, settings: Any) -> Variant | None:
        """The variant the settings ask for, or None (a variant that needs more than settings is given explicitly)."""
        return None

    def nodes(self) -> dict[str, Node]:
        return {}

    def replaces(self) -> dict[str, Node]:
        return {}

    def actions(self) -> dict[str, Action]:
        return {}

    @classmethod
    def absent_actions(cls) -> dict[str, Action]:
        return {}

    def refuse(self, variants: list[Variant]) -> str | None:
        return None

    def open(self, ctx: Any, opening: Opening) -> Any:
        return None

    def system_section(self, ctx: Any) -> str:
        return ""

    def task_notes(self, ctx: Any, state: dict[str, Any]) -> str:
        return ""

    def action_lines(self, ctx: Any) -> str:
        return ""

    def preface(self, ctx: Any, state: dict[str, Any]) -> str:
        return ""

    def news(self, ctx: Any, state: dict[str, Any], after: Step) -> str:
        return ""

    def at_submit(self, ctx: Any, state: dict[str, Any]) -> dict[str, Any]:
        return {}

    def foreign_calls(self, ctx: Any, state: dict[str, Any]) -> int:
        return 0

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        return {}

    def facts(self, state: dict[str, Any]) -> dict[str, Any]:
        return {}

    def verify(self, bench: Any, runs: list[Finished], record: dict[str, Any]) -> Verified | None:
        return None


class CombinationError(UsageError):
    """Variants that cannot go together, told in one line."""


@dataclass(frozen=True)
class Variants:
    """The variants of one run, in order, and what they add up to; `absent` are the actions of the variants a run can
    have but this one has not."""

    items: tuple[Variant, ...] = ()
    absent: dict[str, Action] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [variant.name for variant in self.items]
        if len(set(names)) < len(names):
            raise CombinationError(f"a variant is given twice: {', '.join(names)}")
        for variant in self.items:
            if reason := variant.refuse(list(self.items)):
                raise CombinationError(reason)
        replaced: dict[str, str] = {}
        for variant in self.items:
            for node in variant.replaces():
                if node in replaced:
                    raise CombinationError(f"{replaced[node]} and {variant.name} both replace the `{node}` node")
                replaced[node] = variant.name

    def __iter__(self) -> Iterator[Variant]:
        return iter(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    @cached_property
    def actions(self) -> dict[str, Action]:
        own = {name: action for variant in self.items for name, action in variant.actions().items()}
        return {**self.absent, **own}

    @cached_property
    def grammar(self) -> Grammar:
        actions = self.actions
        return CORE_GRAMMAR.with_actions(actions, {name for name, action in actions.items() if action.bare})

    def joined(self, texts: Iterable[str], separator: str = "\n") -> str:
        return separator.join(text for text in texts if text)

    def system_sections(self, ctx: Any) -> str:
        return self.joined((variant.system_section(ctx) for variant in self.items), "\n\n")

    def task_notes(self, ctx: Any, state: dict[str, Any]) -> str:
        return self.joined((variant.task_notes(ctx, state) for variant in self.items), "\n\n")

    def action_lines(self, ctx: Any) -> str:
        return self.joined(variant.action_lines(ctx) for variant in self.items)

    def preface(self, ctx: Any, state: dict[str, Any]) -> str:
        return "".join(variant.preface(ctx, state) for variant in self.items)

    def news(self, ctx: Any, state: dict[str, Any], after: Step) -> str:
        return "".join(variant.news(ctx, state, after) for variant in self.items)

    def at_submit(self, ctx: Any, state: dict[str, Any]) -> dict[str, Any]:
        update: dict[str, Any] = {}
        for variant in self.items:
            update |= variant.at_submit(ctx, state)
        return update

    def foreign_calls(self, ctx: Any, state: dict[str, Any]) -> int:
        return sum(variant.foreign_calls(ctx, state) for variant in self.items)

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for variant in self.items:
            merged |= variant.info(state)
        return merged

    def facts(self, state: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for variant in self.items:
            merged |= variant.facts(state)
        return merged

    def record(self, state: dict[str, Any]) -> dict[str, Any]:
        """What the variants add to the trajectory's info: their parts, and their facts under `facts`."""
        facts = self.facts(state)
        return {**self.info(state), **({"facts": facts} if facts else {})}
