from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import replace
from pathlib import Path

import ormsgpack
import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, write_script
from conftest import make_git_repo
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from llm_ide.config import load_config
from llm_ide.errors import CheckpointError
from llm_ide.graph import build_graph
from llm_ide.run.checkpoint import MEMORY_TYPES, ChannelSqliteSaver, open_checkpointer, prune, serializer
from llm_ide.run.single import run_task
from llm_ide.run.versions import short_version
from llm_ide.state.context import Activity, Chunk
from llm_ide.state.operations import OperationNode


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
        assert len(history) > 4 * 5  # a checkpoint after each of the four nodes of each step
        assert {len(h.values.get("operations", [])) for h in history} == {0, 1, 2, 3, 4, 5}
        assert {h.values.get("task") for h in history} == {"", "Cart.total ignores quantities."}  # ("": before input)
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


@pytest.mark.parametrize("count", [2, 15, 16, 300, 65_536])  # msgpack: fixarray, array 16, array 32 from 65,536
def test_the_operations_encode_node_by_node_exactly_as_langgraph_encodes_the_list(count: int) -> None:
    """Each node is encoded once and reused while it is in the list: the bytes are LangGraph's own encoding."""
    nodes = [
        OperationNode(id=i, parent_id=i - 1 or None, thought="t" * (i % 50), observation="o" * (i % 300))
        for i in range(count)
    ]
    ours, plain = serializer(), JsonPlusSerializer(allowed_msgpack_modules=MEMORY_TYPES)
    first = ours.dumps_typed(nodes)
    grown = [*nodes[:-1], replace(nodes[-1], summary="s"), OperationNode(id=count, parent_id=count - 1)]
    for value, (kind, data) in ((nodes, first), (grown, ours.dumps_typed(grown))):
        raw = zlib.decompress(data) if kind.endswith("+zlib") else data
        assert (kind.removesuffix("+zlib"), raw) == plain.dumps_typed(value)
        assert ours.loads_typed((kind, data)) == value


def committed(db: Path) -> tuple[int, int]:
    """The checkpoint rows and writes another connection sees: what is committed."""
    with sqlite3.connect(db) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("checkpoints", "writes"))


def checkpoint_of(values: dict) -> dict:
    return {**empty_checkpoint(), "channel_values": values, "channel_versions": {key: 1 for key in values}}


@pytest.mark.parametrize(("proposed", "deferred"), [({"action": "ls"}, True), (None, False)])
def test_act_waits_for_the_next_commit_only_when_the_steps_reply_already_holds_its_action(
    tmp_path: Path, proposed: dict | None, deferred: bool
) -> None:
    db = tmp_path / "t.checkpoint.sqlite"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        before_act = checkpoint_of({"branch:to:act": None, "proposed": proposed, "task": "fix it"})
        at = saver.put(config, before_act, {}, before_act["channel_versions"])
        saver.put_writes(at, [("pending", {"action": "ls"}), ("proposed", None)], "act-task", "~__pregel_pull, act")
        assert committed(db) == ((0, 0) if deferred else (1, 2))  # act calls the model itself: its reply is kept
        before_tool = checkpoint_of({"branch:to:execute_tool": None, "task": "fix it"})
        saver.put(at, before_tool, {}, before_tool["channel_versions"])
        # the action runs next: everything before it is committed; a checkpoint held (act would only read the reply
        # again) is passed over, its writes with it (the next checkpoint's values hold them)
        assert committed(db) == ((1, 0) if deferred else (2, 2))
        resumed, latest = saver.get_tuple(at), saver.get_tuple(config)
        assert latest is not None and latest.parent_config == (None if deferred else at)
        assert (resumed is None) if deferred else resumed.checkpoint["channel_values"]["proposed"] == proposed


class OldSaver(ChannelSqliteSaver):
    """The saver as it was before the parts: LangGraph's long versions, the operations' whole list in each blob."""

    get_next_version = SqliteSaver.get_next_version  # type: ignore[assignment]

    def _blob(self, cur: sqlite3.Cursor, thread_id: str, ns: str, value: object) -> tuple[str, bytes]:
        return self.serde.dumps_typed(value)


def nodes_of(count: int, judged: int = -1) -> list[OperationNode]:
    return [
        OperationNode(id=i, parent_id=i - 1 if i else None, thought="why " * 400, summary="ok" if i == judged else "")
        for i in range(count)
    ]


