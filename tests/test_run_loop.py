"""The graph's loop as a run drives it: each node routes by the `Command` it returns (the edges Studio draws are the
same), LangGraph's saves are made on the run's own thread, and the garbage collector is set for the loop while it runs
and set back after."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, act, reflect, write_script
from conftest import make_git_repo
from langgraph.checkpoint.base import copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.types import Command

from llm_ide.config import load_config
from llm_ide.graph import build_graph
from llm_ide.run.checkpoint import open_checkpointer
from llm_ide.run.outputs import LOOP_GC_THRESHOLD, RunEvent, RunResult
from llm_ide.run.single import run_task

EDGES = {
    ("__start__", "render_context"),
    ("render_context", "reflect"),
    ("render_context", "branch"),
    ("render_context", "update_activity"),
    ("reflect", "reflect"),
    ("reflect", "branch"),
    ("reflect", "update_activity"),
    ("branch", "act"),
    ("act", "act"),
    ("act", "execute_tool"),
    ("act", "update_activity"),
    ("execute_tool", "update_activity"),
    ("update_activity", "render_context"),
    ("update_activity", "__end__"),
}


def look(
    tmp_path: Path,
    script: list[str],
    repo: Path | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    **agent: object,
) -> RunResult:
    """A scripted run of the task "look" in a repository of BUGGY_FILES (`agent`: agent settings)."""
    return run_task(
        "look",
        model=write_script(tmp_path / "script.yaml", script),
        settings=load_config("default", environment={"tools": []}, **({"agent": agent} if agent else {})),
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=repo or make_git_repo(tmp_path / "repo", BUGGY_FILES),
        on_event=on_event,
    )


def test_the_six_nodes_route_as_drawn() -> None:
    graph = build_graph().get_graph()
    assert {node for node in graph.nodes if not node.startswith("__")} == {
        "render_context", "reflect", "branch", "act", "execute_tool", "update_activity"
    }  # fmt: skip
    assert {(edge.source, edge.target) for edge in graph.edges} == EDGES
    conditional = {(edge.source, edge.target) for edge in graph.edges if edge.conditional}
    static = {("__start__", "render_context"), ("branch", "act"), ("execute_tool", "update_activity")}
    assert conditional == EDGES - static


def test_a_run_takes_every_route_and_the_collector_is_set_for_its_loop_only(tmp_path: Path) -> None:
    """A reply `act` cannot read (act → act), one `reflect` cannot read (reflect → reflect), a step with a verdict and
    one without (render_context → reflect, → branch), the end (update_activity → END)."""
    script = [
        "no action here",
        act("Look.", "bash", command="echo hi"),
        "no verdict here",
        reflect(False, "it said hi"),
        act("Done.", "submit"),
    ]
    seen: list[tuple[int, tuple[int, int, int], bool]] = []
    before, frozen = gc.get_threshold(), gc.get_freeze_count() > 0  # as the caller left it

    def on_event(event: RunEvent) -> None:
        if event.kind in ("step", "format_error"):
            seen.append((event.step, gc.get_threshold(), gc.get_freeze_count() > 0))

    result = look(tmp_path, script, on_event=on_event, single_call=False)
    assert result.exit_status == "submitted"
    assert [step for step, _, _ in seen] == [1, 1, 2, 2]  # a rejected reply each, then the step
    assert {(threshold, frozen) for _, threshold, frozen in seen} == {((LOOP_GC_THRESHOLD, *before[1:]), True)}
    assert (gc.get_threshold(), gc.get_freeze_count() > 0) == (before, frozen)


@pytest.mark.parametrize("single_call", [True, False])
def test_each_operation_judged_bad_is_told_once_after_its_step_with_its_lessons(
    tmp_path: Path, single_call: bool
) -> None:
    """The Python API's events: a `verdict` event for each operation its next reply judged a failed alternative
    (its step, its lessons, else its summary), between its step and the next; none for a good one."""
    script = [act("Look.", "bash", command="echo 0"), reflect(True, "a dead end", "echo says nothing here")]
    script += [act("Again.", "bash", command="echo 1"), reflect(False, "it printed")]
    script += [act("Once more.", "bash", command="echo 2"), reflect(True, "no use")]
    script += [act("Done.", "submit")]
    told: list[RunEvent] = []
    result = look(tmp_path, script, on_event=told.append, single_call=single_call)
    assert result.exit_status == "submitted"
    shown = [(event.kind, event.step) for event in told if event.kind in ("step", "verdict")]
    assert shown == [("step", 1), ("verdict", 1), ("step", 2), ("step", 3), ("verdict", 3), ("step", 4)]
    assert [event.observation for event in told if event.kind == "verdict"] == ["echo says nothing here", "no use"]


def test_the_saves_of_a_run_are_made_on_its_own_thread(tmp_path: Path) -> None:
    """Each super-step's writes and checkpoint are saved by the thread that runs the graph (run/inline_saves.py): a
    whole run starts no worker thread of LangGraph's pool."""
    script = [act("Look.", "bash", command="echo 0")]
    for number in range(1, 6):
        script += [reflect(False, "it printed"), act("Again.", "bash", command=f"echo {number}")]
    script += [reflect(False, "it printed"), act("Done.", "submit")]
    before = set(threading.enumerate())  # threads, not their idents: an ended thread's ident is given to a new one
    workers: set[threading.Thread] = set()
    steps: list[int] = []

    def on_event(event: RunEvent) -> None:
        steps.extend([event.step] if event.kind == "step" else [])
        workers.update(
            thread
            for thread in threading.enumerate()
            if thread.name.startswith("ThreadPoolExecutor-") and thread not in before
        )

    result = look(tmp_path, script, on_event=on_event)
    assert (result.exit_status, steps[-1], workers) == ("submitted", 7, set())


