"""Cooperation end to end with scripted models: the planning graph (messages, agreement, forced plan), execution in
git worktrees, eval.json, and a run killed during execution that resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect
from coop_support import EXTRA, TWO, coop_args, coop_run, scripts
from in_process import invoke
from langgraph.checkpoint.memory import InMemorySaver
from test_coop_evaluate import build_task

from llm_ide.coop.planning import PlanningContext, build_planning_graph
from llm_ide.coop.settings import load_coop_settings
from llm_ide.models import ScriptedModel


def plan(folder: Path, agent: str, responses: list[str]) -> ScriptedModel:
    path = folder / f"plan_{agent}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"responses": responses}))
    return ScriptedModel(path)


def planning(tmp_path: Path, models: dict[str, ScriptedModel], setting: str = "coop") -> dict:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "core.py").write_text(TWO)
    context = PlanningContext(repo=repo, models=models, settings=load_coop_settings())
    graph = build_planning_graph(InMemorySaver())
    features = {agent: [f"Feature of agent {agent}."] for agent in models}
    start = {"setting": setting, "agents": list(models), "features": features, "round": 1}
    return graph.invoke(start, {"configurable": {"thread_id": "p"}}, context=context)


def test_coop_planners_talk_through_the_coordinator_and_agree(tmp_path: Path) -> None:
    models = {
        "1": plan(tmp_path / "s", "1", [
            act("See the layout.", "list_files", path="."),
            act("Claim core.py.", "communicate_with_agent", message="I append three() to core.py",
                message_type="proposal"),
            act("Agreed.", "agreement_reached", plan="Append three() to core.py."),
        ]),
        "2": plan(tmp_path / "s", "2", [
            act("Read core.", "read_file", path="core.py"),
            act("Stay away.", "communicate_with_agent", message="Then I only add extra.py", message_type="agreement"),
            act("Agreed.", "agreement_reached", plan="Create extra.py with four()."),
        ]),
    }  # fmt: skip
    state = planning(tmp_path, models)
    assert state["plans"] == {"1": "Append three() to core.py.", "2": "Create extra.py with four()."}
    assert state.get("forced", {}) == {}
    assert [(m["from"], m["to"], m["type"], m["text"]) for m in state["messages"]] == [
        ("1", "2", "proposal", "I append three() to core.py"),
        ("2", "1", "agreement", "Then I only add extra.py"),
    ]
    turns = state["turns"]
    assert [t["action"] for t in turns["1"]] == ["list_files", "communicate_with_agent", "agreement_reached"]
    assert turns["1"][0]["observation"] == "core.py"
    assert "     2\t    return 2" in turns["2"][0]["observation"]
    # the coordinator relays a round's messages into the other planner's next prompt, never the same round's
    assert "I append three()" not in turns["2"][1]["prompt"]
    assert "- [proposal, turn 2] I append three() to core.py" in turns["2"][2]["prompt"]
    assert "- [agreement, turn 2] Then I only add extra.py" in turns["1"][2]["prompt"]


def test_planner_at_the_turn_limit_gets_a_forced_plan(tmp_path: Path) -> None:
    limit = load_coop_settings().planning.max_iterations
    wander = [act(f"Still exploring {n}.", "grep_search", pattern="def", path=".") for n in range(limit)]
    state = planning(tmp_path, {"1": plan(tmp_path / "s", "1", wander)}, setting="single")
    turns = state["turns"]["1"]
    assert len(turns) == limit and state["forced"] == {"1": True}
    assert "Unknown action grep_search" in turns[-1]["observation"]  # only agreement_reached remains at the end
    assert "the only action left is `agreement_reached`" in turns[-1]["prompt"]
    assert "`grep_search`" not in turns[-1]["prompt"].split("## Next step")[1]
    assert state["plans"]["1"].startswith("(The planner reached its turn limit") and state["plans"]["1"].endswith(
        f"Still exploring {limit - 1}."
    )
    assert turns[0]["observation"] == "core.py:1: def two():"


def test_coop_pair_runs_in_worktrees_merges_cleanly_and_both_pass(tmp_path: Path) -> None:
    task, source = build_task(tmp_path)
    model = scripts(
        tmp_path / "scripts",
        plan_1=[act("Claim core.", "communicate_with_agent", message="core.py is mine", message_type="proposal"),
                act("Done.", "agreement_reached", plan="Append three() to pkg/core.py")],
        plan_2=[act("Done.", "agreement_reached", plan="Create pkg/extra.py with four()")],
        run_1=[act("Append.", "edit", path="pkg/core.py", old=TWO, new=TWO + "\n\ndef three():\n    return 3\n"),
               reflect(False, "three added"), act("Submit.", "submit")],
        run_2=[act("Create.", "create", path="pkg/extra.py", content=EXTRA), reflect(False, "added"),
               act("Go.", "submit")],
    )  # fmt: skip
    args = coop_args(task, source, model, tmp_path / "out")
    args[args.index("-o") + 1] = "out"  # relative, as the default runs/coop: the worktrees are the pair folder's
    done = invoke(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = tmp_path / "out" / "demo_task7_f1_f2_coop_k0"
    result = json.loads((folder / "eval.json").read_text())
    assert (result["merge"]["status"], result["both_passed"], result["setting"], result["k"]) == (
        "clean",
        True,
        "coop",
        0,
    )
    assert (result["feature1"]["tests_passed"], result["feature2"]["tests_passed"]) == (2, 2)
    assert sorted(path.name for path in folder.iterdir() if path.is_dir()) == [
        "agent1",
        "agent1-run",
        "agent2",
        "agent2-run",
        "repo",
    ]  # no grading left
    assert (folder / "plan_coop_k0_feature1.md").read_text() == "Append three() to pkg/core.py\n"
    assert (folder / "plan_coop_k0_feature2.md").read_text() == "Create pkg/extra.py with four()\n"
    assert json.loads((folder / "conversation.json").read_text())[0]["text"] == "core.py is mine"
    assert "+def three():" in (folder / "patch_agent1.patch").read_text()
    assert "+def four():" in (folder / "patch_agent2.patch").read_text()
    worktrees = subprocess.run(["git", "-C", str(folder / "repo"), "worktree", "list"], capture_output=True, text=True)
    assert [line.split()[2] for line in worktrees.stdout.splitlines()] == ["[base]", "[agent1]", "[agent2]"]
    task_text = json.loads((folder / "agent2-run" / "agent2.traj.json").read_text())["task"]
    assert task_text.startswith("Add `four`.\n\n## Plan\nCreate pkg/extra.py with four()\n")
    assert "## Agent 1\n" in task_text and '`<send_message>{"message": "<text>"}</send_message>`' in task_text
    assert "pair 1,2 coop k=0: clean, both pass (planning " in done.stdout and "1/1 (100%)" in done.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["by_setting"]["coop"]
    assert {k: summary[k] for k in ("pairs", "passed", "conflicts", "pass_rate", "conflict_rate")} == {
        "pairs": 1, "passed": 1, "conflicts": 0, "pass_rate": 1.0, "conflict_rate": 0.0}  # fmt: skip
    stamp = (folder / "eval.json").stat().st_mtime_ns
    rerun = invoke(*args, cwd=tmp_path)  # a finished pair again: its grade kept, its tests not run again
    assert rerun.returncode == 0 and "pair 1,2 coop k=0: clean, both pass" in rerun.stdout, rerun.stderr
    assert (folder / "eval.json").stat().st_mtime_ns == stamp
    (folder / "eval.json").unlink()
    again = invoke("coop", "evaluate", str(folder.relative_to(tmp_path)), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "merge clean, both passed: yes" in again.stdout
    regraded = json.loads((folder / "eval.json").read_text())
    assert not (folder / "eval-scratch").exists()
    assert {k: regraded[k] for k in ("merge", "both_passed")} == {k: result[k] for k in ("merge", "both_passed")}
    assert regraded["feature1"]["tests_passed"] == result["feature1"]["tests_passed"]


def test_a_rerun_without_evaluation_adds_its_phase_seconds_to_the_earlier_runs(tmp_path: Path) -> None:
    """A pair run with --no-evaluate, then again: the second finds everything done (planning and agents kept) and its
    eval.json gives the seconds of both runs together, not the second's alone (0.0 s)."""
    task, source = build_task(tmp_path)
    model = gated_scripts(tmp_path / "scripts", tmp_path / "gate", waiting=())
    out = tmp_path / "out"
    folder = out / "demo_task7_f1_f2_coop_k0"
    seconds = []
    for _ in range(2):
        done = invoke(*coop_args(task, source, model, out, "--no-evaluate"))
        assert done.returncode == 0, done.stderr
        seconds.append(json.loads((folder / "eval.json").read_text())["seconds"])
    assert set(seconds[0]) == set(seconds[1]) == {"planning", "execution"}
    assert seconds[0]["execution"] > 0
    assert all(seconds[1][phase] >= seconds[0][phase] for phase in seconds[0]), seconds


