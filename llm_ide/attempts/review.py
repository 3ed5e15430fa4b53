"""The `review` node: each attempt not yet reviewed gets a score (0-10) and reasons from the reviewer model (none
once the task's budget is spent); when `carry_lessons` is on, its critique and lessons go into the next attempt's
Lessons Learned."""

from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.attempts.context import AttemptsContext
from llm_ide.attempts.state import AttemptRecord, AttemptsState
from llm_ide.prompting import render_string, truncate
from llm_ide.text import extract_tag

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_review(text: str) -> tuple[float, str]:
    """(score in [0, 10], reasons); a reply without a readable score scores 0."""
    found = NUMBER.search(extract_tag(text, "score", required=False) or "")
    score = min(10.0, max(0.0, float(found.group()))) if found else 0.0
    reasons = extract_tag(text, "reasons", required=False) or text
    return score, " ".join(reasons.split())


def review_one(ctx: AttemptsContext, task: str, record: AttemptRecord) -> tuple[AttemptRecord, dict]:
    settings = ctx.settings.attempts
    templates = settings.templates
    patch = record.get("submission", "")
    values = {
        "task": task,
        "index": record["index"],
        "exit_status": record.get("exit_status", ""),
        "patch": truncate(patch, settings.patch_chars, ctx.settings.templates) if patch.strip() else templates.no_patch,
        "chain": record.get("chain", ""),
        "lessons": "\n".join(f"- {lesson}" for lesson in record.get("lessons", [])) or "(none)",
        "test_output": record.get("test_output", ""),
        "facts": {**(record.get("facts") or {}), **(record.get("checks") or {})},
    }
    text, call = ctx.ask(
        "review",
        render_string(templates.review_system),
        render_string(templates.review, **values),
        attempt=record["index"],
    )
    score, reasons = parse_review(text)
    ctx.emit(f"review: attempt {record['index']} scored {score:g}", reasons)
    return AttemptRecord(index=record["index"], score=score, reasons=reasons), call


def carried(ctx: AttemptsContext, record: AttemptRecord) -> list[str]:
    """What the next attempt learns from this one: the reviewer's critique, then the attempt's own lessons."""
    values = {**record, "score": f"{record['score']:g}"}
    critique = render_string(ctx.settings.attempts.templates.carried_lesson, **values)
    return [" ".join(critique.split()), *record.get("lessons", [])]


def review(state: AttemptsState, runtime: Runtime[AttemptsContext]) -> dict[str, Any]:
    ctx = runtime.context
    reviewed, calls = [], []
    lessons = list(state.get("carried_lessons", []))
    for record in state.get("attempts", []):
        if record.get("score") is not None or (ctx.budget is not None and ctx.budget.exhausted):
            continue  # reviewed, or the task's budget is spent: no more calls
        scored, call = review_one(ctx, state["task"], record)
        reviewed.append(scored)
        calls.append(call)
        if ctx.settings.attempts.carry_lessons:
            lessons += carried(ctx, {**record, **scored})
    return {"attempts": reviewed, "calls": calls, "carried_lessons": list(dict.fromkeys(lessons))}