def test_a_thread_that_kept_its_verdict_apart_goes_on_at_the_node_it_stopped_at(tmp_path: Path) -> None:
    """A thread of an earlier version killed during a command (`execute_tool` next) with the step's verdict kept apart
    in a `judged` channel: resumed, the verdict is committed to the operation it judges and the step goes on with its
    command (an update alone would route nowhere now that nodes route by `Command`)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)

    def run(script: list[str]) -> str:
        return look(tmp_path, script, repo, single_call=False).exit_status

    assert run([act("Look.", "bash", command="echo hi"), reflect(False, "it said hi")]) == "model_error"  # at `act`
    with open_checkpointer(None, tmp_path / "out" / "t1.checkpoint.sqlite") as saver:
        graph, thread = build_graph(saver), {"configurable": {"thread_id": "t1"}}
        pending = graph.get_state(thread).values["pending"]
        command = replace(pending, thought="Again.", action_type="bash", action_params={"command": "echo again"})
        graph.update_state(thread, Command(update={"pending": command}, goto="execute_tool"), as_node="act")
        saved = saver.get_tuple(thread)
        assert saved is not None and graph.get_state(thread).next == ("execute_tool",)
        checkpoint = copy_checkpoint(saved.checkpoint)  # as the earlier version kept it: apart, not in `changed`
        values, versions = checkpoint["channel_values"], checkpoint["channel_versions"]
        values["judged"] = values.pop("changed")[0]
        new = {name: saver.get_next_version(versions.get(name), None) for name in ("judged", "changed")}
        checkpoint.update(id=str(uuid6(clock_seq=saved.metadata["step"] + 1)), channel_versions={**versions, **new})
        saver.put(saved.config, checkpoint, {**saved.metadata, "step": saved.metadata["step"] + 1}, new)
    next((tmp_path / "out").glob("*scripted-*")).unlink()  # the scripted model's place: a fresh script for the rest
    assert run([reflect(False, "it said again"), act("Done.", "submit")]) == "submitted"
    operations = json.loads((tmp_path / "out" / "t1.traj.json").read_text())["operations"]
    assert [(o["action_type"], o["bad_action"], o["summary"], o["observation"]) for o in operations] == [
        ("bash", False, "it said hi", "hi"),
        ("bash", False, "it said again", "again"),
        ("submit", None, "", "Submitted."),
    ]
