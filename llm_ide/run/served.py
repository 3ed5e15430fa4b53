"""A graph as LangGraph's server runs it on a thread: a thread another graph wrote is refused before anything runs
(a run of this graph on it would meet none of its nodes and end with nothing said), and the input is seen first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from llm_ide.errors import ThreadMismatchError


class ServedGraph(CompiledStateGraph):
    """`given` sees the input before the run (an input it refuses, or another it runs from); a thread whose state
    holds a field this graph lacks is another graph's: ThreadMismatchError names that graph, the thread as it was."""

    def __init__(self, *, _serde_allowlist: set[tuple[str, ...]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._serde_allowlist = _serde_allowlist  # its state's types (LANGGRAPH_STRICT_MSGPACK): kept by `copy`

    @classmethod
    def of(cls, built: CompiledStateGraph, **kwargs: Any) -> Any:
        return cls(**{key: value for key, value in vars(built).items() if key != "__orig_class__"}, **kwargs)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        await self.own_thread(config or {})
        async for chunk in super().astream(await self.given(input, config), config, **kwargs):
            yield chunk

    async def given(self, input: Any, config: RunnableConfig | None) -> Any:
        return input

    async def own_thread(self, config: RunnableConfig) -> None:
        configurable, saver = config.get("configurable", {}), self.checkpointer
        if not isinstance(saver, BaseCheckpointSaver) or "thread_id" not in configurable:
            return
        saved = await (self._apply_checkpointer_allowlist(saver) or saver).aget_tuple(config)  # its types allowed
        if saved is None or not set(saved.checkpoint["channel_values"]) - set(self.channels):
            return
        owner = saved.metadata.get("graph_id")
        this = configurable.get("graph_id") or self.name
        said = f"the {owner!r} graph" if owner and owner != this else "another graph"
        raise ThreadMismatchError(
            f"the thread is a run of {said}, not of {this!r}; run it with that graph (or start a new thread)"
        )
