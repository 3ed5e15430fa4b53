from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_KW_ARGS, JsonPlusSerializer, _msgpack_enc

from llm_ide.run.checkpoint import open_checkpointer, serializer
from llm_ide.state.context import Activity, Chunk, Scope
from llm_ide.state.graph_state import AgentState
from llm_ide.state.operations import OperationNode

SERDE_LOGGER = "langgraph.checkpoint.serde.jsonplus"

NODE = OperationNode(
    id=3,
    parent_id=1,
    thought="The guard is wrong [1](pkg/a.py:12-14) and [2](`b.py:3`)",
    action_type="edit",
    action_params={"path": "pkg/a.py", "old": "if x:\n", "new": "if x is not None:\n", "count": 1, "opts": [1, "a"]},
    observation="Edited pkg/a.py\n\u00e9\u4e2d\t\r\n",
    returncode=0,
    duration=0.25,
    bad_action=False,
    summary="fixed the guard",
    lessons="- check None explicitly\n- run the test",
)


def agent_state() -> AgentState:
    return AgentState(
        task="Fix the bug in pkg/a.py",
        repo="/repo",
        model="scripted",
        config={"memory": {"alpha": 1.0, "gamma": 0.9}, "agent": {"step_limit": 0}},
        code_context=[
            Chunk("pkg/a.py", [12, 13, 14], "Parser", "parse.inner", False, Activity([1, 0, 1], [0, 2, 1], 4.61)),
            Chunk("b.py", [3], "", "main", True, Activity([0, 0, 1], [0, 0, 0], 1.0)),
            Chunk("notes.txt", [], activity=Activity()),
        ],
        operations=[
            OperationNode(id=1, parent_id=None, thought="open it", action_type="open", bad_action=False),
            OperationNode(id=2, parent_id=1, action_type="bash", returncode=1, bad_action=True, lessons="x"),
            NODE,
        ],
        n_operations=3,
        workspace="## Code context\n...",
        judged=OperationNode(id=2, parent_id=1, bad_action=True, summary="broke it", lessons="- revert first"),
        proposed={"thought": "t", "action_type": "view", "action_params": {"path": "a.py"}, "marks": {}},
        pending=OperationNode(id=3, parent_id=1),
        accessed=[Scope("pkg/a.py", (12, 14), "Parser", "parse"), Scope("b.py", (1,), whole_function=True)],
        submitted=False,
        retry=None,
        format_errors=0,
        usage={"api_calls": 3, "input_tokens": 1200, "output_tokens": 340, "cost": 0.0125},
        elapsed=12.5,
        exit_status=None,
        worktree_patch="diff --git a/pkg/a.py b/pkg/a.py\n",
    )


VALUES: list[Any] = [
    Activity([1, 0, 1], [0, 2, 1], 4.61),
    Activity(),
    Chunk("pkg/a.py", [12, 40], "Outer.Inner", "method.helper", False, Activity([1], [3], 1.0)),
    Chunk("b.py", [5], "", "f", True),
    NODE,
    OperationNode(id=0, parent_id=None),
    Scope("pkg/a.py", (3, 4, 9), "C", "m"),
    Scope("b.py", (7,), whole_function=True),
    [Scope("a.py", (1,)), Scope("a.py", (1, 2))],
    agent_state(),
]


@pytest.mark.parametrize("value", VALUES)
def test_round_trip_through_the_checkpoint_serializer(value: Any, caplog: pytest.LogCaptureFixture) -> None:
    serde = serializer()
    with caplog.at_level(logging.DEBUG, logger=SERDE_LOGGER):
        kind, data = serde.dumps_typed(value)
        restored = serde.loads_typed((kind, data))
    assert restored == value
    assert type(restored) is type(value)
    assert [r.getMessage() for r in caplog.records if r.name == SERDE_LOGGER] == []


@pytest.mark.parametrize("value", VALUES)
def test_round_trip_through_a_plain_json_plus_serializer(value: Any) -> None:
    if os.environ.get("LANGGRAPH_STRICT_MSGPACK", "").lower() in ("1", "true", "yes"):
        pytest.skip("LANGGRAPH_STRICT_MSGPACK blocks unregistered types in a plain JsonPlusSerializer")
    serde = JsonPlusSerializer()
    assert serde.loads_typed(serde.dumps_typed(value)) == value


def test_a_checkpoint_written_before_the_created_flag_still_loads() -> None:
    """Chunks and scopes saved without `created` (older runs) load as code the agent did not create."""
    serde = serializer()
    old_chunk = {"file_path": "a.py", "lines": [3], "class_name": "", "function": "f", "whole_function": False}
    old_chunk["activity"] = Activity([1], [0], 1.0)
    old_scope = {"file_path": "a.py", "lines": [3], "class_name": "", "function": "f", "whole_function": False}
    saved = {
        "code_context": [
            ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, _msgpack_enc(("llm_ide.state.context", "Chunk", old_chunk)))
        ],
        "accessed": [
            ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, _msgpack_enc(("llm_ide.state.context", "Scope", old_scope)))
        ],
    }
    restored = serde.loads_typed(("msgpack", _msgpack_enc(saved)))
    assert restored == {
        "code_context": [Chunk("a.py", [3], "", "f", False, Activity([1], [0], 1.0), created=False)],
        "accessed": [Scope("a.py", (3,), "", "f", created=False)],
    }


def test_restored_scopes_stay_hashable_and_frozen() -> None:
    serde = serializer()
    restored = serde.loads_typed(serde.dumps_typed(agent_state()))
    assert {*restored["accessed"], *agent_state()["accessed"]} == set(agent_state()["accessed"])
    assert [scope.lines for scope in restored["accessed"]] == [(12, 14), (1,)]


@pytest.mark.parametrize("spec", ["memory", "sqlite"])
def test_state_survives_a_checkpointer(spec: str, tmp_path: Path) -> None:
    state = agent_state()
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(state)
    checkpoint["channel_versions"] = dict.fromkeys(state, 1)
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    target = "memory" if spec == "memory" else f"sqlite:{tmp_path / 'state.db'}"
    with open_checkpointer(target, tmp_path / "unused.db") as saver:
        saved = saver.put(config, checkpoint, {"step": 3}, checkpoint["channel_versions"])
        restored = saver.get_tuple(saved)
    assert restored is not None
    assert restored.checkpoint["channel_values"] == state
    if spec == "sqlite":
        with open_checkpointer(target, tmp_path / "unused.db") as saver:
            assert saver.get_tuple(saved).checkpoint["channel_values"] == state
