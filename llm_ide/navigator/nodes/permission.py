"""The permission gate, around the driver's actions: a gated action runs only when the navigator approves it. A
denied one is not run: it is recorded as denied and as a bad action whose lesson is the navigator's reason, so the
driver's next action is its sibling (an alternative)."""

from __future__ import annotations

from dataclasses import replace

from llm_ide import verdict
from llm_ide.conversation import params_text
from llm_ide.navigator.gate import diff_preview, gated
from llm_ide.navigator.nodes.consult import review
from llm_ide.navigator.protocol import NavigatorTimeout, PermissionRequest
from llm_ide.navigator.records import end, navigator_of, on_timeout, record_of, saved_if_cut, spend, turn_limit
from llm_ide.nodes.render_context import code_context_text
from llm_ide.prompting import render_string, truncate
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode
from llm_ide.variant import ActionResult, ActionRun, AgentContext
from llm_ide.verdict import Verdict


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


def reviewed_submit(ctx: AgentContext, state: AgentState, node: OperationNode, run: ActionRun) -> ActionResult:
    """A submit under `navigator.review_on_submit`: it runs once the review passes."""
    record = record_of(ctx, state)
    if reason := turn_limit(ctx, state, record, review=True):
        return ActionResult(node, update=end(record, reason))
    result = review(ctx, state, node, record)
    if result.node.returncode is not None or "exit_status" in result.update:
        return result
    return run(result.node).merged(result.update)


def permission(ctx: AgentContext, state: AgentState, node: OperationNode, run: ActionRun) -> ActionResult:
    config = ctx.settings.navigator
    if node.action_type == "submit" and config.review_on_submit:
        return reviewed_submit(ctx, state, node, run)
    if not gated(node.action_type, node.action_params, config) and not (
        config.max_driver_turns and state.get("navigator")
    ):
        return run(node)
    record = record_of(ctx, state)
    if reason := turn_limit(ctx, state, record, review=False):
        return ActionResult(node, update=end(record, reason))
    if not gated(node.action_type, node.action_params, config):
        return run(node)
    request = permission_request(ctx, state, node)
    try:
        with saved_if_cut(ctx, record):
            decision = navigator_of(ctx).request_permission(request)
    except NavigatorTimeout as error:
        decision = on_timeout(ctx, error)
    spend(ctx, record, decision.usage, decision.by)
    entry = {"action": request.action, "approved": decision.approved, "reason": decision.reason, "by": decision.by}
    record["decisions"].append({"step": state.get("n_operations", 0) + 1, **entry, "cost": decision.usage.cost})
    if decision.approved:
        return run(node).merged({"navigator": record})
    refused = replace(
        node,
        observation=render_string(config.templates.denied, reason=decision.reason, by=decision.by),
        returncode=-1,
        marks={**node.marks, "denied": {"reason": decision.reason, "by": decision.by}},
    )
    denied = verdict.given(refused, Verdict(True, f"Denied by the navigator ({decision.by}).", decision.reason))
    return ActionResult(denied, update={"navigator": record})
