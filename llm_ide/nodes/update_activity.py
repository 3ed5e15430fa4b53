from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.errors import ExitStatus
from llm_ide.resources import AgentContext
from llm_ide.state.context import add_scope, copy_chunks, created_named, record_operation, rescore
from llm_ide.state.graph_state import AgentState, empty_usage
from llm_ide.state.operations import with_reflection
from llm_ide.state.references import count_references, parse_references


def limit_reached(ctx: AgentContext, state: AgentState, n_operations: int, elapsed: float) -> ExitStatus | None:
    agent = ctx.settings.agent
    usage = state.get("usage") or empty_usage()
    cost = usage["cost"]
    if state.get("submitted"):
        return ExitStatus.SUBMITTED
    if agent.step_limit and n_operations >= agent.step_limit:
        return ExitStatus.STEP_LIMIT
    if (agent.cost_limit and cost >= agent.cost_limit) or (ctx.cost_budget and ctx.cost_budget.exhausted):
        return ExitStatus.COST_LIMIT
    if agent.token_limit and usage["input_tokens"] + usage["output_tokens"] >= agent.token_limit:
        return ExitStatus.COST_LIMIT  # the limit that holds whatever the price (an unknown price counts as 0)
    if agent.wall_time_limit and elapsed >= agent.wall_time_limit:
        return ExitStatus.TIME_LIMIT
    return None


def update_activity(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Commit the operation: reflection onto its predecessor, the node into the tree, one activity entry per chunk."""
    ctx = runtime.context
    view = ctx.codebase.view
    pending = state["pending"]
    n_operations = state.get("n_operations", 0)
    chunks = copy_chunks(state.get("code_context", []))
    accessed = {add_scope(chunks, scope, n_operations) for scope in state.get("accessed", [])}
    if pending.action_type == "bash":
        accessed |= created_named(chunks, str(pending.action_params.get("command") or ""))
    referred = count_references(
        chunks,
        parse_references(pending.thought, ctx.codebase.env.workdir),
        exists=view.exists,
        locate=view.scopes,
        covers=view.covers,
        n_operations=n_operations,
    )
    record_operation(chunks, accessed, referred)
    rescore(chunks, n_operations + 1, ctx.score_params)
    now = time.monotonic()
    elapsed = state.get("elapsed", 0.0) + (now - ctx.mark)
    ctx.mark = now
    update: dict[str, Any] = {
        "operations": [
            *with_reflection(state.get("operations", []), state.get("reflection"))[-1:],
            replace(pending, judged_when_run=pending.bad_action is not None),
        ],
        "code_context": chunks,
        "n_operations": n_operations + 1,
        "pending": None,
        "reflection": None,
        "accessed": [],
        "elapsed": elapsed,
        "exit_status": state.get("exit_status") or limit_reached(ctx, state, n_operations + 1, elapsed),
    }
    return update
