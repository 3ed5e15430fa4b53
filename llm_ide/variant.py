"""The run's context (what the nodes and the variants are given: `AgentContext`), and how a variant plugs into the
agent without the core naming it, the way LangChain's agent middleware does: a list of objects, each with its own
settings, state and actions, a few graph nodes, and wrappers around the model call and around an action. Eleven
members, each optional:

- `name`; `settings`: its settings sections (name → (pydantic model, default factory)), validated with the rest;
  `state`: a TypedDict of its channels in the run's state (and output); `actions`: the actions it brings, each with
  what it answers in a run without the variant;
- `enabled(settings)`: the variant the settings ask for, or None; `open(ctx, opening)`: its resource for the run, once
  the environment is ready (`ctx.resources[name]`);
- `nodes()`: its graph nodes, each once before the first step or before every step (`Hook`);
- `prompt(ctx, state)`: its parts of the prompt (`PromptParts`);
- `wrap_model_call(ctx, request, call)`: around a model call of the step (`call(request)` makes it);
- `wrap_action(ctx, state, node, run)`: around the pending action (`run(node)` runs it; not calling it settles the
  operation without running it);
- `info(state)`: its part of the trajectory's info (`facts` in it: what a reviewer of several runs is told).

Node functions take `(state, runtime)` like the core's (`Runtime[AgentContext]`); `ctx` is the run's AgentContext.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, reduce
from typing import Any, ClassVar, NamedTuple

from llm_ide.actions import CORE_GRAMMAR
from llm_ide.budget import Budget
from llm_ide.call_policy import CallPolicy
from llm_ide.calls import CallListener
from llm_ide.codebase import ActionOutcome, Codebase
from llm_ide.errors import CombinationError
from llm_ide.exchange import TEXT, Exchange
from llm_ide.kills import IntentLog
from llm_ide.models import Message, Model, ModelReply
from llm_ide.parsing import Grammar
from llm_ide.pricing import renewal_rates
from llm_ide.settings import CoreSettings, Templates
from llm_ide.state.context import Scope, ScoreParams
from llm_ide.state.operations import OperationNode

Node = Callable[..., dict[str, Any]]
State = Mapping[str, Any]  # the run's state as a variant reads it (the core's channels and its own)
Step = Callable[[int], bool]  # which steps a piece of news arrived after


@dataclass(frozen=True)
class Hook:
    """A graph node of a variant: before the first step only (`once`), or before every step."""

    name: str
    node: Node
    once: bool = False


@dataclass(frozen=True)
class ActionResult:
    """What became of the pending operation: the node with its observation and return code (and its verdict, when it
    was judged as it ran), the code it accessed, whether it submitted, and the state channels it changed."""

    node: OperationNode
    accessed: list[Scope] = field(default_factory=list)
    submitted: bool = False
    update: dict[str, Any] = field(default_factory=dict)

    def settled(self, outcome: ActionOutcome) -> ActionResult:
        done = replace(self.node, observation=outcome.observation, returncode=outcome.returncode)
        return replace(self, node=replace(done, duration=round(outcome.duration, 3)), accessed=outcome.accessed)

    def merged(self, update: dict[str, Any]) -> ActionResult:
        return replace(self, update={**self.update, **update})


ActionRun = Callable[[OperationNode], ActionResult]


@dataclass(frozen=True)
class Action:
    """An action of a variant, `run(ctx, state, node)`, raising `ParamError` for bad parameters like the core's;
    `absent(ctx, params)`: what it answers in a run without the variant; `schema`: its parameters' JSON schema, its
    `description` the tool's where the actions are tools (llm_ide/action_tools.py); `line`: its entry in the action
    list where the actions are in the text."""

    run: Callable[[AgentContext, State, OperationNode], ActionResult]
    absent: Callable[[AgentContext, dict[str, Any]], ActionOutcome]
    bare: bool = False  # its parameters may be left out (`<name></name>`)
    schema: Mapping[str, Any] = field(default_factory=dict)
    line: str = ""


@dataclass(frozen=True)
class ModelRequest:
    """One model call of the step: `kind` (act, reflect, or a variant's own), the messages, `n` replies (`batched`: in
    one request where the provider takes `n`), on `model` (None: the agent's), with the actions as `tools` (or none);
    `parse` reads a reply of this kind (raising FormatError), for a wrapper that judges them."""

    kind: str
    messages: list[Message]
    parse: Callable[[ModelReply], Any] | None = None
    model: Model | None = None
    n: int = 1
    batched: bool = True
    tools: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class ModelResponse:
    """The reply (or replies: the first is the step's) of a call, each its text and tool calls; the calls that made them
    (recorded and charged); what a wrapper marks on the operation the reply makes (the candidates it chose from)."""

    replies: tuple[ModelReply, ...]
    charged: tuple[ModelReply, ...] = ()
    marks: dict[str, Any] = field(default_factory=dict)

    @property
    def reply(self) -> ModelReply:
        return self.replies[0]

    @property
    def text(self) -> str:
        return self.replies[0].text


ModelCall = Callable[[ModelRequest], ModelResponse]


@dataclass(frozen=True)
class PromptParts:
    """A variant's parts of the prompt: `task_notes` after the task (what a script showed), `actions` (its lines of
    the action list), `preface` ahead of the memory snapshot (a plan), `news(after)`: what arrived after the steps
    `after` accepts (another agent's messages), shown where it arrived so each prompt extends the previous one."""

    task_notes: str = ""
    actions: str = ""
    preface: str = ""
    news: Callable[[Step], str] | None = None


@dataclass(frozen=True)
class Opening:
    """What a run tells a variant opening its resources: the agent's model spec and endpoint, the run's model factory
    (`model_for(spec, base_url)`: the same object for the same model), the listener of model calls."""

    model: str
    base_url: str | None = None
    listener: CallListener | None = None
    model_for: Callable[[str, str | None], Model] | None = None


class ModelUse(NamedTuple):
    """A model a variant calls besides the run's: the setting naming it, its spec, its endpoint (None: the run's) and
    the setting naming that."""

    setting: str
    spec: str
    base_url: str | None = None
    endpoint: str = ""


class Variant:
    name: ClassVar[str] = ""
    settings: ClassVar[dict[str, tuple[Any, Any]]] = {}
    state: ClassVar[type | None] = None
    actions: ClassVar[dict[str, Action]] = {}

    @classmethod
    def enabled(cls, settings: Any) -> Variant | None:  # Any: the settings class the run composed (its sections)
        return None

    def check(self, settings: Any) -> list[ModelUse]:
        """Before the run starts, at every door: a problem with what the variant needs (its files, its server) raises
        a UsageError of one line. Returns the models it calls besides the run's, which the preflight checks as it
        checks the run's own."""
        return []

    def open(self, ctx: AgentContext, opening: Opening) -> Any:  # Any: whatever resource the variant keeps
        return None

    def nodes(self) -> list[Hook]:
        return []

    def prompt(self, ctx: AgentContext, state: State) -> PromptParts:
        return PromptParts()

    def wrap_model_call(self, ctx: AgentContext, request: ModelRequest, call: ModelCall) -> ModelResponse:
        return call(request)

    def wrap_action(self, ctx: AgentContext, state: State, node: OperationNode, run: ActionRun) -> ActionResult:
        return run(node)

    def info(self, state: State) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Variants:
    """The variants of one run, in order, and what they add up to; `absent`: the actions of the variants a run can
    have but this one has not. The first variant's wrappers are the outermost."""

    items: tuple[Variant, ...] = ()
    absent: dict[str, Action] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [variant.name for variant in self.items]
        if len(set(names)) < len(names):
            raise CombinationError(f"a variant is given twice: {', '.join(names)}")

    def __iter__(self) -> Iterator[Variant]:
        return iter(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    @cached_property
    def actions(self) -> dict[str, Action]:
        return {**self.absent, **{name: action for variant in self.items for name, action in variant.actions.items()}}

    @cached_property
    def grammar(self) -> Grammar:
        actions = self.actions
        bare = {name for name, action in actions.items() if action.bare}
        return CORE_GRAMMAR.with_actions(actions, bare, absent=self.absent)

    @cached_property
    def own(self) -> dict[str, Action]:
        """The actions of the run's own variants (not those answering that their variant is absent)."""
        return {name: action for variant in self.items for name, action in variant.actions.items()}

    def check(self, settings: Any) -> list[ModelUse]:
        return [use for variant in self.items for use in variant.check(settings)]

    def hooks(self, once: bool) -> list[Hook]:
        return [hook for variant in self.items for hook in variant.nodes() if hook.once == once]

    def prompt(self, ctx: AgentContext, state: State) -> PromptParts:
        parts = [variant.prompt(ctx, state) for variant in self.items]
        news = [part.news for part in parts if part.news is not None]
        return PromptParts(
            task_notes=joined((part.task_notes for part in parts), "\n\n"),
            actions=joined(part.actions for part in parts),
            preface="".join(part.preface for part in parts),
            news=(lambda after: "".join(item(after) for item in news)) if news else None,
        )

    def model_call(self, ctx: AgentContext, call: ModelCall) -> ModelCall:
        """`call` wrapped by every variant's `wrap_model_call`."""

        def wrap(inner: ModelCall, variant: Variant) -> ModelCall:
            return lambda request: variant.wrap_model_call(ctx, request, inner)

        return reduce(wrap, reversed(self.items), call)

    def action_run(self, ctx: AgentContext, state: State, run: ActionRun) -> ActionRun:
        """`run` wrapped by every variant's `wrap_action`."""

        def wrap(inner: ActionRun, variant: Variant) -> ActionRun:
            return lambda node: variant.wrap_action(ctx, state, node, inner)

        return reduce(wrap, reversed(self.items), run)

    def info(self, state: State) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for variant in self.items:
            part = variant.info(state)
            merged |= {**part, "facts": {**merged.get("facts", {}), **part["facts"]}} if "facts" in part else part
        return merged


def joined(texts: Iterable[str], separator: str = "\n") -> str:
    return separator.join(text for text in texts if text)


class Memo:
    """Prompt parts that never change once made (the system part, an operation's turns), each made once: the `size`
    used last are kept, the least recently used go (an epoch's turns, a few per operation, are all used each call)."""

    def __init__(self, size: int = 1024) -> None:
        self.size, self.parts = size, dict[tuple[Any, ...], Any]()

    def get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        part = self.parts.pop(key, None)
        if part is None:
            part = make()
            if len(self.parts) >= self.size:
                del self.parts[next(iter(self.parts))]
        self.parts[key] = part
        return part


@dataclass
class Clock:
    """The run's time in this process: `lap()` is what passed since the process started the run or since the last
    lap (the state keeps the sum, so a resumed run's time goes on, without the time it was stopped)."""

    mark: float = field(default_factory=time.monotonic)

    def lap(self) -> float:
        now = time.monotonic()
        spent, self.mark = now - self.mark, now
        return spent


@dataclass(frozen=True)
class AgentContext:
    """What a run's nodes and variants are given through LangGraph's runtime context, fixed for the run: the settings,
    the model and the exchange with it, the repository, the run's variants and the resources they opened for it
    (`resources[variant name]`), and the services the steps share (the call policy, the budget, the clock, the
    prompt parts made once)."""

    settings: CoreSettings  # assembled at the top (llm_ide.whole_settings): the variants' sections are there too
    model: Model
    codebase: Codebase
    exchange: Exchange = Exchange(one_call=True, form=TEXT)  # chosen once per run (llm_ide.exchange.exchange_for)
    tool_usage: str = ""
    policy: CallPolicy = field(default_factory=CallPolicy)  # how every model call of the run is made
    cost_budget: Budget | None = None
    snapshot_patch: Callable[[], str] | None = None  # the worktree against the base commit, after each change
    restore_worktree: Callable[..., bool] | None = None  # puts a snapshot back (a command interrupted by a kill)
    intents: IntentLog | None = None
    variants: Variants = field(default_factory=Variants)
    resources: dict[str, Any] = field(default_factory=dict)  # filled once as the run opens (Any: each variant's own)
    clock: Clock = field(default_factory=Clock)
    memo: Memo = field(default_factory=Memo)
    say: Callable[[str], None] = field(default=lambda said: None)  # a phase told as it happens (the live lines)
    rates: tuple[float, float] = field(init=False)  # a renewal's prices (pricing.renewal_rates), fixed for the run

    def __post_init__(self) -> None:
        object.__setattr__(self, "rates", renewal_rates(self.model, self.settings.memory.unpriced))

    @property
    def templates(self) -> Templates:
        """The run's templates (where the actions are tools, with the tool format's in place of theirs)."""
        return self.exchange.templates(self.settings)

    @property
    def score_params(self) -> ScoreParams:
        memory = self.settings.memory
        return ScoreParams(memory.alpha, memory.beta, memory.gamma, memory.threshold)

    @property
    def grammar(self) -> Grammar:
        return self.variants.grammar
