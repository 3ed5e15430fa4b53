"""The attempts graph's state: the task, one record per attempt (merged by index), the reviewer's and chooser's
calls, the carried lessons and the choice."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from typing_extensions import TypedDict

from llm_ide.state.graph_state import AgentInput


class AttemptRecord(TypedDict, total=False):
    index: int
    run_id: str
    exit_status: str
    submission: str
    cost: float
    cost_apart: float  # what its variants paid apart from its driver's calls (its navigator's)
    api_calls: int
    steps: int
    trajectory: str  # the attempt's own trajectory, relative to the run's output folder
    chain: str  # its reasoning chain, one line per operation
    lessons: list[str]
    test_output: str
    facts: dict[str, Any]  # what the attempt's variants found (e.g. a check run before and after)
    checks: dict[str, Any]  # what running its patch in a clean environment found (the `verify` node)
    rank: list[int]  # from those checks: compared before any model judges (lower is better; all zeros: none wrong)
    error: str
    score: float | None  # the reviewer's
    reasons: str


def merge_attempts(old: list[AttemptRecord] | None, new: list[AttemptRecord] | None) -> list[AttemptRecord]:
    """Records by attempt index; a newer record of the same attempt adds to (or replaces) its fields."""
    merged = {record["index"]: dict(record) for record in old or []}
    for record in new or []:
        merged[record["index"]] = {**merged.get(record["index"], {}), **record}
    return [AttemptRecord(**merged[index]) for index in sorted(merged)]  # type: ignore[typeddict-item]


class AttemptsInput(AgentInput, total=False):
    """What the attempts start from: a run's input (the fields LangGraph Studio asks for) and where they go."""

    output: str  # LangGraph Studio: the folder of the attempts' runs (default runs/<thread id>)


class AttemptTask(AttemptsInput, total=False):
    """What one `attempt` node gets through its Send."""

    index: int
    known: int  # the attempts the run held when it was sent: in parallel, all there are (a finished run gone on)


class AttemptsState(AttemptsInput, total=False):
    attempts: Annotated[list[AttemptRecord], merge_attempts]
    pending: list[int]  # the attempts `dispatch` starts now
    going_on: list[int]  # attempts stopped at a limit the settings no longer reach: each goes on from its last step
    calls: Annotated[list[dict[str, Any]], operator.add]  # the reviewer's and the chooser's model calls
    verification: dict[str, Any]  # by variant: what its verification ran (kept, so that nothing runs twice)
    chosen: int | None  # the chosen attempt's index
    chosen_by: str  # accept_score | execution | chooser | best_score | only | none
    execution_pick: list[int]  # the attempts whose patches ranked best by execution (all of them: no say)
    choice_reasons: str
    exit_status: str
    submission: str
    error: str
