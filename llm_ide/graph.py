"""The agent's graph: the design card's six nodes, and each variant's nodes where it puts them (llm_ide/variant.py).

    START → once… → each step… → render_context → reflect → branch → act → execute_tool → update_activity → …

`render_context` renders the memory at the start of an epoch; `reflect` gets the verdict on the latest operation (it is
skipped when none is due: the first step, an operation judged as it ran); `branch` places the step's operation by it;
`act` gets the action; `execute_tool` runs it; `update_activity` commits the step and ends the run at a limit.
`reflect` and `act` ask again for a reply they could not read; a node that ends the run (an exit status in the state)
goes to `update_activity`, which counts the run's time and ends it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import update_wrapper
from typing import Any, get_type_hints

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from llm_ide.errors import LlmIdeError, ended
from llm_ide.nodes.act import act
from llm_ide.nodes.branch import branch
from llm_ide.nodes.execute_tool import execute_tool
from llm_ide.nodes.reflect import reflect, reflecting
from llm_ide.nodes.render_context import render_context
from llm_ide.nodes.update_activity import update_activity
from llm_ide.state.graph_state import AgentInput, AgentState, RunState, StepState
from llm_ide.variant import AgentContext, Node, Variants

CORE = {node.__name__: node for node in (render_context, reflect, branch, act, execute_tool, update_activity)}
ENDING = "update_activity"


def guarded(node: Node) -> Node:
    """`node` as the graph runs it: an error that finishes the run (format errors, a turn limit, an environment
    gone…) becomes its ending in the state; one that does not (a model that cannot answer, an interruption) stops
    the run, resumable."""
    uses_runtime = "runtime" in inspect.signature(node).parameters

    def run(state: dict[str, Any], runtime: Runtime[AgentContext]) -> dict[str, Any]:
        try:
            return node(state, runtime) if uses_runtime else node(state)
        except LlmIdeError as error:
            if not error.exit_status.finished:
                raise
            return ended(error)

    signature = inspect.signature(run)  # LangGraph passes the runtime by it; `wraps` alone would show the node's
    wrapped = update_wrapper(run, node)  # (and through `__wrapped__` it finds a subgraph a node runs, to draw it)
    wrapped.__signature__ = signature  # type: ignore[attr-defined]
    return wrapped


def routed(node: Node, route: Callable[[AgentState], str]) -> Callable[..., Command[str]]:
    """`node` routing by the `Command` it returns: `route` reads the state with the node's update (a field without a
    reducer), as a conditional edge would, but LangGraph does not copy every channel to read the state again."""

    def run(state: dict[str, Any], runtime: Runtime[AgentContext]) -> Command[str]:
        update = node(state, runtime)
        return Command(update=update, goto=route({**state, **update}))  # type: ignore[typeddict-item]

    signature = inspect.signature(run)  # as `guarded`'s, and through `__wrapped__` LangGraph finds a subgraph to draw
    wrapped = update_wrapper(run, node)
    wrapped.__wrapped__, wrapped.__signature__ = inspect.unwrap(node), signature  # type: ignore[attr-defined]
    return wrapped


def merged_schema(name: str, schemas: list[type]) -> type:
    """One TypedDict with the fields (and reducers) of `schemas`; the first alone when there is one."""
    if len(schemas) == 1:
        return schemas[0]
    fields = {key: hint for schema in schemas for key, hint in get_type_hints(schema, include_extras=True).items()}
    return TypedDict(name, fields, total=False)  # type: ignore[operator]


def after_render(state: AgentState) -> str:
    return ENDING if state.get("exit_status") else "reflect" if reflecting(state) else "branch"


Route = tuple[Callable[[AgentState], str], tuple[str, ...]]  # where a node goes, and where it may go (drawn)


def asking(node: str, following: str) -> Route:
    """After a node that asks the model: the end, the same node again (a reply it could not read), or the next."""
    ends = (node, following, ENDING)
    return (lambda state: ENDING if state.get("exit_status") else node if state.get("retry") else following), ends


def onwards(following: str, ending: str = ENDING) -> Route:
    return (lambda state: ending if state.get("exit_status") else following), (following, ending)


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    context_schema: type[AgentContext] | None = AgentContext,
    wrap: Callable[[Node], Node] | None = None,
    variants: Variants | None = None,
    input_schema: type[Any] = AgentInput,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent's graph with `variants` (none: the core loop); `wrap` (LangGraph Studio: llm_ide.studio) wraps each
    node. `input_schema`: what the graph's input holds (Studio's marks the required fields)."""
    variants = variants or Variants()
    run_state = merged_schema("RunState", [RunState, *(v.state for v in variants if v.state)])
    node_state = AgentState if run_state is RunState else merged_schema("AgentState", [run_state, StepState])
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        run_state, context_schema=context_schema, input_schema=input_schema, output_schema=run_state
    )
    once, each = variants.hooks(once=True), variants.hooks(once=False)
    nodes = {**CORE, **{hook.name: hook.node for hook in [*once, *each]}}
    step = [*(hook.name for hook in each), "render_context"]
    order = [*(hook.name for hook in once), *step]
    routes = {name: onwards(following) for name, following in zip(order, order[1:], strict=False)}
    routes |= {"render_context": (after_render, ("reflect", "branch", ENDING)), "reflect": asking("reflect", "branch")}
    routes |= {"act": asking("act", "execute_tool"), ENDING: onwards(step[0], END)}
    for name, node in nodes.items():
        wrapped = (wrap or (lambda inner: inner))(guarded(node))
        route, ends = routes.get(name, (None, None))
        builder.add_node(name, routed(wrapped, route) if route else wrapped, input_schema=node_state, destinations=ends)
    for source, target in ((START, order[0]), ("branch", "act"), ("execute_tool", ENDING)):
        builder.add_edge(source, target)
    name = "-".join(["llm-ide", *(v.name for v in variants if v.nodes())])
    return builder.compile(checkpointer=checkpointer, name=name)