def put_operations(saver: ChannelSqliteSaver, config: dict, previous: dict, nodes: list[OperationNode]) -> dict:
    checkpoint = {**empty_checkpoint(), "channel_values": {"operations": nodes, "task": "fix it"}}
    version = saver.get_next_version(previous.get("operations"), None)
    checkpoint["channel_versions"] = {"operations": version, "task": previous.get("task") or version}
    new = {k: v for k, v in checkpoint["channel_versions"].items() if previous.get(k) != v}
    return {"config": saver.put(config, checkpoint, {}, new), "versions": checkpoint["channel_versions"]}


@pytest.mark.parametrize("old_first", [False, True])
def test_each_operation_node_is_stored_once_and_an_older_database_still_reads(tmp_path: Path, old_first: bool) -> None:
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    states = [nodes_of(3), nodes_of(4), nodes_of(4, judged=3), nodes_of(5, judged=3)]
    saved, versions = [], {}
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        writer = OldSaver(saver.conn, serde=saver.serde) if old_first else saver
        for index, nodes in enumerate(states):
            done = put_operations(writer if index < 2 else saver, config, versions, nodes)
            saved.append(done["config"])
            versions = done["versions"]
        for checkpoint, nodes in zip(saved, states, strict=True):
            found = saver.get_tuple(checkpoint)
            assert found is not None and found.checkpoint["channel_values"]["operations"] == nodes
        new_nodes = {(n.id, n.summary) for nodes in states[2 if old_first else 0 :] for n in nodes}
        assert count(db, "parts") == len(new_nodes)  # node 3 twice: before and after its verdict
        prune(saver, "t", keep=1)
        assert count(db, "parts") == 5  # the unjudged node 3 is listed by no kept checkpoint any more
        found = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert found is not None and found.checkpoint["channel_values"]["operations"] == states[-1]
        back = put_operations(saver, config, versions, states[1])  # the pruned node again: stored again
        assert count(db, "parts") == 6
        found = saver.get_tuple(back["config"])
        assert found is not None and found.checkpoint["channel_values"]["operations"] == states[1]
    stored = versions["operations"]
    assert len(stored) == 19 and stored.split(".")[0] == f"{4:010}"


def test_a_checkpoint_inserts_only_the_nodes_not_stored_yet(tmp_path: Path) -> None:
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    inserted: list[str] = []
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        saver.conn.set_trace_callback(lambda sql: inserted.append(sql) if "INTO parts" in sql else None)
        versions: dict = {}
        for nodes in (nodes_of(3), nodes_of(4), nodes_of(4, judged=3), nodes_of(6, judged=3)):
            versions = put_operations(saver, config, versions, nodes)["versions"]
        assert len(inserted) == 3 + 1 + 1 + 2  # each node once, node 3 again once judged
        saver.delete_thread("t")
        put_operations(saver, config, {}, nodes_of(2))
        assert len(inserted) == 7 + 2 and count(db, "parts") == 2  # a thread deleted: its nodes stored afresh


@pytest.mark.parametrize("current", [None, "0000000001.0a0b0c0d", f"{625:032}.0.5", f"{9:032}.0.99"])
def test_a_short_version_is_above_the_one_it_follows_long_or_short(current: str | int | None) -> None:
    following = short_version(current)
    assert following > str(current or "") and short_version(following) > following
    assert int(following.split(".")[0]) == int(str(current or 0).split(".")[0]) + 1


def test_a_large_value_written_by_a_node_is_stored_once_for_its_write_and_its_blob(tmp_path: Path) -> None:
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    context = [f"chunk {i} " * 40 for i in range(40)]  # over 1 KiB compressed
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        first = checkpoint_of({"branch:to:execute_tool": None, "task": "fix it " * 40})
        at = saver.put(config, first, {}, first["channel_versions"])
        saver.put_writes(at, [("code_context", context), ("n_operations", 1)], "task-1", "~__pregel_pull, execute_tool")
        second = {**checkpoint_of({"code_context": context, "task": "fix it " * 40}), "id": "2"}
        second["channel_versions"] = {"code_context": 2, "task": 1}
        saver.put(at, second, {}, {"code_context": 2})
        saver.commit()
        with sqlite3.connect(db) as conn:
            kinds = conn.execute("SELECT type FROM writes WHERE channel = 'code_context'").fetchall()
            blobs = dict(conn.execute("SELECT channel, type FROM blobs").fetchall())
        assert (count(db, "parts"), kinds, blobs) == (1, [("ref",)], {"code_context": "ref", "task": "msgpack"})
        resumed = saver.get_tuple(at)
        assert resumed is not None and resumed.pending_writes == [("task-1", "code_context", context)] + [
            ("task-1", "n_operations", 1)
        ]
        assert resumed.checkpoint["channel_values"]["task"] == "fix it " * 40
        latest = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert latest is not None and latest.checkpoint["channel_values"]["code_context"] == context
        prune(saver, "t", keep=1)
        assert count(db, "parts") == 1  # the kept checkpoint's blob refers to it


