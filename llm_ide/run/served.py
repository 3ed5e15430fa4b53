"""A graph as LangGraph's server runs it on a thread: a thread another graph wrote is refused before anything runs
(a run of this graph on it would meet none of its nodes and end with nothing said), and the input is seen first. A run
given a task on a thread that holds one is checked before anything of it is written: another task, or another
repository, is refused (ThreadMismatchError), the thread left as it was; its own task on a thread cut mid-step (what
Studio's form sends again) resumes the step where it stopped, as `null` does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from llm_ide.errors import ThreadMismatchError, UsageError
from llm_ide.graph import ENDING
from llm_ide.run.guard import check_same_repository
from llm_ide.state.graph_state import one_task

GIVEN_AGAIN = ("model", "base_url", "config")  # what a run going on may be given anew


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
        if saver := self.thread_saver(config or {}):
            self.refuse_another(await saver.aget_tuple(config or {}), config or {})
        async for chunk in super().astream(await self.given(input, config), config, **kwargs):
            yield chunk

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """As `astream` (`invoke` runs it): the same checks, with the saver's sync methods."""
        if saver := self.thread_saver(config or {}):
            self.refuse_another(saver.get_tuple(config or {}), config or {})
        yield from super().stream(self.given_now(input, config), config, **kwargs)

    def seen(self, input: Any) -> None:
        """The input's own checks, before the run and whatever its thread holds (none here)."""

    async def given(self, input: Any, config: RunnableConfig | None) -> Any:
        thread = await self.aget_state(config or {}) if self.on_its_thread(input, config) else None
        given, going = (input, None) if thread is None else self.resumed(thread, input)
        if going is not None:
            await self.aupdate_state(config or {}, going, as_node=ENDING)
        return self.settled(thread, input, given)

    def given_now(self, input: Any, config: RunnableConfig | None) -> Any:
        thread = self.get_state(config or {}) if self.on_its_thread(input, config) else None
        given, going = (input, None) if thread is None else self.resumed(thread, input)
        if going is not None:
            self.update_state(config or {}, going, as_node=ENDING)
        return self.settled(thread, input, given)

    def settled(self, thread: StateSnapshot | None, input: Any, given: Any) -> Any:
        """The input seen; a thread going on where it stopped (`given` None) with another model, endpoint or config
        than it started with goes on with those given now (`anew`); an empty one (a form's blank field) is unset."""
        self.seen(given)
        if thread is not None and given is None:
            kept = thread.values
            self.anew({key: input[key] for key in GIVEN_AGAIN if input.get(key) and input[key] != kept.get(key)})
        return given

    def anew(self, fields: dict[str, Any]) -> None:
        """The fields a run on a thread going on where it stopped is given anew (its own graph's run uses them)."""

    @staticmethod
    def on_its_thread(input: Any, config: RunnableConfig | None) -> bool:
        return isinstance(input, dict) and "task" in input and "thread_id" in (config or {}).get("configurable", {})

    def resumed(self, thread: StateSnapshot, input: dict[str, Any]) -> tuple[Any, Any]:
        """What the run on `thread` starts from given `input` (None: where the thread stopped), and the update (as
        the agent's last node) it needs first (None: none; the agent graph's, for a thread past a limit)."""
        kept = thread.values.get("task") or ""
        one_task(kept, input["task"])
        if kept and isinstance(repo := input.get("repo"), str):
            thread_id = thread.config.get("configurable", {}).get("thread_id", "")
            try:
                check_same_repository(thread_id, thread.values, Path(repo), "the graph input's `repo`", "a new thread")
            except UsageError as error:
                raise ThreadMismatchError(str(error)) from None
        return (None if kept and thread.next and not thread.values.get("exit_status") else input), None

    def thread_saver(self, config: RunnableConfig) -> BaseCheckpointSaver | None:
        """The saver of the run's thread (its state's types allowed), if it runs on one."""
        saver = self.checkpointer
        if not isinstance(saver, BaseCheckpointSaver) or "thread_id" not in config.get("configurable", {}):
            return None
        return self._apply_checkpointer_allowlist(saver) or saver

    def refuse_another(self, saved: CheckpointTuple | None, config: RunnableConfig) -> None:
        if saved is None or not set(saved.checkpoint["channel_values"]) - set(self.channels):
            return
        owner = saved.metadata.get("graph_id")
        this = config.get("configurable", {}).get("graph_id") or self.name
        said = f"the {owner!r} graph" if owner and owner != this else "another graph"
        raise ThreadMismatchError(
            f"the thread is a run of {said}, not of {this!r}; run it with that graph (or start a new thread)"
        )
