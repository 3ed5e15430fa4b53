from __future__ import annotations

from typing import Any

from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import next_parent, with_reflection


def branch(state: AgentState) -> dict[str, Any]:
    """Child of the previous operation when it was good, its sibling (an alternative) when it was bad."""
    return {"parent_id": next_parent(with_reflection(state.get("operations", []), state.get("reflection")))}
