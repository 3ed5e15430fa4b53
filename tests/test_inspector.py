"""`llm-ide inspect` in text and in a terminal, the one-line errors of `inspect` and `report`, a hand-broken trajectory
alike in every view, the tree's lanes, `llm-ide graph`. The run page's HTML is test_inspector_charts', the page in
Chromium test_inspector_page's, the batch report test_inspector_report's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import agent_script
import pytest
import yaml
from agent_script import act, reflect
from conftest import in_terminal, killed_in_command, make_git_repo
from inspector_support import cli

from llm_ide.inspector.layout import assign_lanes
from llm_ide.inspector.model import NodeView
from llm_ide.run.trajectory import load_trajectory


def test_a_run_folder_is_inspected_through_its_trajectory(demo_run: tuple[dict, Path]) -> None:
    folder = demo_run[1].parent / "d" / "run"  # what a run prints as its folder, given where a trajectory is wanted
    by_folder, by_file = cli("inspect", str(folder)), cli("inspect", str(folder / "demo.traj.json"))
    assert by_folder.returncode == 0 and by_folder.stdout == by_file.stdout and "demo: submitted" in by_folder.stdout


@pytest.mark.parametrize(
    ("parents", "expected"),
    [
        ([None, 0, 1, 2], {0: 0, 1: 0, 2: 0, 3: 0}),
        ([None, 0, 0, 2, 3], {0: 0, 1: 1, 2: 0, 3: 0, 4: 0}),
        ([None, 0, 0, 0, 3, 4, 4], {0: 0, 1: 1, 2: 2, 3: 0, 4: 0, 5: 1, 6: 0}),
        ([None, 0, 1, 0, 3, 1], {0: 0, 1: 0, 2: 2, 3: 1, 4: 1, 5: 0}),
    ],
)
def test_lanes_keep_the_branch_that_goes_on_straight_and_never_cross_a_node(
    parents: list[int | None], expected: dict[int, int]
) -> None:
    nodes = [NodeView(id=i, parent_id=p) for i, p in enumerate(parents)]
    lanes = assign_lanes(nodes)
    assert lanes == expected
    for node in nodes[1:]:  # the edge runs down the child's lane from the parent's row: no other node sits on it
        between = range(node.parent_id + 1, node.id)
        assert all(lanes[other] != lanes[node.id] for other in between if lanes[node.id] != lanes[node.parent_id])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "nowhere.traj.json", "--html"], "error: trajectory not found: nowhere.traj.json"),
        (
            ["inspect", "{folder}"],  # (it said "is a folder: give a run's trajectory", as if none was there)
            "error: {folder} holds 4 runs' trajectories (a.traj.json, list.traj.json, mini.traj.json, "
            "planner.traj.json): give one",
        ),
        (
            ["inspect", "{empty}"],
            "error: {empty} is a folder without a trajectory: give a run's ({empty}/<thread id>.traj.json)",
        ),
        (["inspect", "{traj}", "x.html"], "error: x.html: an output page is only written with --html"),
        (["inspect", "{bad}", "--html"], "error: {bad}: neither an llm-ide nor a mini-swe-agent-1 trajectory"),
        (["inspect", "{list}", "--html"], "error: {list}: not a trajectory (a JSON object is expected)"),  # traceback
        (["inspect", "{list}"], "error: {list}: not a trajectory (a JSON object is expected)"),
        (["inspect", "{bad}"], "error: {bad}: not an llm-ide trajectory (no operations)"),
        (
            ["inspect", "{mini}"],
            "error: {mini} is a mini-swe-agent trajectory: `llm-ide inspect --html` shows it as one page",
        ),  # fmt: skip
        (["inspect", "{planner}"], "error: {planner} is a coop planner's turns (JSON), not an agent run's trajectory"),
        (  # the page said "neither an llm-ide nor a mini-swe-agent-1 trajectory"
            ["inspect", "{planner}", "--html"],
            "error: {planner} is a coop planner's turns (JSON), not an agent run's trajectory",
        ),
        (  # it said "holds 2 runs' trajectories (planner_1.traj.json, planner_2.traj.json): give one", both refused
            ["inspect", "{pair}"],
            "error: {pair} is a coop pair's folder: give one of its agents' runs "
            "({pair}/agent1-run, {pair}/agent2-run)",
        ),
        (["report", "{folder}"], "error: {folder}: not a batch folder (exit_statuses.yaml is missing)"),
        (
            ["report", "{traj}"],
            "error: {traj} is a file: give a batch's folder (one run's trajectory: llm-ide inspect {traj})",
        ),
        (["report", "{folder}/none"], "error: batch folder not found: {folder}/none"),
        (
            ["report", "{folder}", "--eval", "{folder}/none.json"],
            "error: evaluation report not found: {folder}/none.json",
        ),
        (["report", "{folder}", "--eval", "{folder}"], "error: evaluation report not found: {folder}"),
        (
            ["inspect", "{traj}", "--html", "{file}/pages/x.html"],
            "error: cannot write the page {file}/pages/x.html: {file} is a file, not a folder",
        ),
        (
            ["inspect", "{traj}", "--html", "/proc/llm-ide/x.html"],
            "error: cannot write the page /proc/llm-ide/x.html: No such file or directory",
        ),
    ],
)
def test_bad_inputs_fail_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    names = {"traj": tmp_path / "a.traj.json", "bad": tmp_path / "b.json", "folder": tmp_path, "file": tmp_path / "f"}
    names["file"].write_text("not a folder")
    names["empty"] = tmp_path / "empty"
    names["empty"].mkdir()
    usage = dict.fromkeys(("api_calls", "input_tokens", "output_tokens", "cost"), 0)
    names["traj"].write_text(json.dumps({"format": "llm-ide-1", "operations": [], "info": {"model_stats": usage}}))
    names["bad"].write_text(json.dumps({"hello": 1}))
    for name, content in (("list", [1, 2]), ("mini", {"trajectory_format": "mini-swe-agent-1"}),
                          ("planner", {"agent": "1", "turns": [], "forced": False})):  # fmt: skip
        names[name] = tmp_path / f"{name}.traj.json"
        names[name].write_text(json.dumps(content))
    names["pair"] = tmp_path / "pair"  # a `coop run` pair's folder
    for name in ("agent1-run", "agent2-run"):
        (names["pair"] / name).mkdir(parents=True)
    for name in ("run.json", "planner_1.traj.json", "planner_2.traj.json"):
        (names["pair"] / name).write_text(names["planner"].read_text())
    result = cli(*[a.format(**names) for a in args])
    assert (result.returncode, result.stderr.strip()) == (2, message.format(**names))


@pytest.mark.parametrize(
    ("out", "page"),
    [("pages", "pages/a.html"), ("pages/x.html", "pages/x.html"), ("new.html", "new.html"), ("new/", "new/a.html")],
)
def test_inspect_html_into_a_folder_writes_the_page_named_after_the_run_in_it(
    tmp_path: Path, out: str, page: str
) -> None:
    """`--html FOLDER` was "cannot write the page FOLDER: Is a directory": a folder now takes `<run id>.html`. A folder
    yet to be made, `new/`, was written as a file `new`."""
    usage = dict.fromkeys(("api_calls", "input_tokens", "output_tokens", "cost"), 0)
    trajectory = tmp_path / "runs" / "a.traj.json"
    trajectory.parent.mkdir()
    trajectory.write_text(json.dumps({"format": "llm-ide-1", "operations": [], "info": {"model_stats": usage}}))
    (tmp_path / "pages").mkdir()
    result = cli("inspect", str(trajectory), "--html", f"{tmp_path}/{out}")
    assert result.returncode == 0 and f"→ {tmp_path / page} (" in result.stdout, result.stderr
    in_pages = [Path(page).name] if page.startswith("pages/") else []
    assert "<html" in (tmp_path / page).read_text() and [p.name for p in (tmp_path / "pages").iterdir()] == in_pages


def test_inspect_of_a_demo_folder_shows_its_run(demo_run: tuple[dict, Path], tmp_path: Path) -> None:
    """`llm-ide inspect D` of `llm-ide demo --output D` said "D is a folder without a trajectory: give a run's
    (D/<thread id>.traj.json)", no such file: the demo's is D/run/demo.traj.json. A folder of runs, one level down,
    names them as paths in it."""
    folder = demo_run[1].parent / "d"
    shown = cli("inspect", str(folder))
    assert shown.returncode == 0 and shown.stdout.startswith("demo: submitted"), shown.stderr
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
        shutil.copy(folder / "run" / "demo.traj.json", tmp_path / name / f"{name}.traj.json")
    several = cli("inspect", str(tmp_path))
    said = f"error: {tmp_path} holds 2 runs' trajectories (x/x.traj.json, y/y.traj.json): give one"
    assert (several.returncode, several.stderr.strip()) == (2, said)


def corrupt(data: dict, where: str, value: object) -> None:
    """`value` at `where` (`info.model_stats`, `operations.1.parent_id`, …); `DELETE` removes the key."""
    *path, last = where.split(".")
    for part in path:
        data = data[int(part)] if isinstance(data, list) else data[part]
    if value == "DELETE":
        del data[last]
    elif isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        ("operations.1.parent_id", 999, "warning: operation 1's parent 999 is not in the file: shown at the root"),
        ("operations.2.parent_id", 3, "warning: operation 2's parent 3 loops back to it: shown at the root"),
        ("operations.1.parent_id", 1, "warning: operation 1's parent 1 loops back to it: shown at the root"),
        ("operations", "REVERSE", ""),  # each child before its parent
        ("operations.4.id", 1, "warning: operation 1 is in the file twice: both shown"),
        ("info.model_stats.api_calls", "DELETE", "warning: info.model_stats has no api_calls: counted as 0"),
        ("info", "DELETE", "warning: no info: the run's outcome, usage unknown"),
        ("info", None, "warning: no info: the run's outcome, usage unknown"),
        ("model_calls", None, ""),  # read from the calls log beside the trajectory
        ("operations.2.observation", None, ""),
        ("info.received", [{"text": "hi"}], ""),
        ("info.model_stats", "x", "error: {traj}: info.model_stats: an object expected, not str 'x'"),
        ("info.model_stats.cost", "a lot", "error: {traj}: info.model_stats.cost: a number expected, not str 'a lot'"),
        ("model_calls.0", 5, "error: {traj}: model_calls[0]: an object expected, not int 5"),
        ("operations", "abc", "error: {traj}: operations: a list expected, not str 'abc'"),
        ("operations.0", "x", "error: {traj}: operations[0]: an object expected, not str 'x'"),
        ("operations.2.attempt", "x", "error: {traj}: operations[2].attempt: an integer expected, not str 'x'"),
        ("info", [], "error: {traj}: info: an object expected, not list []"),
        ("info.attempts", [5], "error: {traj}: info.attempts[0]: an object expected, not int 5"),
        ("info.choice", "x", "error: {traj}: info.choice: an object expected, not str 'x'"),
        ("operations.0.id", "DELETE", "error: {traj}: operations[0].id: missing"),
        ("", "TRUNCATE", "error: {traj}: not a readable trajectory (Unterminated string starting at: line 1 column 12 "
         "(char 11))"),
    ],
)  # fmt: skip
def test_a_hand_broken_trajectory_is_shown_or_refused_in_one_line_alike_in_every_view(
    demo_run: tuple[dict, Path], tmp_path: Path, where: str, value: object, said: str
) -> None:
    """Each was a traceback in one view or more (a parent not in the file or looping, `model_calls` null beside its
    calls log, `model_stats` a text, a call not an object…); what can be shown is, the repair said, and the views
    agree."""
    run = demo_run[1].parent / "d" / "run"
    data = json.loads((run / "demo.traj.json").read_text())
    if value == "REVERSE":
        data["operations"].reverse()
    elif value != "TRUNCATE":
        corrupt(data, where, value)
    traj = tmp_path / "demo.traj.json"
    traj.write_text(json.dumps(data)[: 20 if value == "TRUNCATE" else None])
    shutil.copy(run / "demo.calls.jsonl.gz", tmp_path)
    text, full = cli("inspect", str(traj)), cli("inspect", "--full", str(traj))
    page = cli("inspect", str(traj), "--html", str(tmp_path / "t.html"))
    for shown in (text, full, page):
        assert "Traceback" not in shown.stderr and shown.stderr.strip() == said.format(traj=traj), shown.stderr
        assert shown.returncode == (2 if said.startswith("error") else 0)
    shown_all = ("5 operations" in text.stdout, "5 operations, 5 model calls" in page.stdout)
    assert (*shown_all, (tmp_path / "t.html").exists()) == (not said.startswith("error"),) * 3


def test_graph_prints_the_state_machine_as_mermaid() -> None:
    result = cli("graph", "--mermaid")
    assert result.returncode == 0, result.stderr
    assert "graph TD;" in result.stdout
    edges = {line.strip().rstrip(";") for line in result.stdout.splitlines() if "->" in line}
    assert {"__start__ --> render_context", "branch --> act", "execute_tool --> update_activity"} <= edges
    assert {"render_context -.-> reflect", "render_context -.-> branch", "reflect -.-> branch"} <= edges  # the card's
    assert {"act -.-> execute_tool", "act -.-> update_activity", "update_activity -.-> render_context"} <= edges
    assert {"reflect -.-> reflect", "act -.-> act"} <= edges  # a reply that could not be read is asked again
    coop = cli("graph", "coop", "--mermaid")
    assert coop.returncode == 0, coop.stderr
    # the pair: planning (its planner subgraph drawn inside), then execution (the agent graph that reads messages)
    for node in ("plan\\3aplanner\\3athink", "plan\\3acoordinator", "execute\\3areceive_messages", "evaluate"):
        assert node in coop.stdout, coop.stdout
    pair_edges = {line.strip().rstrip(";") for line in coop.stdout.splitlines() if "->" in line}
    assert {"prepare --> plan\\3a__start__", "plan\\3a__end__ --> execute\\3a__start__"} <= pair_edges
    assert "execute\\3aupdate_activity -.-> execute\\3areceive_messages" in pair_edges
    attempts = cli("graph", "attempts", "--mermaid")
    edges = {line.strip().rstrip(";") for line in attempts.stdout.splitlines() if "->" in line}
    assert {"__start__ --> dispatch", "dispatch -.-> attempt", "attempt --> verify", "verify --> review"} <= edges
    assert "review --> dispatch" in edges
    assert {"dispatch -.-> choose", "choose --> __end__"} <= edges
    navigator = cli("graph", "navigator", "--mermaid")
    edges = {line.strip().rstrip(";") for line in navigator.stdout.splitlines() if "->" in line}
    assert {"__start__ --> plan", "plan -.-> navigator_budget", "plan -.-> update_activity"} <= edges
    assert {"navigator_budget -.-> render_context", "update_activity -.-> navigator_budget"} <= edges  # each step
    assert not any("permission" in edge or "consult" in edge for edge in edges)  # around the action: no node
    reproduction = cli("graph", "reproduction", "--mermaid")
    edges = {line.strip().rstrip(";") for line in reproduction.stdout.splitlines() if "->" in line}
    assert {"__start__ --> reproduction\\3a__start__", "reproduction\\3a__end__ -.-> render_context"} <= edges
    phase = {"reproduction\\3awrite_reproduction -.-> reproduction\\3avalidate_reproduction",
             "reproduction\\3avalidate_reproduction -.-> reproduction\\3awrite_reproduction",
             "reproduction\\3areproduce_before --> reproduction\\3a__end__"}  # fmt: skip
    assert phase <= edges and not any(edge.startswith("reproduce ") for edge in edges)  # an action, no node
    page = (Path(__file__).parents[1] / "docs" / "reproduction.md").read_text()
    assert page.split("```mermaid\n", 1)[1].split("\n```", 1)[0].strip() == reproduction.stdout.strip()  # as it is
    unknown = cli("graph", "nope")
    assert (unknown.returncode, unknown.stderr.strip()) == (
        2,
        "error: unknown graph 'nope': choose one of agent, coop, coop-planning, attempts, navigator, reproduction",
    )


def test_a_long_runs_tree_is_shown_whole_in_a_terminal(tmp_path: Path) -> None:
    """40 operations, a failed alternative every 10th: each step was nested under the one before, and a terminal
    80 columns wide showed the first 19 of them, the rest cut off at its width."""
    responses = []
    for step in range(39):
        if step % 10 == 9:
            responses += [act(f"Guess {step}.", "bash", command="false"), reflect(True, f"Guess {step} refuted.")]
        else:
            view = act(f"Read {step}.", "view", path="shop/cart.py", start_line=1, end_line=5)
            responses += [view, reflect(False, f"Read {step}.")]
    script = agent_script.write_script(tmp_path / "s.yaml", [*responses, act("Done.", "submit")])
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    run = ["run", "--repo", str(repo), "--task", "Read.", "--model", script, "--thread-id", "t", "--step-limit", "50"]
    assert cli(*run, "--config", str(config), "--output", str(tmp_path / "out")).returncode == 0
    command = [sys.executable, "-m", "llm_ide", "inspect", str(tmp_path / "out" / "t.traj.json")]
    status, shown = in_terminal(command, {**os.environ, "COLUMNS": "80", "TERM": "dumb", "LLM_IDE_CONFIG": "off"})
    assert status == 0, shown
    drawn = re.findall(r"(✗ )?\[(\d+)\] (\w+)", re.sub(r"\x1b\[[0-9;]*m", "", shown.decode()))
    assert [int(number) for _, number, _ in drawn] == list(range(40))
    assert [number for failed, number, _ in drawn if failed] == ["9", "19", "29"]


def test_a_killed_run_says_the_calls_its_log_holds_past_its_trajectory(tmp_path: Path) -> None:
    """SIGKILLed in its sixth step's command: the trajectory, written after steps 1 and 4, holds 4 calls, the calls
    log 6, and every view showed 4 as if they were all."""
    mark = f"{tmp_path.name}-{os.getpid()}"
    wait = "touch waiting; while [ ! -f go ]; do sleep 0.05; done"
    steps = [item for n in range(5) for item in (act(f"Step {n}.", "bash", command="true"), reflect(False, "ok"))]
    script = agent_script.write_script(tmp_path / "s.yaml", [*steps, act("Wait.", "bash", command=wait)])
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n", ".gitignore": "waiting\ngo\n"})
    config = {"environment": {"tools": [], "env": {"LLM_IDE_TEST_MARK": mark}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    run = ["run", "--repo", str(repo), "--task", "Wait.", "--model", script, "--config", str(tmp_path / "c.yaml")]
    command = [sys.executable, "-m", "llm_ide", *run, "--thread-id", "t", "--output", str(tmp_path / "out")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (repo / "waiting").exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    killed_in_command(process, mark)
    trajectory = tmp_path / "out" / "t.traj.json"
    assert len(load_trajectory(trajectory)["operations"]) == 4
    said = "warning: t.calls.jsonl.gz holds 2 calls past the trajectory's last: made after it was last written"
    for view in ([], ["--full"], ["--html", str(tmp_path / "p.html")]):
        shown = cli("inspect", str(trajectory), *view)
        assert shown.returncode == 0 and shown.stderr.startswith(said), shown.stderr


@pytest.mark.parametrize("target", ["{traj}", "{other}", "{batch}/preds.json", "{batch}/exit_statuses.yaml"])
def test_a_page_is_never_written_over_a_file_that_is_no_page(
    demo_run: tuple[dict, Path], tmp_path: Path, target: str
) -> None:
    """`inspect RUN.traj.json --html RUN.traj.json` (or another run's trajectory as the page, or `report B --html
    B/preds.json`) wrote the page over it: the run's trajectory, or the batch's predictions, gone. An .html page
    there is written over, as before."""
    trajectory = shutil.copy(demo_run[1].parent / "d" / "run" / "demo.traj.json", tmp_path / "demo.traj.json")
    names = {"traj": trajectory, "other": shutil.copy(trajectory, tmp_path / "other.traj.json"), "batch": tmp_path}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump({"instances": {"a__b-1": {"exit_status": "error"}}}))
    (tmp_path / "preds.json").write_text(json.dumps({"a__b-1": {"instance_id": "a__b-1", "model_patch": ""}}))
    page = Path(target.format(**names))
    before = {path: path.is_file() and path.read_bytes() for path in tmp_path.iterdir()}
    args = ["report", str(tmp_path)] if target.startswith("{batch}") else ["inspect", str(trajectory)]
    refused = cli(*args, "--html", str(page))
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stdout + refused.stderr
    said = f"error: cannot write the page {page}: a file that is no HTML page is there (give an .html name)\n"
    assert refused.stderr == said
    assert {path: path.is_file() and path.read_bytes() for path in tmp_path.iterdir()} == before  # nor pages made
    (tmp_path / "old.html").write_text("an earlier page")
    written = cli(*args, "--html", str(tmp_path / "old.html"))
    assert written.returncode == 0 and (tmp_path / "old.html").read_text().startswith("<!DOCTYPE html>")
