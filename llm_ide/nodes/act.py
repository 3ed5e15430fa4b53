from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.nodes.model_call import call_model, format_failure
from llm_ide.parsing import FormatError, parse_action
from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode


def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = runtime.context
    nodes = state.get("operations", [])
    reflection = state.get("reflection")
    template = "alternative_action" if reflection is not None and reflection.bad_action else "next_step"
    ws = ctx.workspace
    prompt = render(
        ctx.templates,
        template,
        workspace=state["workspace"],
        node=nodes[-1] if nodes else None,
        reflection=reflection,
        actions=render(
            ctx.templates,
            "actions",
            view_max_lines=ws.view_max_lines,
            search_max_results=ws.search_max_results,
            command_timeout=ws.command_timeout,
        ),
    )
    text, usage = call_model(ctx, state, "act", prompt)
    try:
        action = parse_action(text)
    except FormatError as error:
        return {"usage": usage, **format_failure(ctx, state, text, error, "act_format")}
    pending = OperationNode(
        id=len(nodes),
        parent_id=state.get("parent_id"),
        thought=action.thought,
        action_type=action.action_type,
        action_params=action.action_params,
    )
    return {"usage": usage, "pending": pending, "format_errors": 0, "retry": None}
