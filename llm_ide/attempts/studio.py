"""LangGraph Studio (`langgraph dev`): the attempts graph, as langgraph.json exports it (`llm-ide-attempts`).

Its input is the agent graph's (`task`, `repo`, `model`, optionally `base_url`, `config`) plus `output`, the folder
of the attempts' own runs (default `runs/<thread id>`; their worktrees removed at the run's end); the server supplies
the checkpointer of the outer graph. The run's context is built from the input by its first node, for this server
call alone; an input it refuses (the checks of a run's preflight) ends the run at once, the line its `error`. When
the server is done with the call (the run ended, cancelled or interrupted), the attempts under way stop as at Ctrl-C
(each at its next step, a command ended; its environment removed, its thread saved to resume) and are waited for."""

from __future__ import annotations

import asyncio
import threading
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
from llm_ide.errors import LlmIdeError, UsageError, ended
from llm_ide.inputs import AttemptsStudioInput, unknown_field
from llm_ide.run.guard import went_on_with
from llm_ide.run.served import ServedGraph


class ServedAttempts:
    """One server call's run: its context, built by its first node, and the nodes under way (in the server's threads,
    which go on after the run is cancelled)."""

    def __init__(self) -> None:
        self.ctx: AttemptsContext | None = None
        self.refused: UsageError | None = None
        self.unknown: UsageError | None = None  # an input field of no such name: the first node ends the run with it
        self.anew: dict[str, Any] = {}  # a thread going on where it stopped: the fields it is given anew
        self.running = 0
        self.closed = False
        self.changed = threading.Condition()

    def context(self, state: dict[str, Any]) -> AttemptsContext:
        if self.unknown is not None:
            raise self.unknown
        if self.ctx is None:
            thread = str(get_config().get("configurable", {}).get("thread_id", "studio"))
            said = [went_on_with(thread, key, state.get(key), value) for key, value in self.anew.items()]
            self.ctx = ctx = studio_context({**state, **self.anew}, thread)
            for line in said:
                ctx.emit(line)
            if self.closed:  # stopped while the context was built: its attempts stop at once too
                ctx.halt()
            if "attempts" in state:  # what the task spent before this call counts (as at the command line)
                CostBudget.add(ctx.budget, task_spent(ctx.request.output_dir, ctx.request.run_id, state))
        return self.ctx

    def node(self, node: Callable[..., Any], state: dict[str, Any], runtime: Runtime[Any]) -> Any:
        with self.changed:
            if self.closed:
                raise LlmIdeError("the run was stopped")
            self.running += 1
        try:
            if self.refused is not None:  # the run ended at its first node: nothing else runs
                return {}
            try:
                ctx = self.context(dict(state))
            except UsageError as error:  # a bad input ends the run at once, its line the run's error (as the agent's)
                self.refused = error
                return {"pending": [], **ended(error)}
            update = node(state, runtime.override(context=ctx))
            if node is choose:  # the run is over: the attempts' worktrees go, as at the command line's end
                remove_worktrees(ctx, [record["index"] for record in state.get("attempts", [])])
            return update
        finally:
            with self.changed:
                self.running -= 1
                self.changed.notify_all()

    def close(self) -> None:
        """The nodes under way stopped (an attempt at its next step, its command ended) and waited for; the calls
        log completed."""
        with self.changed:
            self.closed = True
            if self.ctx is not None:
                self.ctx.halt()
            self.changed.wait_for(lambda: self.running == 0)
        if self.ctx is not None:
            self.ctx.close()


class AttemptsGraph(ServedGraph):
    """The attempts graph as served: its thread checked and a cut one resumed as the agent graph's (run/served.py);
    an input it applies with a field of no such name (`confg`: LangGraph would drop it unsaid) ends the run at its
    first node, as the agent graph's does."""

    def __init__(self, *, served_run: ServedAttempts | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.served_run = served_run

    def seen(self, input: Any) -> None:
        if isinstance(input, dict) and self.served_run is not None:
            self.served_run.unknown = unknown_field(input, AttemptsStudioInput)

    def anew(self, fields: dict[str, Any]) -> None:
        if self.served_run is not None:
            self.served_run.anew = fields


@asynccontextmanager
async def graph(config: RunnableConfig) -> AsyncIterator[CompiledStateGraph]:
    run = ServedAttempts()

    def wrap(node: Callable[..., Any]) -> Callable[..., Any]:
        def studio_node(state: dict[str, Any], runtime: Runtime[Any]) -> Any:
            return run.node(node, state, runtime)

        studio_node.__name__ = node.__name__
        return studio_node

    try:
        built = build_attempts_graph(context_schema=None, input_schema=AttemptsStudioInput, wrap=wrap)
        yield AttemptsGraph.of(built, served_run=run)
    finally:
        await asyncio.to_thread(run.close)  # off the server's event loop
