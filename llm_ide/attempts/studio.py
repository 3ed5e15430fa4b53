"""LangGraph Studio (`langgraph dev`): the attempts graph, as langgraph.json exports it (`llm-ide-attempts`).

Its input is the agent graph's (`task`, `repo`, `model`, optionally `base_url`, `config`) plus `output`, the folder
of the attempts' own runs (default `runs/<thread id>`); the server supplies the checkpointer of the outer graph. The
run's context is built from the input by its first node, for this server call alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from llm_ide.attempts.context import AttemptsContext, studio_context
from llm_ide.attempts.graph import build_attempts_graph
from llm_ide.inputs import AttemptsStudioInput


@asynccontextmanager
async def graph(config: RunnableConfig) -> AsyncIterator[CompiledStateGraph]:
    built: list[AttemptsContext] = []

    def context(state: dict[str, Any]) -> AttemptsContext:
        if not built:
            thread = str(get_config().get("configurable", {}).get("thread_id", "studio"))
            built.append(studio_context(state, thread))
        return built[0]

    def wrap(node: Callable[..., Any]) -> Callable[..., Any]:
        def studio_node(state: dict[str, Any], runtime: Runtime[Any]) -> Any:
            return node(state, runtime.override(context=context(dict(state))))

        studio_node.__name__ = node.__name__
        return studio_node

    yield build_attempts_graph(context_schema=None, input_schema=AttemptsStudioInput, wrap=wrap)
