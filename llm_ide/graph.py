from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from llm_ide.nodes.act import act
from llm_ide.nodes.branch import branch
from llm_ide.nodes.execute_tool import execute_tool
from llm_ide.nodes.reflect import reflect
from llm_ide.nodes.render_context import render_context
from llm_ide.nodes.update_activity import update_activity
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentInput, AgentState, RunState


def after_render(state: AgentState) -> Literal["reflect", "branch", "__end__"]:
    if state.get("exit_status"):
        return END
    return "reflect" if state.get("operations") else "branch"


def after_reflect(state: AgentState) -> Literal["reflect", "branch", "__end__"]:
    if state.get("exit_status"):
        return END
    return "reflect" if state.get("retry") else "branch"


def after_act(state: AgentState) -> Literal["act", "execute_tool", "__end__"]:
    if state.get("exit_status"):
        return END
    return "act" if state.get("retry") else "execute_tool"


def after_update(state: AgentState) -> Literal["render_context", "__end__"]:
    return END if state.get("exit_status") else "render_context"


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    context_schema: type[AgentContext] | None = AgentContext,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    navigator: bool = False,
) -> CompiledStateGraph:
    """The agent's graph; `wrap` (LangGraph Studio: llm_ide.studio) wraps each node that uses the run's context.
    With `navigator` (navigator.mode not off) the variant with the navigator: `plan` before the driver's first step,
    `permission` between `act` and `execute_tool`, `consult` for the driver's review and guidance requests."""
    builder = StateGraph(RunState, context_schema=context_schema, input_schema=AgentInput, output_schema=RunState)
    nodes: list[Callable[..., Any]] = [render_context, reflect, branch, act, execute_tool, update_activity]
    if navigator:
        from llm_ide.navigator.nodes.consult import consult
        from llm_ide.navigator.nodes.permission import permission
        from llm_ide.navigator.nodes.plan import plan

        nodes += [plan, permission, consult]
    for node in nodes:
        uses_context = "runtime" in inspect.signature(node).parameters
        action = wrap(node) if wrap is not None and uses_context else node
        builder.add_node(node.__name__, action, input_schema=AgentState)  # AgentState: with the private fields
    builder.add_edge("branch", "act")
    builder.add_edge("execute_tool", "update_activity")
    builder.add_conditional_edges("update_activity", after_update)
    if not navigator:
        builder.add_edge(START, "render_context")
        builder.add_conditional_edges("render_context", after_render)
        builder.add_conditional_edges("reflect", after_reflect)
        builder.add_conditional_edges("act", after_act)
        return builder.compile(checkpointer=checkpointer, name="llm-ide")
    from llm_ide.navigator import routes

    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", routes.after_plan)
    builder.add_conditional_edges("render_context", routes.after_render)
    builder.add_conditional_edges("reflect", after_reflect)
    builder.add_conditional_edges("act", routes.after_act)
    builder.add_conditional_edges("permission", routes.after_permission)
    builder.add_conditional_edges("consult", routes.after_consult)
    return builder.compile(checkpointer=checkpointer, name="llm-ide-navigator")