def gated_scripts(folder: Path, gate: Path, waiting: tuple[str, ...]) -> str:
    """Both planners agree at once; agent 1 appends three() to core.py, agent 2 creates extra.py, each agent of
    `waiting` first in a command that marks that it started (in its worktree) and waits for `gate`."""
    block = f"touch started && while [ ! -e {gate} ]; do sleep 0.1; done && rm -f started"
    wait = [act("Wait.", "bash", command=block), reflect(False, "waited")]
    return scripts(
        folder,
        plan_1=[act("Done.", "agreement_reached", plan="three() in core.py")],
        plan_2=[act("Done.", "agreement_reached", plan="extra.py")],
        run_1=[*(wait if "1" in waiting else []),
               act("Append.", "edit", path="pkg/core.py", old=TWO, new=TWO + "\n\ndef three():\n    return 3\n"),
               reflect(False, "three added"), act("Submit.", "submit")],
        run_2=[*(wait if "2" in waiting else []),
               act("Create.", "create", path="pkg/extra.py", content=EXTRA), reflect(False, "added"),
               act("Go.", "submit")],
    )  # fmt: skip


@pytest.mark.slow
def test_a_coop_run_killed_during_execution_resumes_without_redoing_work(tmp_path: Path) -> None:
    """Agents run one after the other; agent 2's first command marks that it started and waits for a gate file (both
    inside its worktree, which the sandbox lets it write); the test SIGKILLs the whole run there, then reruns it."""
    task, source = build_task(tmp_path)
    gate = tmp_path / "gate"  # outside the worktree: the rerun puts the worktree back and runs the command again
    model = gated_scripts(tmp_path / "scripts", gate, waiting=("2",))
    sequential = tmp_path / "coop.yaml"
    sequential.write_text(yaml.safe_dump({"execution": {"parallel": False}}))
    out = tmp_path / "out"
    folder = out / "demo_task7_f1_f2_coop_k0"
    first = coop_run(task, source, model, out, "--coop-config", str(sequential), start_new_session=True)
    while not (folder / "agent2" / "started").exists():  # synchronise on the file agent 2's command writes
        assert first.poll() is None, first.communicate()[1]
        subprocess.run(["sleep", "0.1"], check=True)
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate()
    assert not (folder / "eval.json").exists() and (folder / "patch_agent1.patch").exists()
    agent1 = folder / "agent1-run" / "agent1.traj.json"
    stamp = agent1.stat().st_mtime_ns
    gate.touch()
    second = invoke(*coop_args(task, source, model, out, "--coop-config", str(sequential)))  # to its end: in-process
    assert second.returncode == 0, second.stderr
    result = json.loads((folder / "eval.json").read_text())
    assert (result["merge"]["status"], result["both_passed"]) == ("clean", True)
    assert agent1.stat().st_mtime_ns == stamp  # agent 1 finished before the kill: kept, not run again
    trajectory = json.loads((folder / "agent2-run" / "agent2.traj.json").read_text())
    assert [op["action_type"] for op in trajectory["operations"]] == ["bash", "create", "submit"]
    assert "+def four():" in (folder / "patch_agent2.patch").read_text()


