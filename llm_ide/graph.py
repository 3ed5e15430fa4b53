"""The agent's graph: the core loop, and each variant's nodes where it puts them (llm_ide/variant.py).

    START → prelude… → step_start… → render_context → reflect → branch → act → gates… → execute_tool
          → after_action… → update_activity → step_start… (or END)

`act` routes an action some variant answers (`routes`) to its node; a gate or such a node that settles the pending
operation (gives it a return code) sends it past the action; any node that ends the run (an exit status, or no
pending operation left) goes to END."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from llm_ide.nodes.act import act
from llm_ide.nodes.branch import branch
from llm_ide.nodes.execute_tool import execute_tool
from llm_ide.nodes.reflect import reflect
from llm_ide.nodes.render_context import render_context
from llm_ide.nodes.update_activity import update_activity
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentInput, AgentState, RunState, StepState
from llm_ide.variant import Variants

CORE = {node.__name__: node for node in (render_context, reflect, branch, act, execute_tool, update_activity)}


def merged_schema(name: str, schemas: list[type]) -> type:
    """One TypedDict with the fields (and reducers) of `schemas`; the first alone when there is one."""
    if len(schemas) == 1:
        return schemas[0]
    fields: dict[str, Any] = {}
    for schema in schemas:
        fields |= get_type_hints(schema, include_extras=True)
    return TypedDict(name, fields, total=False)  # type: ignore[operator]


def after_render(state: AgentState) -> str:
    """An operation already judged (a gate settled it) is not reflected on again."""
    if state.get("exit_status"):
        return END
    operations = state.get("operations")
    return "reflect" if operations and operations[-1].bad_action is None else "branch"


def after_reflect(state: AgentState) -> str:
    if state.get("exit_status"):
        return END
    return "reflect" if state.get("retry") else "branch"


class Wiring:
    """The graph's order for one combination of variants."""

    def __init__(self, variants: Variants) -> None:
        self.prelude = [name for v in variants for name in v.prelude]
        self.step = [*(name for v in variants for name in v.step_start), "render_context"]
        self.gates = [*(name for v in variants for name in v.gates), "execute_tool"]
        self.after = [*(name for v in variants for name in v.after_action), "update_activity"]
        self.routes = {action: node for v in variants for action, node in v.routes.items()}

    def after_prelude(self, following: str) -> Callable[[AgentState], str]:
        return lambda state: END if state.get("exit_status") else following

    def after_act(self, state: AgentState) -> str:
        if state.get("exit_status"):
            return END
        if state.get("retry"):
            return "act"
        return self.routes.get(state["pending"].action_type, self.gates[0])

    def after_gate(self, following: str) -> Callable[[AgentState], str]:
        """No pending operation: the run ends (a turn limit); settled: recorded without running; else onwards."""

        def route(state: AgentState) -> str:
            pending = state.get("pending")
            if pending is None:
                return END
            if pending.returncode is not None:
                return self.after[0]
            return END if state.get("exit_status") else following

        return route

    def after_update(self, state: AgentState) -> str:
        return END if state.get("exit_status") else self.step[0]


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    context_schema: type[AgentContext] | None = AgentContext,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    variants: Variants | None = None,
    input_schema: type[Any] = AgentInput,
) -> CompiledStateGraph:
    """The agent's graph with `variants` (none: the core loop); `wrap` (LangGraph Studio: llm_ide.studio) wraps each
    node that uses the run's context. `input_schema`: what the graph's input holds (Studio's marks the required
    fields)."""
    variants = variants or Variants()
    run_state = merged_schema("RunState", [RunState, *(v.state for v in variants if v.state)])
    scratch = [v.scratch for v in variants if v.scratch]
    node_state = (
        AgentState
        if run_state is RunState and not scratch
        else merged_schema("AgentState", [run_state, StepState, *scratch])
    )
    builder = StateGraph(run_state, context_schema=context_schema, input_schema=input_schema, output_schema=run_state)
    nodes = dict(CORE)
    for variant in variants:
        nodes |= variant.replaces()
        nodes |= variant.nodes()
    for name, node in nodes.items():
        uses_context = "runtime" in inspect.signature(node).parameters
        builder.add_node(name, wrap(node) if wrap is not None and uses_context else node, input_schema=node_state)
    wiring = Wiring(variants)
    ends = [END]
    builder.add_edge(START, (wiring.prelude or wiring.step)[0])
    for position, name in enumerate(wiring.prelude):
        following = [*wiring.prelude, wiring.step[0]][position + 1]
        builder.add_conditional_edges(name, wiring.after_prelude(following), [following, *ends])
    for name, following in zip(wiring.step, wiring.step[1:], strict=False):
        builder.add_edge(name, following)
    builder.add_conditional_edges("render_context", after_render, ["reflect", "branch", *ends])
    builder.add_conditional_edges("reflect", after_reflect, ["reflect", "branch", *ends])
    builder.add_edge("branch", "act")
    builder.add_conditional_edges(
        "act", wiring.after_act, ["act", *set(wiring.routes.values()), wiring.gates[0], *ends]
    )
    for name, following in zip(wiring.gates, wiring.gates[1:], strict=False):
        builder.add_conditional_edges(name, wiring.after_gate(following), [following, wiring.after[0], *ends])
    for name in set(wiring.routes.values()):
        builder.add_conditional_edges(name, wiring.after_gate("execute_tool"), ["execute_tool", wiring.after[0], *ends])
    builder.add_edge("execute_tool", wiring.after[0])
    for name, following in zip(wiring.after, wiring.after[1:], strict=False):
        builder.add_edge(name, following)
    builder.add_conditional_edges("update_activity", wiring.after_update, [wiring.step[0], *ends])
    name = "-".join(["llm-ide", *(v.name for v in variants if v.nodes() or v.replaces())])
    return builder.compile(checkpointer=checkpointer, name=name)
