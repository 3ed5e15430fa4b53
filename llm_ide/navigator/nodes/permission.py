from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.conversation import params_text
from llm_ide.navigator.gate import diff_preview, gated
from llm_ide.navigator.nodes.consult import consult_on
from llm_ide.navigator.protocol import NavigatorTimeout, PermissionRequest
from llm_ide.navigator.records import end, navigator_of, on_timeout, record_of, spend, turn_limit
from llm_ide.nodes.render_context import code_context_text
from llm_ide.prompting import render_string, truncate
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode


def permission_request(ctx: AgentContext, state: AgentState, node: OperationNode) -> PermissionRequest:
    config = ctx.settings.navigator
    chunks = state.get("code_context", [])
    context = code_context_text(ctx, chunks, state.get("n_operations", 0)) if chunks else ""
    return PermissionRequest(
        action=f"{node.action_type} {params_text(node)}",
        thought=node.thought,
        diff=diff_preview(ctx.codebase, node.action_type, node.action_params, config.diff_chars),
        context=truncate(context, config.context_chars, ctx.templates),
        reason=f"navigator.gate: {node.action_type}",
    )


def permission(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Between `act` and `execute_tool`: a gated action runs only when the navigator approves it. A denied one is not
    run: it is recorded as denied and as a bad action whose lesson is the navigator's reason, so the driver's next
    action is its sibling (an alternative)."""
    ctx = runtime.context
    config = ctx.settings.navigator
    node = state["pending"]
    record = state.get("navigator")  # type: ignore[typeddict-item]
    if node.action_type == "submit" and config.review_on_submit:
        return consult_on(ctx, state, node)
    limited = config.max_driver_turns and record is not None
    if not gated(node.action_type, node.action_params, config) and not limited:
        return {}
    record = record_of(ctx, state)
    if reason := turn_limit(ctx, state, record, review=False):
        return end(record, reason)
    if not gated(node.action_type, node.action_params, config):
        return {}
    request = permission_request(ctx, state, node)
    try:
        decision = navigator_of(ctx).request_permission(request)
    except NavigatorTimeout as error:
        decision = on_timeout(ctx, error)
    spend(ctx, record, decision.usage, decision.by)
    step = state.get("n_operations", 0)
    record["decisions"].append(
        {
            "step": step,
            "action": request.action,
            "approved": decision.approved,
            "reason": decision.reason,
            "by": decision.by,
            "cost": decision.usage.cost,
        }  # fmt: skip
    )
    if decision.approved:
        return {"navigator": record}
    denied = replace(
        node,
        observation=render_string(config.templates.denied, reason=decision.reason, by=decision.by),
        returncode=-1,
        bad_action=True,
        summary=f"Denied by the navigator ({decision.by}).",
        lessons=decision.reason,
        marks={**node.marks, "denied": {"reason": decision.reason, "by": decision.by}},
    )
    return {"navigator": record, "pending": denied, "accessed": []}