def test_the_operations_a_node_writes_are_stored_by_their_nodes_digests_and_kept_while_written(tmp_path: Path) -> None:
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    listed, written = nodes_of(3), nodes_of(5, judged=2)  # the write adds two nodes and judges node 2 (a new part)
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        first = put_operations(saver, config, {}, listed)
        task_path = "~__pregel_pull, update_activity"
        saver.put_writes(first["config"], [("operations", written), ("n_operations", 5)], "task-1", task_path)
        saver.commit()
        with sqlite3.connect(db) as conn:
            kind, digests = conn.execute("SELECT type, value FROM writes WHERE channel = 'operations'").fetchone()
        assert (kind, len(digests), count(db, "parts")) == ("parts", 8 * 5, 6)  # nodes 0-4, node 2 before and after
        put_operations(saver, config, first["versions"], listed)  # a newer checkpoint, listing none of the new parts
        prune(saver, "t", keep=2)  # both checkpoints kept: the parts only the write lists too
        resumed = saver.get_tuple(first["config"])
        assert resumed is not None and resumed.pending_writes == [("task-1", "operations", written)] + [
            ("task-1", "n_operations", 5)
        ]
        prune(saver, "t", keep=1)  # the write's checkpoint goes, and the parts only it listed
        assert count(db, "parts") == 3


def test_a_value_an_older_row_held_inline_is_stored_by_the_first_checkpoint_that_leaves_it_out(tmp_path: Path) -> None:
    """A row written before holds the task inline (this saver up to 1ffb6db kept strings under 1,024 characters in the
    row, as LangGraph's own saver keeps every value: the row written here); the run resumed goes on with rows that
    leave the task out: the first of them stores it, once, and every checkpoint after reads it (it was lost)."""
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    task = "Cart.total ignores quantities. " * 8  # 248 characters
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        first = checkpoint_of({"task": task, "n": 1})
        saved = [SqliteSaver.put(saver, config, first, {}, first["channel_versions"])]
        for n in (2, 3, 4):
            later = {**checkpoint_of({"task": task, "n": n}), "channel_versions": {"task": 1, "n": n}}
            saved.append(saver.put(saved[-1], later, {}, {"n": n}))
        saver.commit()
        found = [saver.get_tuple(at) for at in saved]
        assert [at.checkpoint["channel_values"] if at else None for at in found] == [
            {"task": task, "n": n} for n in (1, 2, 3, 4)
        ]
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT channel, version FROM blobs").fetchall() == [("task", "1")]
        prune(saver, "t", keep=1)
        latest = saver.get_tuple(config)
        assert latest is not None and latest.checkpoint["channel_values"] == {"task": task, "n": 4}


def test_a_pruning_leaves_the_database_file_at_what_it_keeps_and_the_wal_copied(tmp_path: Path) -> None:
    """The WAL is copied into the file at each pruning, only the pages kept: the file is what the thread holds now,
    not what it held at the last automatic checkpoint (up to ten steps of checkpoints more, until the next one)."""
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    versions: dict = {}
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        for count in range(2, 30):
            versions = put_operations(saver, config, versions, nodes_of(count))["versions"]
        saver.commit()
        prune(saver, "t", keep=1)
        pages = saver.conn.execute("PRAGMA page_count").fetchone()[0]
        assert db.stat().st_size == pages * 1024
        assert saver.conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        _, frames, copied = saver.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert frames == copied > 0
        found = saver.get_tuple(config)
        assert found is not None and found.checkpoint["channel_values"]["operations"] == nodes_of(29)


@pytest.mark.parametrize(("observation", "kind"), [("", "msgpack"), ("1 passed\n" * 40, "msgpack+zlib")])
def test_an_operation_node_is_compressed_from_a_quarter_of_a_kib(tmp_path: Path, observation: str, kind: str) -> None:
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    nodes = [OperationNode(id=i, parent_id=i - 1 if i else None, observation=observation) for i in range(3)]
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        checkpoint = {**empty_checkpoint(), "channel_values": {"operations": nodes}}
        checkpoint["channel_versions"] = {"operations": short_version(None)}
        saver.put(config, checkpoint, {}, checkpoint["channel_versions"])
        saver.commit()
        stored = {kind for (kind,) in saver.conn.execute("SELECT type FROM parts")}
        found = saver.get_tuple(config)
    assert stored == {kind}
    assert found is not None and found.checkpoint["channel_values"]["operations"] == nodes