def test_ctrl_c_stops_both_agents_at_their_next_step_and_says_how_to_resume(tmp_path: Path) -> None:
    """The agents run side by side, each in a command that waits for a gate and prints nothing; Ctrl-C (the main
    thread's only): both stop at once, their commands ended (they waited for the gate: agent 2 had made its calls to
    the end before), the command that resumes is said, and it finishes the pair, the cut commands run again."""
    task, source = build_task(tmp_path)
    gate = tmp_path / "gate"
    model = gated_scripts(tmp_path / "scripts", gate, waiting=("1", "2"))
    out = tmp_path / "out"
    folder = out / "demo_task7_f1_f2_coop_k0"
    first = coop_run(task, source, model, out)
    while not all((folder / f"agent{n}" / "started").exists() for n in (1, 2)):  # both commands are running
        assert first.poll() is None, first.communicate()[1]
        subprocess.run(["sleep", "0.05"], check=True)
    first.send_signal(signal.SIGINT)
    stdout, stderr = first.communicate(timeout=60)  # the gate still closed
    assert first.returncode == 130, stdout + stderr
    assert "interrupted: each agent stops at its next step" in stderr
    assert f"interrupted: each pair keeps what it did (plans, finished agents, checkpoints) in {out}" in stderr
    assert "resume with:\nllm-ide coop run " in stderr
    for agent in (1, 2):
        trajectory = json.loads((folder / f"agent{agent}-run" / f"agent{agent}.traj.json").read_text())
        assert (trajectory["info"]["exit_status"], len(trajectory["model_calls"])) == ("interrupted", 1)  # no more
        assert trajectory["operations"] == []  # mid-step: it resumes there
    assert not [line for line in commands_running() if str(gate) in line]  # the waits ended with the run
    cut_short = json.loads((folder / "seconds.json").read_text())  # the time the interrupted run spent is kept
    assert cut_short["planning"] > 0 and cut_short["execution"] > 0
    gate.touch()
    again = invoke(*coop_args(task, source, model, out))  # a run to its end: in-process
    assert again.returncode == 0, again.stderr
    result = json.loads((folder / "eval.json").read_text())
    assert result["both_passed"] is True
    assert result["seconds"]["execution"] >= round(cut_short["execution"], 2)  # both runs' execution, not the last's
    for agent in (1, 2):  # the pair's execution holds each agent's run, both of its parts (before Ctrl-C and after)
        elapsed = json.loads((folder / f"agent{agent}-run" / f"agent{agent}.traj.json").read_text())["info"]["elapsed"]
        assert result["seconds"]["execution"] >= elapsed - 0.01, (result["seconds"], elapsed)


