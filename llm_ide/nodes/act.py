from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import messages_for
from llm_ide.nodes.model_call import call_model, format_failure
from llm_ide.parsing import FormatError, parse_action
from llm_ide.resources import AgentContext, release, resolve
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode


def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The reflect call's conversation continued: its reflection, then the instruction `bad_action` chose."""
    ctx = resolve(runtime, state)
    nodes = state.get("operations", [])
    text, usage = call_model(ctx, state, "act", messages_for(ctx, state, with_pending_reflection=True))
    try:
        action = parse_action(text)
    except FormatError as error:
        update = {"usage": usage, **format_failure(ctx, state, text, error, "act_format")}
        release(runtime, update)
        return update
    pending = OperationNode(
        id=len(nodes),
        parent_id=state.get("parent_id"),
        thought=action.thought,
        action_type=action.action_type,
        action_params=action.action_params,
    )
    return {"usage": usage, "pending": pending, "format_errors": 0, "retry": None}
