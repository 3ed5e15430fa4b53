"""A run's checkpoint saves made by the thread that runs the graph, not handed to a worker thread and waited for.

LangGraph hands every save of a super-step (its checkpoint, each task's writes) to a thread pool and, with durability
"sync", waits for the checkpoint before the next super-step: two thread hand-offs a super-step, twelve a step, for saves
that ChannelSqliteSaver mostly holds in memory (the graph alone: 3.8 ms of CPU a step threaded, 2.5 inline,
`graph_ms` of scripts/bench_step_cpu.py). Only the saves of ChannelSqliteSaver run inline; any other saver in the
process (a user's own graph's) and every other task LangGraph submits (parallel nodes, stream waiters) keep its pool.
A save's error reaches LangGraph as a threaded one would, in its future; an interrupt (Ctrl-C) is raised at once.
LangGraph offers no hook for its executor: `install` replaces the class its sync loop builds, and leaves the saves
threaded where that class is not there (another LangGraph version)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from langgraph.pregel import _loop

from llm_ide.run.channel_saver import ChannelSqliteSaver

THREADED: Any = getattr(_loop, "BackgroundExecutor", object)  # object: not there, nothing replaced
LOOP_SAVE = "_checkpointer_put_after_previous"  # the sync loop's save of a checkpoint, after the one before it


def ours(fn: Any) -> bool:
    """A save to a ChannelSqliteSaver: its `put_writes`, or a loop's checkpoint save when that loop saves to one."""
    owner = getattr(fn, "__self__", None)
    if getattr(fn, "__name__", "") == LOOP_SAVE:
        owner = getattr(owner, "checkpointer", None)
    return isinstance(owner, ChannelSqliteSaver)


class InlineSaves(THREADED):
    def submit(
        self,
        fn: Any,
        *args: Any,
        __name__: str | None = None,
        __cancel_on_exit__: bool = False,
        __reraise_on_exit__: bool = True,
        __next_tick__: bool = False,
        **kwargs: Any,
    ) -> Future[Any]:
        if __next_tick__ or not ours(fn):
            return super().submit(
                fn,
                *args,
                __name__=__name__,
                __cancel_on_exit__=__cancel_on_exit__,
                __reraise_on_exit__=__reraise_on_exit__,
                __next_tick__=__next_tick__,
                **kwargs,
            )
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        self.tasks[future] = (__cancel_on_exit__, __reraise_on_exit__)
        future.add_done_callback(self.done)
        return future


def install() -> None:
    """Make ChannelSqliteSaver's saves inline in every sync LangGraph loop of the process from now on (idempotent)."""
    if THREADED is not object and _loop.BackgroundExecutor is THREADED:
        setattr(_loop, "BackgroundExecutor", InlineSaves)  # noqa: B010 (a module's class: mypy refuses the assignment)
