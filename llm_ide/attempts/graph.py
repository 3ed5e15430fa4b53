"""The attempts graph: dispatch → attempt (the agent graph, one Send per attempt) → verify (the patches run) → review →
dispatch … → choose."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from llm_ide.attempts.attempt import attempt
from llm_ide.attempts.choose import choose
from llm_ide.attempts.context import AttemptsContext
from llm_ide.attempts.dispatch import dispatch, send_attempts
from llm_ide.attempts.review import review
from llm_ide.attempts.state import AttemptsInput, AttemptsState, AttemptTask
from llm_ide.attempts.verify import verify


def build_attempts_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    context_schema: type[AttemptsContext] | None = AttemptsContext,
    input_schema: type[Any] = AttemptsInput,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] = lambda node: node,
) -> CompiledStateGraph:
    """`wrap` (LangGraph Studio): each node, given the run's context."""
    builder = StateGraph(AttemptsState, context_schema=context_schema, input_schema=input_schema)
    builder.add_node("dispatch", wrap(dispatch))
    builder.add_node("attempt", wrap(attempt), input_schema=AttemptTask)
    builder.add_node("verify", wrap(verify))
    builder.add_node("review", wrap(review))
    builder.add_node("choose", wrap(choose))
    builder.add_edge(START, "dispatch")
    builder.add_conditional_edges("dispatch", send_attempts, ["attempt", "choose", END])
    builder.add_edge("attempt", "verify")
    builder.add_edge("verify", "review")
    builder.add_edge("review", "dispatch")
    builder.add_edge("choose", END)
    return builder.compile(checkpointer=checkpointer, name="llm-ide-attempts")
