from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, write_script
from conftest import make_git_repo

from llm_ide.config import load_config
from llm_ide.graph import build_graph
from llm_ide.run.checkpoint import ChannelSqliteSaver, open_checkpointer
from llm_ide.run.single import run_task


def fixed_run(tmp_path: Path, keep_history: bool) -> tuple[dict, Path]:
    config = load_config("default", environment={"tools": []}, checkpoint={"keep_history": keep_history})
    result = run_task(
        "Cart.total ignores quantities.",
        model=write_script(tmp_path / "script.yaml", FIX_SCRIPT),
        settings=config,
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
    )
    return json.loads(result.trajectory_path.read_text()), tmp_path / "out" / "t1.checkpoint.sqlite"


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.mark.parametrize("keep_history", [True, False])
def test_channel_blobs_rebuild_every_kept_checkpoint(tmp_path: Path, keep_history: bool) -> None:
    traj, db = fixed_run(tmp_path, keep_history)
    thread = {"configurable": {"thread_id": "t1"}}
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        graph = build_graph(saver)
        final = graph.get_state(thread).values
        history = list(graph.get_state_history(thread))
    assert final["exit_status"] == "submitted"
    assert [(n.id, n.parent_id, n.bad_action, n.summary) for n in final["operations"]] == [
        (o["id"], o["parent_id"], o["bad_action"], o["summary"]) for o in traj["operations"]
    ]
    assert [c.activity.accessed for c in final["code_context"]] == [
        c["activity"]["accessed"] for c in traj["code_context"]
    ]
    steps = [h.values.get("n_operations", 0) for h in reversed(history)]
    assert steps == sorted(steps) and steps[-1] == 5
    if keep_history:
        assert len(history) > 25
        assert {len(h.values.get("operations", [])) for h in history} == {0, 1, 2, 3, 4, 5}
        assert {h.values.get("task") for h in history} == {None, "Cart.total ignores quantities."}
    else:
        assert len(history) == count(db, "checkpoints") <= 2
        assert count(db, "blobs") <= 2 * len(final)


def test_a_blob_is_stored_once_per_channel_version(tmp_path: Path) -> None:
    _, db = fixed_run(tmp_path, keep_history=True)
    with sqlite3.connect(db) as conn:
        per_channel = dict(conn.execute("SELECT channel, count(*) FROM blobs GROUP BY channel").fetchall())
    assert per_channel["operations"] == 5  # one version per committed operation, not one per super-step
    assert per_channel["code_context"] == 5
    assert per_channel.get("snapshot", 0) <= 1  # a 5-step run is one epoch: one memory snapshot (a short one inline)
