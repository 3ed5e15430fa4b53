from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import messages_for
from llm_ide.nodes.model_call import call_model, format_failure
from llm_ide.parsing import FormatError, parse_action, parse_single_reply
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode, next_parent, with_reflection


def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The reflect call's conversation continued: its reflection, then the instruction `bad_action` chose. With
    `agent.single_call` the one reply also holds the reflection on the previous operation, and places the new node."""
    ctx = runtime.context
    nodes = state.get("operations", [])
    single = ctx.settings.agent.single_call and bool(nodes) and nodes[-1].bad_action is None  # else judged already
    reply, usage = call_model(ctx, state, "act", messages_for(ctx, state, with_pending_reflection=not single))
    update: dict[str, Any] = {"usage": usage, "format_errors": 0, "retry": None}
    try:
        if single:
            update["reflection"], action = parse_single_reply(reply, ctx.grammar)
            update["parent_id"] = next_parent(with_reflection(nodes, update["reflection"]))
        else:
            action = parse_action(reply, ctx.grammar)
    except FormatError as error:
        expected = "single_format" if single else "act_format"
        return {"usage": usage, **format_failure(ctx, state, reply, error, expected)}
    update["pending"] = OperationNode(
        id=len(nodes),
        parent_id=update.get("parent_id", state.get("parent_id")),
        thought=action.thought,
        action_type=action.action_type,
        action_params=action.action_params,
    )
    return update
