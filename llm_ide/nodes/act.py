"""The step's action: with one call per step and a verdict given, the action the step's one reply holds (`reflect`
read it); else `act`'s own call, the run's exchange reading the action from its reply (asked again when it cannot).
The operation `branch` placed gets its reasoning and its action."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.errors import FormatError
from llm_ide.nodes.model_call import ask
from llm_ide.nodes.rejected import rejected
from llm_ide.state.graph_state import AgentState
from llm_ide.variant import AgentContext


def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    pending, proposed, spent = state["pending"], state.get("proposed"), {}
    assert pending is not None  # `branch` placed it
    if proposed is None:
        asked = ask(ctx, state, "act", ctx.exchange.read_action)
        if isinstance(asked.reading, FormatError):
            return asked.usage | rejected(ctx, state, asked.reply, asked.reading, ctx.exchange.expected("act"), "act")
        proposed, spent = asked.proposal(), asked.usage
    done = replace(pending, **proposed)
    return spent | {"pending": done, "proposed": None, "format_errors": 0, "retry": None}
