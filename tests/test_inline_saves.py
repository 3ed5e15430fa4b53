"""LangGraph's saves to llm-ide's SQLite saver are made by the thread that runs the graph (run/inline_saves.py); any
other saver keeps LangGraph's worker threads, and a save that fails stops the graph with its own error."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel import _loop
from langgraph.types import Command
from typing_extensions import TypedDict

from llm_ide.run.checkpoint import open_checkpointer
from llm_ide.run.inline_saves import InlineSaves, install


class Count(TypedDict, total=False):
    n: int


NODES = ("one", "two", "three")


def graph_of(saver: BaseCheckpointSaver, steps: int, on_node: Any = None) -> Any:
    def node(name: str, following: str) -> Any:
        def run(state: Count) -> Command[str]:
            if on_node is not None:
                on_node(name, state.get("n", 0))
            done = state.get("n", 0) + (name == NODES[-1])
            return Command(update={"n": done}, goto=END if done >= steps else following)

        return run

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Count)
    for name, following in zip(NODES, [*NODES[1:], NODES[0]], strict=True):
        builder.add_node(name, node(name, following), destinations=(following, END))
    builder.add_edge(START, NODES[0])
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize(("kind", "threaded"), [("sqlite", False), ("memory", True)])
def test_only_our_saver_is_saved_to_inline(tmp_path: Path, kind: str, threaded: bool) -> None:
    """Workers seen while the graph runs (the pool's threads end with the stream): none for ChannelSqliteSaver, the
    pool's for another saver even once the inline class is what LangGraph builds (as after any run of ours)."""
    install()
    before = set(threading.enumerate())
    workers: set[threading.Thread] = set()

    def on_node(name: str, n: int) -> None:
        workers.update(t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor-") and t not in before)

    with open_checkpointer("memory" if kind == "memory" else None, tmp_path / "run.sqlite") as saver:
        graph, config = graph_of(saver, 4, on_node), {"configurable": {"thread_id": "t"}}
        states = [state["n"] for state in graph.stream({}, config, stream_mode="values", durability="sync")]
        saved = saver.get_tuple(config)
    assert (states[-1], saved is not None and saved.checkpoint["channel_values"]["n"]) == (4, 4)
    assert (bool(workers), type(saver).__name__) == (threaded, "InMemorySaver" if threaded else "ChannelSqliteSaver")
    assert _loop.BackgroundExecutor is InlineSaves


def test_a_failed_save_stops_the_graph_with_its_error(tmp_path: Path) -> None:
    """The database closed under the run at step 2's second node: the next save raises, the stream ends with it (not
    held in a future until the end, nor lost), and what was saved before stays readable."""
    path = tmp_path / "run.sqlite"
    with open_checkpointer(None, path) as saver:

        def on_node(name: str, n: int) -> None:
            if (name, n) == ("two", 2):
                saver.conn.close()

        graph, config = graph_of(saver, 5, on_node), {"configurable": {"thread_id": "t"}}
        seen: list[int] = []
        with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
            for state in graph.stream({}, config, stream_mode="values", durability="sync"):
                seen.append(state.get("n", 0))
    assert seen[-1] == 2
    with open_checkpointer(None, path) as again:
        saved = again.get_tuple(config)
        assert saved is not None and saved.checkpoint["channel_values"]["n"] == 2
