"""The graph's state: what a run starts from (`AgentInput`), its memory and outcome (`RunState`), the step's scratch
fields private to the nodes (`StepState`), and the run's usage."""

from __future__ import annotations

from typing import Annotated, Any

from typing_extensions import TypedDict  # pydantic (LangGraph Studio's schemas) needs it on Python < 3.12

from llm_ide.errors import ExitStatus, ThreadMismatchError
from llm_ide.state.context import Chunk, Scope
from llm_ide.state.operations import OperationNode, merge_operations


def one_task(kept: str, given: str) -> str:
    """A thread is one task's: a run given another is refused as its input is applied (the thread left as it was)."""
    if kept and given != kept:
        summary = " ".join(kept.split())[:80]
        raise ThreadMismatchError(
            f"the thread is a run of another task ({summary!r}); start a new thread (or give the same task to resume)"
        )
    return given


class AgentInput(TypedDict, total=False):
    """What a run starts from (the fields LangGraph Studio asks for)."""

    task: Annotated[str, one_task]
    repo: str
    model: str
    base_url: str
    config: dict[str, Any]
    base_commit: str
    carried_lessons: list[str]  # lessons learnt before this run (e.g. by an earlier run at the task), shown first
    worktree_patch: str  # the worktree against the base as the run found it (set by run_task; then each change's)


class Usage(TypedDict):
    """The run's model usage; `input_tokens` includes the cached ones (read from / written to the prompt cache)."""

    api_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    estimated_calls: int  # calls whose usage was estimated from the text (the response carried none)


class RunState(AgentInput, total=False):
    """The run's memory and outcome: what the graph returns and what outlives a step."""

    code_context: list[Chunk]
    operations: Annotated[list[OperationNode], merge_operations]
    n_operations: int
    usage: Usage
    elapsed: float
    exit_status: ExitStatus | None
    error: str  # LangGraph Studio: the message of the error that ended the run
    submission: str  # LangGraph Studio: the patch, when the run has ended


class MemoryBase(TypedDict):
    """The base of the current snapshot, rendered at its last full renewal and kept byte for byte since: its text and
    what it shows (the operations then, the chain's nodes in its history, the lessons, files and changes), and what
    the parts that followed it in the snapshots since cost in re-reads (in uncached characters); the run's first
    snapshot's length and what the memory's prompts had cost more than full history's after the epoch's first call
    (in uncached characters; below 0 when less)."""

    text: str
    step: int
    history: int
    lessons: list[str]
    files: list[str]
    changes: str
    since: int
    held: float
    first: int
    balance: float


class Proposal(TypedDict):
    """An action read from a reply, for the node that takes it (the marks: what a wrapper of the call recorded)."""

    thought: str
    action_type: str
    action_params: dict[str, Any]
    marks: dict[str, Any]


class StepState(TypedDict, total=False):
    """Scratch fields of the current step, and the current epoch's memory snapshot, private to the nodes (not in the
    graph's output)."""

    snapshot: str  # the memory as rendered when the current epoch began
    snapshot_step: int  # n_operations then
    snapshot_base: MemoryBase | None  # the snapshot's base (None: the next renewal is a full one)
    proposed: Proposal | None  # one call per step: the action the step's one reply holds, for `act`
    changed: list[OperationNode] | None  # operations the step changed before its own (the latest judged): saved with it
    pending: OperationNode | None  # the step's operation: placed by `branch`, its action by `act`, then run
    accessed: list[Scope]
    submitted: bool
    retry: dict[str, str] | None
    format_errors: int


class AgentState(RunState, StepState, total=False):
    """What the nodes read: the run's state and the step's scratch fields."""


def empty_usage() -> Usage:
    return Usage(
        api_calls=0,
        input_tokens=0,
        output_tokens=0,
        cache_read_tokens=0,
        cache_write_tokens=0,
        cost=0.0,
        estimated_calls=0,
    )


def operations_now(state: AgentState) -> list[OperationNode]:
    """The operations as the step sees them: with those it changed, committed at its end (the tree's one write)."""
    nodes, changed = state.get("operations", []), {node.id: node for node in state.get("changed") or []}
    return [changed.get(node.id, node) for node in nodes] if changed else nodes