@pytest.mark.parametrize("steps", [1, 40, 400])
def test_the_code_context_has_its_own_encoding_and_reads_back_equal(steps: int) -> None:
    chunks = [
        Chunk("pkg/a.py", [12, 13, 14], "Parser", "parse.inner", False, Activity([1, 0] * (steps // 2), [], 4.61, 9)),
        Chunk("b.py", [3], "", "main", True, Activity([i % 2 for i in range(steps)], list(range(steps)), 1.0), True),
        Chunk("notes.txt", [], activity=Activity()),
    ]
    ours, plain = serializer(), JsonPlusSerializer(allowed_msgpack_modules=MEMORY_TYPES)
    kind, data = ours.dumps_typed(chunks)
    assert kind == ("chunks+zlib" if steps == 400 else "chunks")
    assert ours.loads_typed((kind, data)) == chunks
    fit = [
        [bytes(h) if max(h, default=0) < 256 else h for h in (c.activity.accessed, c.activity.referred)] for c in chunks
    ]
    rows = [(c.file_path, c.lines, c.class_name, c.function, c.whole_function, c.created) for c in chunks]
    written = [
        (*row, *pair, c.activity.score, c.activity.scored) for row, pair, c in zip(rows, fit, chunks, strict=True)
    ]
    assert (zlib.decompress(data) if kind.endswith("+zlib") else data) == ormsgpack.packb(written)  # as before, bytes
    assert ours.loads_typed(plain.dumps_typed(chunks)) == chunks  # a checkpoint written before reads the same


def test_a_long_operations_list_reads_back_in_batches_and_a_missing_node_is_said(tmp_path: Path) -> None:
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    nodes = [OperationNode(id=i, parent_id=i - 1 if i else None, thought=f"step {i}") for i in range(1_200)]
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        saved = put_operations(saver, config, {}, nodes)["config"]
        found = saver.get_tuple(saved)
        assert found is not None and found.checkpoint["channel_values"]["operations"] == nodes
        saver.conn.execute("DELETE FROM parts WHERE rowid IN (SELECT rowid FROM parts LIMIT 2)")
        with pytest.raises(CheckpointError, match="thread t lacks stored values"):
            saver.get_tuple(saved)


@pytest.mark.parametrize("old_writes", [False, True])
def test_the_nodes_a_step_writes_are_stored_once_with_the_operations_that_take_them_in(
    tmp_path: Path, old_writes: bool
) -> None:
    """The step's pending node and the node it judged (written by `execute_tool`, `reflect`) are the nodes the tree
    takes in at the step's end: one part each, encoded once, whether the tree or the write comes first; a small node
    stays in its row as LangGraph encodes it. Writes of an older saver (each node encoded apart) still read."""
    db, config = tmp_path / "t.checkpoint.sqlite", {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    listed, small = nodes_of(3), OperationNode(id=4, parent_id=3)
    pending, judged = replace(nodes_of(4)[3], observation="1 passed\n" * 200), nodes_of(3, judged=2)[2]
    inserted: list[str] = []
    with open_checkpointer(f"sqlite:{db}", db) as saver:
        assert isinstance(saver, ChannelSqliteSaver)
        writer = OldSaver(saver.conn, serde=serializer()) if old_writes else saver
        first = put_operations(saver, config, {}, listed)
        saver.conn.set_trace_callback(lambda sql: inserted.append(sql) if "INTO parts" in sql else None)
        writes = [("pending", pending), ("changed", [judged]), ("proposed", None), ("retry", small)]
        writer.put_writes(first["config"], writes, "task-1", "~__pregel_pull, execute_tool")
        tree = [*listed[:2], judged, pending]
        put_operations(saver, config, first["versions"], tree)
        saver.commit()
        with sqlite3.connect(db) as conn:
            kinds = dict(conn.execute("SELECT channel, type FROM writes").fetchall())
            row = conn.execute("SELECT value FROM writes WHERE channel = 'retry'").fetchone()[0]
        if not old_writes:
            assert kinds == {"pending": "ref", "changed": "parts", "proposed": "null", "retry": "msgpack"}
            assert (len(inserted), count(db, "parts")) == (2, 5)  # nodes 0-2, node 2 judged, the pending node
            assert row == JsonPlusSerializer(allowed_msgpack_modules=MEMORY_TYPES).dumps_typed(small)[1]
        resumed = saver.get_tuple(first["config"])
        assert resumed is not None and resumed.pending_writes == [("task-1", *write) for write in writes]
        latest = saver.get_tuple(config)
        assert latest is not None and latest.checkpoint["channel_values"]["operations"] == tree
