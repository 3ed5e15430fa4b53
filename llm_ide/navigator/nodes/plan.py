from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.navigator.records import end, navigator_of, record_of, saved_if_cut, spend, turn_limit
from llm_ide.state.graph_state import AgentState
from llm_ide.variant import AgentContext


def plan(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Before the driver's first step: the navigator explores read-only in its own context and writes the plan the
    driver's prompt shows (a navigator that cannot plan — a human, a server — leaves it empty)."""
    ctx = runtime.context
    if "plan" in state or state.get("operations"):
        return {}
    record = record_of(ctx, state)
    navigator: Any = navigator_of(ctx)
    if not ctx.settings.navigator.plan or not hasattr(navigator, "plan"):
        return {"plan": "", "navigator": record}
    if reason := turn_limit(ctx, state, record, review=False):
        return end(record, reason)
    with saved_if_cut(ctx, record):
        result = navigator.plan(state["task"])
    spend(ctx, record, result.usage, result.by)
    record["plan"] = result.text
    return {"plan": result.text, "navigator": record}
