"""The navigator's records in the run's state (`navigator`): every decision with its reason, every review round,
guidance, its calls, tokens and cost (apart from the driver's), its turns; and the helpers the nodes share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llm_ide.errors import TurnLimit, ended
from llm_ide.navigator.protocol import Decision, Navigator, NavigatorTimeout, NavigatorUsage
from llm_ide.prompting import render_string
from llm_ide.state.graph_state import AgentState
from llm_ide.variant import AgentContext


def new_record(mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "decisions": [],
        "reviews": [],
        "guidance": [],
        "calls": [],
        "usage": NavigatorUsage().model_dump(),
        "turns": 0,
        "rounds": 0,
        "last_review_step": 0,
        "ended": "",
    }


def navigator_of(ctx: AgentContext) -> Navigator:
    """The run's navigator (opened by the variant)."""
    return ctx.resources["navigator"]


def on_timeout(ctx: AgentContext, error: NavigatorTimeout) -> Decision:
    decision = ctx.settings.navigator.timeout_decision
    reason = render_string(ctx.settings.navigator.templates.timeout, error=str(error), decision=decision)
    return Decision(approved=decision == "allow", reason=reason, by="timeout")


def record_of(ctx: AgentContext, state: AgentState) -> dict[str, Any]:
    """A copy of the state's record (the nodes return a new one), with the navigator's task set."""
    record = state.get("navigator") or new_record(ctx.settings.navigator.mode)  # type: ignore[typeddict-item]
    navigator: Any = navigator_of(ctx)
    if hasattr(navigator, "task") and not navigator.task:
        navigator.task = state.get("task", "")
    if hasattr(navigator, "plan_text") and not navigator.plan_text:
        navigator.plan_text = state.get("plan", "")  # type: ignore[typeddict-item]  # a resumed run: its own plan
    if hasattr(navigator, "usage") and navigator.usage.api_calls < NavigatorUsage(**record["usage"]).api_calls:
        navigator.usage = NavigatorUsage(**record["usage"])  # a resumed run: the scripted replies go on from there
    return {key: list(value) if isinstance(value, list) else value for key, value in record.items()}


def spend(ctx: AgentContext, record: dict[str, Any], usage: NavigatorUsage, by: str) -> None:
    """The navigator's usage and turns after one answer (a human's or a server's answer is one turn)."""
    record["usage"] = NavigatorUsage(**record["usage"]).plus(usage).model_dump()
    record["turns"] += usage.api_calls if by == "model" else 1
    settle(ctx, record)
    if by != "model" and ctx.cost_budget is not None:  # a model navigator's calls are charged as they are made
        ctx.cost_budget.add(usage.cost)


def settle(ctx: AgentContext, record: dict[str, Any]) -> None:
    """The navigator's calls taken into the record: those its own usage counts beyond the record's (the paid part of
    a call cut short: a timeout, an error, Ctrl-C; an answer's counted already) in the usage and turns too."""
    navigator: Any = navigator_of(ctx)
    usage: NavigatorUsage | None = getattr(navigator, "usage", None)
    before = NavigatorUsage(**record["usage"])
    if usage is not None and usage.api_calls > before.api_calls:
        record["usage"] = usage.model_dump()
        record["turns"] += usage.api_calls - before.api_calls
    record["calls"] += navigator.drain() if hasattr(navigator, "drain") else []


@contextmanager
def saved_if_cut(ctx: AgentContext, record: dict[str, Any]) -> Iterator[None]:
    """A node's turn with the navigator: an error or Ctrl-C that cuts it carries the update the node owes (`unsaved`:
    the record with the calls the navigator made so far, the paid part of one cut short too, in its usage, turns and
    calls), which the run saves as it ends."""
    try:
        yield
    except BaseException as error:
        settle(ctx, record)
        error.unsaved = {"navigator": record}  # type: ignore[attr-defined]
        raise


def turn_limit(ctx: AgentContext, state: AgentState, record: dict[str, Any], review: bool) -> str:
    """Why the run must end before the navigator is asked (a limit reached), or ''."""
    config = ctx.settings.navigator
    if config.max_turns and record["turns"] >= config.max_turns:
        return f"the navigator used its {config.max_turns} turn{'s' * (config.max_turns != 1)} (navigator.max_turns)"
    steps = state.get("n_operations", 0) - record["last_review_step"]
    if config.max_driver_turns and not review and steps >= config.max_driver_turns:
        return f"{steps} driver operation{'s' * (steps != 1)} without a review (navigator.max_driver_turns)"
    if review and record["rounds"] >= config.max_review_rounds:
        return f"{record['rounds']} review rounds done (navigator.max_review_rounds)"
    return ""


def end(record: dict[str, Any], reason: str) -> dict[str, Any]:
    """The state update of a turn limit: the run ends before its pending operation."""
    record["ended"] = reason
    return {"navigator": record, "pending": None, **ended(TurnLimit(reason))}
