"""A finished run with attempts given again: its attempts that stopped at a limit the settings given now no longer
reach go on from their last step (each in its own thread), and a higher `attempts.max` adds attempts where none was
accepted; then all are checked, reviewed and chosen among again; at every door (`run`, the Python API, a batch,
LangGraph Studio)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from llm_ide.attempts.choose import unfaulted
from llm_ide.attempts.context import AttemptsContext, attempt_dir, attempt_id, attempt_store
from llm_ide.attempts.trajectory import paid_outside
from llm_ide.budget import CostBudget
from llm_ide.errors import LIMITS
from llm_ide.run.single import past_its_limit
from llm_ide.run.thread import thread_database, thread_values
from llm_ide.terminal import plural

CLEARED = {"exit_status": None, "submission": "", "chosen": None, "chosen_by": "", "choice_reasons": "", "error": ""}


def accepted(attempts: list[dict[str, Any]], accept_score: float | None, going: Collection[int] = ()) -> bool:
    """Whether an attempt was accepted: a review score of `accept_score` or more, and nothing found wrong by running its
    patch (those `going` on aside: reviewed again once they have)."""
    return accept_score is not None and any(
        (r.get("score") or 0) >= accept_score and r.get("submission") and unfaulted(r)
        for r in attempts
        if r["index"] not in going
    )


def more_attempts(values: dict[str, Any], settings: Any) -> bool:
    """Whether a finished run given again has attempts to add: none accepted and fewer than `attempts.max` (one after
    another; all at once, the attempts run are all there are)."""
    attempts, given = values.get("attempts", []), settings.attempts
    done = accepted(attempts, given.accept_score) or (attempts and given.parallel)
    return bool(values.get("exit_status")) and not done and len(attempts) < given.max


def task_spent(output_dir: Path, run_id: str, values: dict[str, Any]) -> float:
    """What a task's attempts (their navigators too), reviews and choice have spent, as its thread and its calls log
    say."""
    reviews = sum(c.get("cost", 0.0) for c in values.get("calls", []))
    outside = paid_outside(output_dir, run_id, values)["cost"]
    attempts = sum(r.get("cost", 0.0) + r.get("cost_apart", 0.0) for r in values.get("attempts", []))
    return attempts + reviews + outside


def past_their_limits(
    output_dir: Path, run_id: str, checkpoint: str | None, values: dict[str, Any], settings: Any, spent: bool
) -> list[int]:
    """The attempts of a run that stopped at a limit, stopped at one the settings no longer reach (`spent`: the
    task's budget is), as their threads' last checkpoints say."""
    if values.get("exit_status") not in LIMITS:
        return []  # (a run that submitted is its result, whatever limits its other attempts reached)
    found = []
    for index in [r["index"] for r in values.get("attempts", []) if r.get("exit_status") in LIMITS]:
        thread_id = attempt_id(run_id, index)
        database = attempt_dir(output_dir, index) / thread_database(thread_id)
        shared = attempt_store(checkpoint)
        if not shared and not database.is_file():
            continue  # (never started: nothing to go on from)
        thread = thread_values(shared or f"sqlite:{database}", [thread_id]).get(thread_id, {})
        if past_its_limit(thread, settings.agent, spent):
            found.append(index)
    return found


def task_going_on(output_dir: Path, run_id: str, checkpoint: str | None, values: dict[str, Any], settings: Any) -> str:
    """How a finished task's attempts go on when it runs again under `settings` (the batch's budget aside): `limits`
    (some past the limits they stopped at), `more` (attempts to add), or not at all (empty)."""
    if values.get("exit_status") not in LIMITS and not more_attempts(values, settings):
        return ""  # (the usual finished task: its threads and calls logs not read)
    spent = CostBudget(settings.attempts.cost_limit or None, task_spent(output_dir, run_id, values)).exhausted
    if past_their_limits(output_dir, run_id, checkpoint, values, settings, spent):
        return "limits"
    return "more" if not spent and more_attempts(values, settings) else ""


def reopened(ctx: AttemptsContext, values: dict[str, Any]) -> dict[str, Any]:
    """The update that reopens a finished run given again, its attempts past their limits going on ({}: none)."""
    request, spent = ctx.request, ctx.budget is not None and ctx.budget.exhausted
    going = past_their_limits(request.output_dir, request.run_id, request.checkpoint, values, request.settings, spent)
    if going:
        which = f"{plural(len(going), 'attempt')} ({', '.join(map(str, going))})"
        said = f"run {request.run_id} had stopped at a limit: {which} going on from their last step"
        ctx.emit(f"{said}, under the limits given now")
    return {**CLEARED, "going_on": going} if going else {}
