"""The edges of the agent graph with a navigator (llm_ide.graph.build_graph(navigator=True))."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END

from llm_ide.navigator.nodes.permission import CONSULTED
from llm_ide.state.graph_state import AgentState


def after_plan(state: AgentState) -> Literal["render_context", "__end__"]:
    return END if state.get("exit_status") else "render_context"


def after_render(state: AgentState) -> Literal["reflect", "branch", "__end__"]:
    """An operation the navigator already judged (denied, reviewed) is not reflected on again."""
    if state.get("exit_status"):
        return END
    operations = state.get("operations")
    if not operations or operations[-1].bad_action is not None:
        return "branch"
    return "reflect"


def after_act(state: AgentState) -> Literal["act", "permission", "consult", "__end__"]:
    if state.get("exit_status"):
        return END
    if state.get("retry"):
        return "act"
    return "consult" if state["pending"].action_type in CONSULTED else "permission"


def after_permission(state: AgentState) -> Literal["execute_tool", "update_activity", "__end__"]:
    """Approved: run it. Denied, or a submit whose review failed: record it without running it. A turn limit: end."""
    pending = state.get("pending")
    if pending is None:
        return END
    if pending.denied is not None or (pending.review is not None and not pending.review["passed"]):
        return "update_activity"
    return END if state.get("exit_status") else "execute_tool"


def after_consult(state: AgentState) -> Literal["update_activity", "__end__"]:
    return END if state.get("pending") is None else "update_activity"
