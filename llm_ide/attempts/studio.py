"""LangGraph Studio (`langgraph dev`): the attempts graph, as langgraph.json exports it (`llm-ide-attempts`).

Its input is the agent graph's (`task`, `repo`, `model`, optionally `base_url`, `config`) plus `output`, the folder
of the attempts' own runs (default `runs/<thread id>`; their worktrees removed at the run's end); the server supplies
the checkpointer of the outer graph. The run's context is built from the input by its first node, for this server
call alone; an input it refuses (the checks of a run's preflight) ends the run at once, the line its `error`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from llm_ide.attempts.choose import choose
from llm_ide.attempts.context import AttemptsContext, remove_worktrees, studio_context
from llm_ide.attempts.graph import build_attempts_graph
from llm_ide.attempts.limits import task_spent
from llm_ide.budget import CostBudget
from llm_ide.errors import UsageError, ended
from llm_ide.inputs import AttemptsStudioInput


@asynccontextmanager
async def graph(config: RunnableConfig) -> AsyncIterator[CompiledStateGraph]:
    built: list[AttemptsContext] = []
    refused: list[UsageError] = []

    def context(state: dict[str, Any]) -> AttemptsContext:
        if not built:
            thread = str(get_config().get("configurable", {}).get("thread_id", "studio"))
            built.append(ctx := studio_context(state, thread))
            if "attempts" in state:  # what the task spent before this call counts (as at the command line)
                request = ctx.request
                CostBudget.add(ctx.budget, task_spent(request.output_dir, request.run_id, state))
        return built[0]

    def wrap(node: Callable[..., Any]) -> Callable[..., Any]:
        def studio_node(state: dict[str, Any], runtime: Runtime[Any]) -> Any:
            if refused:  # the run ended at its first node: nothing else runs
                return {}
            try:
                ctx = context(dict(state))
            except UsageError as error:  # a bad input ends the run at once, its line the run's error (as the agent's)
                refused.append(error)
                return {"pending": [], **ended(error)}
            update = node(state, runtime.override(context=ctx))
            if node is choose:  # the run is over: the attempts' worktrees go, as at the command line's end
                remove_worktrees(ctx, [record["index"] for record in state.get("attempts", [])])
            return update

        studio_node.__name__ = node.__name__
        return studio_node

    yield build_attempts_graph(context_schema=None, input_schema=AttemptsStudioInput, wrap=wrap)
