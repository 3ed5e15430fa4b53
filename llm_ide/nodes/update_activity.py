"""The step's end: the step's operation committed into the tree (with the operations the step changed before it, in
one write), one activity entry per chunk, the time spent, and the limits that end the run. Every ending of the run
passes here, so its time is always counted."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.budget import shares
from llm_ide.errors import CostLimit, LlmIdeError, StepLimit, Submitted, TimeLimit, ended, usd
from llm_ide.settings import AgentSettings
from llm_ide.state.context import add_scope, count_references, created_named, lead_in, parse_references, with_operation
from llm_ide.state.graph_state import AgentState, empty_usage
from llm_ide.variant import AgentContext


def run_limit(
    agent: AgentSettings, state: Mapping[str, Any], steps: int, elapsed: float, spent: bool
) -> LlmIdeError | None:
    """What ends the run at this step, if anything (`spent`: a cost limit it shares): its submission, or a limit."""
    apart = {key: value.get("usage") for key, value in state.items() if isinstance(value, Mapping)}  # a variant's own
    every = {"driver": state.get("usage") or empty_usage()} | {k: c for k, c in apart.items() if isinstance(c, Mapping)}
    cost = sum(calls.get("cost", 0.0) for calls in every.values())
    tokens = sum(calls.get("input_tokens", 0) + calls.get("output_tokens", 0) for calls in every.values())
    if state.get("submitted"):
        return Submitted()
    if agent.step_limit and steps >= agent.step_limit:
        return StepLimit(f"the run's step limit ({agent.step_limit}) is reached")
    if agent.cost_limit and cost >= agent.cost_limit:
        return CostLimit(f"the run's cost limit {usd(agent.cost_limit)} is reached (spent {usd(cost)}{shares(every)})")
    if spent:
        return CostLimit("the shared cost limit is reached")
    if (limit := agent.token_limit) and tokens >= limit:  # any price
        return CostLimit(f"the run's token limit ({limit:,}) is reached ({tokens:,} tokens{shares(every, False)})")
    if agent.wall_time_limit and elapsed >= agent.wall_time_limit:
        return TimeLimit(f"the run's wall-time limit ({agent.wall_time_limit:g} s) is reached ({elapsed:.1f} s spent)")
    return None


def committed(ctx: AgentContext, state: AgentState) -> dict[str, Any]:
    """The pending operation in the tree and every chunk's activity entry for it."""
    view, pending = ctx.codebase.view, state["pending"]
    assert pending is not None
    n_operations = state.get("n_operations", 0)
    chunks = list(state.get("code_context", []))  # add_scope puts a changed chunk's copy in its place
    if pending.action_type == "bash":  # (before add_scope: the rows the chunks held before this operation)
        output = {line.strip() for line in pending.observation.split("\n")}
        pending = replace(
            pending, lead_in=lead_in(chunks, state.get("accessed", []), view.lines, output, shown_now(state))
        )
    accessed = {add_scope(chunks, scope, n_operations) for scope in state.get("accessed", [])}
    if pending.action_type == "bash":
        accessed |= created_named(chunks, str(pending.action_params.get("command") or ""))
    named = parse_references(pending.thought, ctx.codebase.env.workdir)
    referred = count_references(
        chunks, named, exists=view.exists, locate=view.scopes, covers=view.covers, n_operations=n_operations
    )
    chunks = with_operation(chunks, accessed, referred, n_operations, ctx.score_params)
    return {"operations": [pending], "code_context": chunks, "n_operations": n_operations + 1}


def shown_now(state: AgentState) -> Callable[[str], bool]:
    """Whether the prompt shows a row (the snapshot's, a lead-in's since it) or a stripped line of an output since;
    the epoch read at the first question only (most steps ask none)."""

    @cache
    def shown() -> frozenset[str]:
        epoch = [*state.get("operations", [])[state.get("snapshot_step", 0) :], *filter(None, [state["pending"]])]
        rows = {*state.get("snapshot", "").split("\n"), *(row for node in epoch for row in node.lead_in.split("\n"))}
        return frozenset(rows | {line.strip() for node in epoch for line in node.observation.split("\n")})

    return lambda text: text in shown()


def update_activity(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    elapsed = state.get("elapsed", 0.0) + ctx.clock.lap()
    update: dict[str, Any] = {"pending": None, "changed": None, "proposed": None, "accessed": [], "elapsed": elapsed}
    pending = state.get("pending")
    if pending is not None and pending.action_type:  # else the run ended before its action (format errors, a limit)
        update |= committed(ctx, state)
    if changed := state.get("changed"):
        update["operations"] = [*changed, *update.get("operations", [])]
    steps = update.get("n_operations", state.get("n_operations", 0))
    spent = ctx.cost_budget is not None and ctx.cost_budget.exhausted
    if not state.get("exit_status") and (limit := run_limit(ctx.settings.agent, state, steps, elapsed, spent)):
        update |= ended(limit)
    return update