def commands_running() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # not a process, or gone
            continue
    return lines


def reference_edits(repo: Path, patch: Path) -> list[str]:
    """Scripted responses that implement a reference feature.patch through `edit` actions (one per source file:
    the whole file before → after), each reflected on, then submit."""
    from llm_ide.coop.evaluate import drop_test_files

    source = drop_test_files(patch.read_text())
    files = [line.split(" b/", 1)[1] for line in source.splitlines() if line.startswith("diff --git")]
    before = {name: (repo / name).read_text() for name in files}
    applied = subprocess.run(["git", "-C", str(repo), "apply", "-"], input=source, text=True, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    after = {name: (repo / name).read_text() for name in files}
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    responses = []
    for name in files:
        responses += [act(f"Implement the plan in {name}.", "edit", path=name, old=before[name], new=after[name]),
                      reflect(False, f"{name} updated.")]  # fmt: skip
    return [*responses, act("Both parts of the plan are in place.", "submit")]


@pytest.mark.slow
def test_scripted_coop_run_on_the_shared_task_grades_like_gold(shared_dir: Path, tmp_path: Path) -> None:
    """Each agent implements its reference feature through edits; eval.json says what `coop evaluate --gold` says."""
    from llm_ide.coop.evaluate import evaluate_pair
    from llm_ide.coop.task import checkout_base, load_task

    root = shared_dir / "data" / "cooperbench"
    folder, bundle = (
        root / "dataset" / "samuelcolvin_dirty_equals_task" / "task43",
        root / "repos" / "dirty-equals.bundle",
    )
    task = load_task(folder)
    repo = checkout_base(task, bundle, tmp_path / "scratch-repo")
    model = scripts(
        tmp_path / "scripts",
        plan_1=[act("Split the work.", "communicate_with_agent", message="I add IsIP to _other.py and __init__",
                    message_type="proposal"), act("Done.", "agreement_reached", plan="IsIP in dirty_equals/_other.py")],
        plan_2=[act("Done.", "agreement_reached", plan="IsMac in dirty_equals/_other.py")],
        run_1=reference_edits(repo, task.feature(1).patch),
        run_2=reference_edits(repo, task.feature(2).patch),
    )  # fmt: skip
    done = invoke(*coop_args(folder, bundle, model, tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out" / "samuelcolvin_dirty_equals_task43_f1_f2_coop_k0" / "eval.json").read_text())
    patches = (task.feature(1).patch.read_text(), task.feature(2).patch.read_text())
    gold = evaluate_pair(task, (1, 2), patches, bundle, tmp_path / "gold")
    assert (result["merge"]["status"], result["merge"]["strategy"]) == (gold.merge.status, gold.merge.strategy)
    assert result["merge"]["conflict_sections"] == gold.merge.conflict_sections
    assert (result["feature1"]["passed"], result["feature2"]["passed"]) == (gold.feature1.passed, gold.feature2.passed)
    assert (result["both_passed"], gold.both_passed) == (True, True)
    assert result["feature1"]["tests_passed"] == gold.feature1.tests_passed > 0
