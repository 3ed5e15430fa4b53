"""Where the step's operation goes in the tree: the child of the latest operation, or its sibling (an alternative in
its place, the first under the virtual root) when the verdict on it was bad; its lessons stay with it."""

from __future__ import annotations

from typing import Any

from llm_ide import verdict
from llm_ide.state.graph_state import AgentState, operations_now
from llm_ide.state.operations import OperationNode


def parent(latest: OperationNode | None) -> int | None:
    """Where the next operation hangs, by the verdict on the latest."""
    if latest is None:
        return None
    return latest.parent_id if verdict.bad(latest) else latest.id


def branch(state: AgentState) -> dict[str, Any]:
    nodes = operations_now(state)
    return {"pending": OperationNode(id=len(nodes), parent_id=parent(nodes[-1] if nodes else None))}
