from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import messages_for
from llm_ide.nodes.model_call import call_model, format_failure
from llm_ide.parsing import FormatError, parse_reflection
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState


def reflect(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    if ctx.settings.agent.single_call:
        return {}  # the act call reflects too
    text, usage = call_model(ctx, state, "reflect", messages_for(ctx, state, with_pending_reflection=False))
    try:
        reflection = parse_reflection(text)
    except FormatError as error:
        return {"usage": usage, **format_failure(ctx, state, text, error, "reflect_format")}
    return {"usage": usage, "reflection": reflection, "format_errors": 0, "retry": None}
