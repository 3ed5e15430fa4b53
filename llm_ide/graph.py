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
from llm_ide.nodes.receive_messages import receive_messages
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


def after_update_messages(state: AgentState) -> Literal["receive_messages", "__end__"]:
    return END if state.get("exit_status") else "receive_messages"


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    context_schema: type[AgentContext] | None = AgentContext,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    messages: bool = False,
) -> CompiledStateGraph:
    """The agent's graph; `wrap` (LangGraph Studio: llm_ide.studio) wraps each node that uses the run's context.
    `messages` (coop execution): the variant that takes the other agent's messages in before every step."""
    builder = StateGraph(RunState, context_schema=context_schema, input_schema=AgentInput, output_schema=RunState)
    nodes = (render_context, reflect, branch, act, execute_tool, update_activity)
    for node in (receive_messages, *nodes) if messages else nodes:
        uses_context = "runtime" in inspect.signature(node).parameters
        action = wrap(node) if wrap is not None and uses_context else node
        builder.add_node(node.__name__, action, input_schema=AgentState)  # AgentState: with the private fields
    builder.add_edge(START, "receive_messages" if messages else "render_context")
    if messages:
        builder.add_edge("receive_messages", "render_context")
    builder.add_conditional_edges("render_context", after_render)
    builder.add_conditional_edges("reflect", after_reflect)
    builder.add_edge("branch", "act")
    builder.add_conditional_edges("act", after_act)
    builder.add_edge("execute_tool", "update_activity")
    builder.add_conditional_edges("update_activity", after_update_messages if messages else after_update)
    return builder.compile(checkpointer=checkpointer, name="llm-ide-coop" if messages else "llm-ide")
