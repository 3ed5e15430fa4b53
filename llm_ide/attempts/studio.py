"""LangGraph Studio (`langgraph dev`): the attempts graph, as langgraph.json exports it (`llm-ide-attempts`).

Its input is the agent graph's (`task`, `repo`, `model`, optionally `base_url`, `config`) plus `output`, the folder
of the attempts' own runs (default `runs/<thread id>`); the server supplies the checkpointer of the outer graph."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from llm_ide.attempts.graph import build_attempts_graph
from llm_ide.inputs import AttemptsStudioInput


def graph(config: RunnableConfig) -> CompiledStateGraph:
    return build_attempts_graph(context_schema=None, input_schema=AttemptsStudioInput)
