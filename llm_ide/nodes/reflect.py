"""The step's verdict on the latest operation: `reflect` runs when one is due (the latest operation was not judged as
it ran) and gets it, the run's exchange says from which call: two calls per step, a reflection call of its own; one
call per step, the step's one call, whose reply also holds the next action (kept for `act`). The verdict is applied
to the operation it judges, the step's change to it (committed with the step's own operation: one write of the tree
per step), which `branch` places the next operation by."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide import verdict
from llm_ide.errors import FormatError
from llm_ide.nodes.model_call import ask
from llm_ide.nodes.rejected import rejected
from llm_ide.state.graph_state import AgentState
from llm_ide.variant import AgentContext


def reflecting(state: AgentState) -> bool:
    """Whether the step starts with a verdict (the first step has none to give)."""
    return verdict.due(state.get("operations", []))


def reflect(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    exchange = ctx.exchange
    asked = ask(ctx, state, exchange.reflect_kind, exchange.read_verdict)
    if isinstance(asked.reading, FormatError):
        return asked.usage | rejected(ctx, state, asked.reply, asked.reading, exchange.expected("reflect"), "reflect")
    found = asked.reading.verdict
    assert found is not None
    judged = verdict.judged(state["operations"][-1], found)
    proposed = asked.proposal() if asked.reading.action is not None else None
    return asked.usage | {"changed": [judged], "proposed": proposed, "retry": None}
