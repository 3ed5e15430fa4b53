from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.nodes.model_call import Message, call_model, format_failure
from llm_ide.nodes.reflect import reflect_turns
from llm_ide.parsing import FormatError, parse_action
from llm_ide.prompting import render
from llm_ide.resources import AgentContext, release, resolve
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode


def act_turns(ctx: AgentContext, state: AgentState) -> list[Message]:
    """The reflect call's conversation continued (its reflection, then the instruction that `bad_action` chooses), so
    the act prompt is the reflect prompt plus a few lines; the first step has no reflection."""
    nodes = state.get("operations", [])
    reflection = state.get("reflection")
    if reflection is None:
        instruction = render(ctx.templates, "next_step", node=None)
        return [
            {
                "role": "user",
                "content": render(ctx.templates, "first_step", workspace=state["workspace"], instruction=instruction),
            }
        ]
    template = "alternative_action" if reflection.bad_action else "next_step"
    return [
        *reflect_turns(ctx, state),
        {"role": "assistant", "content": render(ctx.templates, "reflection", reflection=reflection)},
        {"role": "user", "content": render(ctx.templates, template, node=nodes[-1])},
    ]


def act(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    ctx = resolve(runtime, state)
    nodes = state.get("operations", [])
    text, usage = call_model(ctx, state, "act", act_turns(ctx, state))
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
