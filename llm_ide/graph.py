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
from llm_ide.nodes.sampled_act import sampled_act
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
    sampled: bool = False,
    navigator: bool = False,
    messages: bool = False,
    input_schema: type[Any] = AgentInput,
) -> CompiledStateGraph:
    """The agent's graph; `wrap` (LangGraph Studio: llm_ide.studio) wraps each node that uses the run's context.
    Variants: `sampled`: the `act` node is action sampling (`sampled_act`: `sampling.k` candidates, one runs);
    `navigator` (navigator.mode not off): `plan` before the driver's first step, `permission` between `act` and
    `execute_tool`, `consult` for the driver's review and guidance requests; `messages` (coop execution): the other
    agent's messages taken in before every step. `input_schema`: what the graph's input holds (Studio's marks the
    required fields)."""
    builder = StateGraph(RunState, context_schema=context_schema, input_schema=input_schema, output_schema=RunState)
    nodes: list[Callable[..., Any]] = [render_context, reflect, branch, sampled_act if sampled else act]
    nodes += [execute_tool, update_activity]
    if messages:
        nodes.insert(0, receive_messages)
    if navigator:
        from llm_ide.navigator.nodes.consult import consult
        from llm_ide.navigator.nodes.permission import permission
        from llm_ide.navigator.nodes.plan import plan

        nodes += [plan, permission, consult]
    for node in nodes:
        uses_context = "runtime" in inspect.signature(node).parameters
        action = wrap(node) if wrap is not None and uses_context else node
        name = "act" if node is sampled_act else node.__name__  # the same graph: only the node's behaviour differs
        builder.add_node(name, action, input_schema=AgentState)  # AgentState: with the private fields
    first = "receive_messages" if messages else "render_context"
    if messages:
        builder.add_edge("receive_messages", "render_context")
    builder.add_edge("branch", "act")
    builder.add_edge("execute_tool", "update_activity")
    builder.add_conditional_edges("update_activity", after_update_messages if messages else after_update)
    builder.add_conditional_edges("reflect", after_reflect)
    if not navigator:
        builder.add_edge(START, first)
        builder.add_conditional_edges("render_context", after_render)
        builder.add_conditional_edges("act", after_act)
        return builder.compile(checkpointer=checkpointer, name="llm-ide-coop" if messages else "llm-ide")
    from llm_ide.navigator import routes

    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", routes.after_plan)
    builder.add_conditional_edges("render_context", routes.after_render)
    builder.add_conditional_edges("act", routes.after_act)
    builder.add_conditional_edges("permission", routes.after_permission)
    builder.add_conditional_edges("consult", routes.after_consult)
    return builder.compile(checkpointer=checkpointer, name="llm-ide-navigator")
