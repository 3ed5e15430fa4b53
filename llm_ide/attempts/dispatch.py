"""The `dispatch` node: which attempts start now. One after another: the next one, unless an attempt was accepted (a
review score of `accept_score` or more, and nothing found wrong by running its patch), `attempts.max` is reached or
the task's budget is spent. In parallel: all of them at once, then none. Attempts that go on past their limits (a
finished run resumed with higher ones) come first, in the same way. A finished run given again with nothing to go on
(LangGraph Studio's form sent again) ends at once, its result kept: nothing is chosen (or paid for) again."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Send

from llm_ide.attempts.context import AttemptsContext, git
from llm_ide.attempts.limits import CLEARED, accepted, reopened
from llm_ide.attempts.state import AttemptsState
from llm_ide.environments import capabilities

SHARED = ("task", "repo", "model", "base_url", "config", "base_commit", "output")


def dispatch(state: AttemptsState, runtime: Runtime[AttemptsContext]) -> dict[str, Any]:
    ctx = runtime.context
    settings = ctx.settings.attempts
    assert ctx.budget is not None
    update = reopened(ctx, dict(state)) if state.get("exit_status") else {}  # a finished run given again
    attempts, going = state.get("attempts", []), update.get("going_on", state.get("going_on", []))
    local = not capabilities(ctx.request.environment or ctx.settings.environment.type).ephemeral
    if not state.get("base_commit") and ctx.repo is not None and local:  # Studio's input has none: the HEAD
        update["base_commit"] = git(ctx.repo, "rev-parse", "--verify", "HEAD")
    if accepted(attempts, settings.accept_score, going) or ctx.budget.exhausted:
        return {**update, "pending": [], "going_on": []}
    if going:
        now = going if settings.parallel else going[:1]
        return {**update, "pending": now, "going_on": going[len(now) :]}
    if len(attempts) >= settings.max or (attempts and settings.parallel):
        return {**update, "pending": []}
    last = len(attempts) + 1
    anew = CLEARED if state.get("exit_status") else {}  # a finished run given a higher attempts.max: chosen anew
    return {"pending": list(range(last, settings.max + 1) if settings.parallel else [last]), **update, **anew}


def send_attempts(state: AttemptsState) -> list[Send] | str:
    """The pending attempts, each through its own Send; none left: the choice, or the end of a run that had finished
    and was given again with nothing to go on (its result stands)."""
    if not state.get("pending"):
        return END if state.get("exit_status") else "choose"
    shared = {key: state[key] for key in SHARED if key in state}
    lessons, known = state.get("carried_lessons", []), len(state.get("attempts", []))
    return [
        Send("attempt", {**shared, "index": index, "carried_lessons": lessons, "known": known})
        for index in state["pending"]
    ]
