"""The driver consults the navigator: a review (`request_review`, and a `submit` under `navigator.review_on_submit`)
or guidance (`request_guidance`); actions of the navigator variant, answered here instead of the environment."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from llm_ide import verdict
from llm_ide.navigator.protocol import NavigatorTimeout, Review, ReviewRequest
from llm_ide.navigator.records import end, navigator_of, on_timeout, record_of, saved_if_cut, spend, turn_limit
from llm_ide.prompting import render_string
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode
from llm_ide.variant import ActionResult, AgentContext
from llm_ide.verdict import Verdict
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


def review(ctx: AgentContext, state: AgentState, node: OperationNode, record: dict[str, Any]) -> ActionResult:
    """A passed review lets a submit through (its node marked, not run yet: no return code); a failed one's comment
    is the observation and a lesson, and the driver goes on."""
    config = ctx.settings.navigator
    summary = str(node.action_params.get("summary") or node.thought)
    record["rounds"] += 1
    with saved_if_cut(ctx, record):
        result = ask_review(ctx, ReviewRequest(patch=current_patch(ctx, state), summary=summary), record["rounds"])
    spend(ctx, record, result.usage, result.by)
    done = state.get("n_operations", 0)  # the steps done: this one is done + 1, as the console numbers it
    entry = {"round": record["rounds"], "passed": result.passed, "comment": result.comment, "by": result.by}
    record["reviews"].append({"step": done + 1, "action": node.action_type, **entry, "cost": result.usage.cost})
    record["last_review_step"] = done
    update: dict[str, Any] = {"navigator": record}
    if result.plan:  # the updated plan is in the next snapshot of the driver's memory, rendered after this step
        update |= {"plan": result.plan, "snapshot": ""}
    marks = {**node.marks, "review": entry}
    if result.passed and node.action_type == "submit":
        return ActionResult(replace(node, marks=marks), update=update)
    observation = render_string(config.templates.review, rounds=config.max_review_rounds, **entry)
    reviewed = replace(node, observation=observation, returncode=0 if result.passed else 1, marks=marks)
    found = Verdict(False, observation.splitlines()[0][:200], "" if result.passed else result.comment)
    answered = verdict.given(reviewed, found)
    if not result.passed and record["rounds"] >= config.max_review_rounds:  # the failed round is still recorded
        update |= end(record, f"{record['rounds']} review rounds failed (navigator.max_review_rounds)")
        update.pop("pending")
    return ActionResult(answered, update=update)


def consult(ctx: AgentContext, state: AgentState, node: OperationNode) -> ActionResult:
    """A review, or guidance; a turn limit reached ends the run before the navigator is asked."""
    record = record_of(ctx, state)
    is_review = node.action_type != "request_guidance"
    if reason := turn_limit(ctx, state, record, review=is_review):
        return ActionResult(node, update=end(record, reason))
    if is_review:
        return review(ctx, state, node, record)
    question = str(node.action_params.get("question") or node.thought)
    try:
        with saved_if_cut(ctx, record):
            guidance = navigator_of(ctx).request_guidance(question)
        answer, by, usage = guidance.answer, guidance.by, guidance.usage
    except NavigatorTimeout as error:
        answer, by, usage = str(error), "timeout", None
    if usage is not None:
        spend(ctx, record, usage, by)
    step = state.get("n_operations", 0) + 1
    record["guidance"].append({"step": step, "question": question, "answer": answer, "by": by})
    observation = render_string(ctx.settings.navigator.templates.guidance, answer=answer)
    return ActionResult(replace(node, observation=observation, returncode=0), update={"navigator": record})
