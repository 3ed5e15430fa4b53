"""Where the step's operation goes in the tree: the child of the latest operation, or its sibling (an alternative in
its place) when the verdict on it was bad; the latest operation, with its verdict and lessons, is committed with the
step's (`update_activity`)."""

from __future__ import annotations

from typing import Any

from llm_ide import verdict
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode


def branch(state: AgentState) -> dict[str, Any]:
    nodes = state.get("operations", [])
    latest = state.get("judged") or (nodes[-1] if nodes else None)
    return {"pending": OperationNode(id=len(nodes), parent_id=verdict.parent(latest))}
