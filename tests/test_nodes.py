"""Nodes return updates: the state they are given is never changed in place."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from agent_script import write_script
from conftest import make_git_repo
from langgraph.runtime import Runtime

from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.nodes.render_context import render_context
from llm_ide.nodes.update_activity import update_activity
from llm_ide.run.setup import build_context
from llm_ide.state.context import Activity, Chunk, Scope
from llm_ide.state.operations import OperationNode

SOURCE = "def total(items):\n    return sum(items)\n\n\ndef mean(items):\n    return total(items) / len(items)\n"


def test_render_and_update_leave_the_given_state_unchanged(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"calc.py": SOURCE})
    ctx = build_context(
        settings=load_config("default", environment={"tools": []}),
        model_spec=write_script(tmp_path / "script.yaml", ["unused"]),
        run_id="nodes",
        env=LocalEnvironment(repo),
    )
    stale = Activity(accessed=[1, 0, 1], referred=[0, 2, 0], score=0.0, scored=0)  # scores not folded in yet
    state = {
        "task": "mean of nothing",
        "code_context": [Chunk("calc.py", [1, 2], "", "total", activity=stale)],
        "operations": [OperationNode(id=i, parent_id=i - 1 if i else None, action_type="bash") for i in range(3)],
        "n_operations": 3,
        "pending": OperationNode(id=3, parent_id=2, thought="see mean[1](calc.py:6)", action_type="view"),
        "accessed": [Scope("calc.py", (5, 6), function="mean")],
    }
    before = copy.deepcopy(state)
    rendered = render_context(state, Runtime(context=ctx))
    assert state == before and "def total(items):" in rendered["snapshot"]
    update = update_activity(state, Runtime(context=ctx))
    assert state == before
    total, mean = update["code_context"]
    assert (total.activity.scored, mean.activity.scored) == (4, 4)
    assert (total.activity.accessed, mean.activity.accessed) == ([1, 0, 1, 0], [0, 0, 0, 1])
    assert mean.activity.referred == [0, 0, 0, 1]
    assert total.activity.score > 0 and mean.activity.score > 0
    ctx.codebase.env.close()


def test_step_scratch_fields_stay_private_to_the_nodes(tmp_path: Path) -> None:
    from agent_script import BUGGY_FILES, act, reflect

    from llm_ide.graph import build_graph
    from llm_ide.run.checkpoint import open_checkpointer
    from llm_ide.run.single import run_task
    from llm_ide.state.graph_state import RunState, StepState

    script = [act("Look[1](shop/cart.py:1).", "bash", command="echo hi"), reflect(False, "ok"), act("Done.", "submit")]
    result = run_task(
        "look",
        model=write_script(tmp_path / "script.yaml", script),
        settings=load_config("default", environment={"tools": []}),
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
    )
    assert result.exit_status == "submitted"
    private = set(StepState.__annotations__)
    with open_checkpointer(None, tmp_path / "out" / "t1.checkpoint.sqlite") as saver:
        graph = build_graph(saver)
        thread = {"configurable": {"thread_id": "t1"}}
        values = graph.get_state(thread).values
        output = graph.invoke(None, thread, context=None)  # the finished thread: its output, nothing run again
    assert private <= set(values) and values["n_operations"] == 2  # checkpointed, so a resumed step has them
    assert set(output) <= set(RunState.__annotations__) and output["n_operations"] == 2
    assert not private & set(graph.get_output_jsonschema()["properties"])


def test_a_thread_checkpointed_before_reflect_and_branch_existed_goes_on_through_them(tmp_path: Path) -> None:
    """A thread left by the version whose step went from `render_context` straight to `act` (stopped there: its
    model had nothing more to say), resumed: it goes through `reflect` (the verdict it owed) and `branch`."""
    from agent_script import BUGGY_FILES, act, reflect

    from llm_ide.graph import build_graph
    from llm_ide.run.checkpoint import open_checkpointer
    from llm_ide.run.single import run_task

    def run(script: list[str]) -> str:
        settings = load_config("default", environment={"tools": []})
        return run_task("look", model=write_script(tmp_path / "script.yaml", script), settings=settings,
                        output_dir=tmp_path / "out", run_id="t1", repo=repo).exit_status  # fmt: skip

    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    assert run([act("Look.", "bash", command="echo hi")]) == "model_error"  # then nothing more to say
    with open_checkpointer(None, tmp_path / "out" / "t1.checkpoint.sqlite") as saver:
        graph, thread = build_graph(saver), {"configurable": {"thread_id": "t1"}}
        graph.update_state(thread, {"pending": None}, as_node="branch")  # as the older graph left it: `act` next
        assert graph.get_state(thread).next == ("act",)
    next((tmp_path / "out").glob("*scripted-*")).unlink()  # the scripted model's place: a fresh script for the rest
    assert run([reflect(False, "it said hi"), act("Done.", "submit")]) == "submitted"
    operations = json.loads((tmp_path / "out" / "t1.traj.json").read_text())["operations"]
    assert [(o["action_type"], o["bad_action"], o["summary"]) for o in operations] == [
        ("bash", False, "it said hi"),
        ("submit", None, ""),
    ]
