"""The SQLite saver holds a checkpoint that only nodes calling nothing outside follow: the next checkpoint passes it
over (nothing of it written), a commit or a read writes it, and a kill loses only what a rerun does again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from llm_ide.run.checkpoint import ChannelSqliteSaver, open_checkpointer

THREAD = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def rows(conn: sqlite3.Connection) -> tuple[int, int]:
    """The checkpoint rows and writes the saver's own connection sees (written, committed or not)."""
    return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("checkpoints", "writes"))


def committed(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        return rows(conn)


def put(saver: ChannelSqliteSaver, at: dict, following: str, n: int, code: str) -> dict:
    """A checkpoint after `at` that `following` runs from: `n` in its row, `code` (long) stored apart, the step's
    one reply already holding its action (act calls nothing)."""
    values = {f"branch:to:{following}": None, "n": n, "code": code, "proposed": {"action": "ls"}}
    checkpoint = {**empty_checkpoint(), "channel_values": values}
    checkpoint["channel_versions"] = {f"branch:to:{following}": n, "n": n, "code": n, "proposed": 1}
    return saver.put(at, checkpoint, {"step": n}, {"n": n, "code": n})


def write(saver: ChannelSqliteSaver, at: dict, node: str, n: int) -> None:
    saver.put_writes(at, [("n", n + 1), ("code", f"code {n + 1} " * 40)], f"task-{n}", f"~__pregel_pull, {node}")


def step(saver: ChannelSqliteSaver, at: dict, n: int) -> dict:
    """One step's checkpoints and writes, as LangGraph saves them (the checkpoint each node runs from, its writes):
    render_context, reflect (calls the model), branch, act (reads the reply), execute_tool (runs the action),
    update_activity."""
    nodes = ["render_context", "reflect", "branch", "act", "execute_tool", "update_activity", "render_context"]
    for number, (node, following) in enumerate(zip(nodes, nodes[1:], strict=False), n):
        write(saver, at, node, number)
        at = put(saver, at, following, number + 1, f"code {number + 1} " * 40)
    return at


def test_a_held_checkpoint_is_passed_over_by_the_next_and_its_writes_go_with_it(tmp_path: Path) -> None:
    db = tmp_path / "t.checkpoint.sqlite"
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        first = put(saver, THREAD, "reflect", 1, "code 1 " * 40)
        assert committed(db) == (1, 0)  # the model is called next: written and committed
        held = put(saver, first, "branch", 2, "code 2 " * 40)
        write(saver, held, "branch", 2)
        assert rows(saver.conn) == (1, 0)  # held: neither its row nor its task's writes written, even uncommitted
        assert saver.get_tuple(held) is not None and rows(saver.conn) == (2, 2)  # a read writes what is held first
        passed = put(saver, held, "act", 3, "code 3 " * 40)
        write(saver, passed, "act", 3)
        latest = put(saver, passed, "execute_tool", 4, "code 4 " * 40)
        assert committed(db) == (3, 2)  # `passed` (only act, its action in hand, followed it) was never written
        write(saver, passed, "act", 3)  # a write that comes late for a checkpoint passed over: dropped
        found = saver.get_tuple(latest)
        assert found is not None and found.parent_config == held  # its parent: the last checkpoint written
        assert (found.checkpoint["channel_values"]["n"], found.metadata["step"]) == (4, 4)
        assert found.checkpoint["channel_values"]["code"] == "code 4 " * 40
        assert saver.get_tuple(passed) is None and committed(db) == (3, 2)


@pytest.mark.parametrize(("keep_every", "written"), [(False, (3, 4)), (True, (6, 12))])
def test_a_step_writes_the_checkpoints_before_what_calls_out_and_the_commit_its_last(
    tmp_path: Path, keep_every: bool, written: tuple[int, int]
) -> None:
    """A step writes the checkpoints that reflect and execute_tool (which call out) run from, their tasks' writes,
    and at the commit that ends it its last checkpoint: 3 rows and 2 tasks' writes, not 6 and 6 (all of them when
    every checkpoint is kept)."""
    db = tmp_path / "t.checkpoint.sqlite"
    with open_checkpointer(f"sqlite:{db}", db, keep_every=keep_every) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        at = put(saver, THREAD, "render_context", 0, "code 0 " * 40)
        saver.commit()
        before = rows(saver.conn)
        at = step(saver, at, 0)
        saver.commit()
        after = rows(saver.conn)
        assert (after[0] - before[0], after[1] - before[1]) == written
        assert committed(db) == after
        later = step(saver, at, 6)  # the next step, its end not committed: a kill here resumes from its act
        found = saver.get_tuple(THREAD)
        assert found is not None and found.checkpoint["id"] == later["configurable"]["checkpoint_id"]
        assert found.checkpoint["channel_values"]["code"] == "code 12 " * 40
        history = [t.checkpoint["channel_values"]["n"] for t in saver.list(THREAD)]
        assert history == (list(range(12, -1, -1)) if keep_every else [12, 10, 7, 6, 4, 1, 0])
