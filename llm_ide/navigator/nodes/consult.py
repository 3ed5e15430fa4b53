from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.errors import TurnLimit
from llm_ide.navigator.protocol import NavigatorTimeout, Review, ReviewRequest
from llm_ide.navigator.records import end, navigator_of, on_timeout, record_of, spend, turn_limit
from llm_ide.prompting import render_string
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode
from llm_ide.workspace.patch import extract_patch


def current_patch(ctx: AgentContext, state: AgentState) -> str:
    base = state.get("base_commit")
    return extract_patch(ctx.codebase.env, base, ctx.settings.patch) if base else ""


def ask_review(ctx: AgentContext, request: ReviewRequest, round: int) -> Review:
    ask = navigator_of(ctx).request_review
    try:
        return ask(request, round=round) if "round" in inspect.signature(ask).parameters else ask(request)
    except NavigatorTimeout as error:
        decision = on_timeout(ctx, error)
        return Review(passed=decision.approved, comment=decision.reason, by="timeout")


def review(ctx: AgentContext, state: AgentState, node: OperationNode, record: dict[str, Any]) -> dict[str, Any]:
    """`request_review`, or a `submit` under `navigator.review_on_submit`: a passed review lets a submit through; a
    failed one's comment is the observation and a lesson, and the driver goes on."""
    config = ctx.settings.navigator
    summary = str(node.action_params.get("summary") or node.thought)
    record["rounds"] += 1
    result = ask_review(ctx, ReviewRequest(patch=current_patch(ctx, state), summary=summary), record["rounds"])
    spend(ctx, record, result.usage, result.by)
    step = state.get("n_operations", 0)
    entry = {"round": record["rounds"], "passed": result.passed, "comment": result.comment, "by": result.by}
    record["reviews"].append({"step": step, "action": node.action_type, **entry, "cost": result.usage.cost})
    record["last_review_step"] = step
    update: dict[str, Any] = {"navigator": record}
    if result.plan:  # the updated plan is in the next snapshot of the driver's memory, rendered after this step
        update |= {"plan": result.plan, "snapshot": ""}
    marks = {**node.marks, "review": entry}
    if result.passed and node.action_type == "submit":
        update["pending"] = replace(node, marks=marks)
        return update
    observation = render_string(config.templates.review, rounds=config.max_review_rounds, **entry)
    lessons = "" if result.passed else result.comment
    update["pending"] = replace(
        node,
        observation=observation,
        returncode=0 if result.passed else 1,
        bad_action=False,
        summary=observation.splitlines()[0][:200],
        lessons=lessons,
        marks=marks,
    )
    if not result.passed and record["rounds"] >= config.max_review_rounds:  # the failed round is still recorded
        record["ended"] = f"{record['rounds']} review rounds failed (navigator.max_review_rounds)"
        update |= {"exit_status": TurnLimit.exit_status, "error": record["ended"]}
    return update


def consult(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The driver consults the navigator: a review (`request_review`) or guidance (`request_guidance`)."""
    return consult_on(runtime.context, state, state["pending"])


def consult_on(ctx: AgentContext, state: AgentState, node: OperationNode) -> dict[str, Any]:
    """A review (`request_review`, and a `submit` under `navigator.review_on_submit`) or guidance."""
    record = record_of(ctx, state)
    is_review = node.action_type != "request_guidance"
    if reason := turn_limit(ctx, state, record, review=is_review):
        return end(record, reason)
    if is_review:
        return review(ctx, state, node, record)
    question = str(node.action_params.get("question") or node.thought)
    try:
        guidance = navigator_of(ctx).request_guidance(question)
        answer, by, usage = guidance.answer, guidance.by, guidance.usage
    except NavigatorTimeout as error:
        answer, by, usage = str(error), "timeout", None
    if usage is not None:
        spend(ctx, record, usage, by)
    record["guidance"].append({"step": state.get("n_operations", 0), "question": question, "answer": answer, "by": by})
    observation = render_string(ctx.settings.navigator.templates.guidance, answer=answer)
    return {"navigator": record, "pending": replace(node, observation=observation, returncode=0)}
