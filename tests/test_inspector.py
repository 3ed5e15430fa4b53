"""The HTML inspector and batch report, opened in real headless Chromium (Debian's chromium + chromium-driver)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import agent_script
import attempts_scripts
import pytest
import reproduction_scripts
import yaml
from agent_script import act, reflect
from conftest import in_terminal, killed_in_command, make_git_repo, unavailable
from in_process import invoke
from openai_server import OpenAIServer, Reply
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config, write_script

from llm_ide import run_attempts, run_task
from llm_ide.config import load_config
from llm_ide.inspector.layout import assign_lanes
from llm_ide.inspector.model import NodeView
from llm_ide.run.trajectory import load_trajectory
from llm_ide.state.operations import OperationNode, reasoning_chain
from llm_ide.swebench.batch import BatchOptions, run_swebench

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless Chromium per worker; its temporary files (the singleton socket's folder, which it leaves behind)
    under the session's tmp, not /tmp."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = f"{', '.join(missing)} missing (apt-get install chromium chromium-driver)"
        unavailable(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    env = {**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("chromium"))}
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER), env=env), options=options)
    yield driver
    driver.quit()


def text_of(element: object) -> str:
    return element.get_attribute("textContent")  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """The demo run (a failed alternative, a fix, tests, submit) and its inspector page, made by the CLI."""
    folder = tmp_path_factory.mktemp("demo")
    assert cli("demo", "--output", str(folder / "d")).returncode == 0
    trajectory = folder / "d" / "run" / "demo.traj.json"
    result = cli("inspect", str(trajectory), "--html", str(folder / "page.html"))
    assert result.returncode == 0, result.stderr
    assert f"→ {folder / 'page.html'}" in result.stdout
    return load_trajectory(trajectory), folder / "page.html"


def test_a_run_folder_is_inspected_through_its_trajectory(demo_run: tuple[dict, Path]) -> None:
    folder = demo_run[1].parent / "d" / "run"  # what a run prints as its folder, given where a trajectory is wanted
    by_folder, by_file = cli("inspect", str(folder)), cli("inspect", str(folder / "demo.traj.json"))
    assert by_folder.returncode == 0 and by_folder.stdout == by_file.stdout and "demo: submitted" in by_folder.stdout


def test_a_free_runs_charts_say_their_real_maximum(demo_run: tuple[dict, Path]) -> None:
    """The demo's scripted model is free: its cost chart is flat and says max 0 (it said max 1.0000)."""
    page = demo_run[1].read_text()
    captions = re.findall(r"<figcaption>([^<]+) <span class=\"dim\">\(max ([^)]+)\)</span>", page)
    assert [title for title, _ in captions] == ["prompt characters", "input tokens: cached | uncached", "cost ($)"]
    assert captions[2][1] == "0.0000" and all(int(top.replace(",", "")) > 0 for _, top in captions[:2])


def test_run_page_draws_the_tree_marks_failed_alternatives_and_opens_nodes(browser, demo_run) -> None:
    from selenium.webdriver.common.by import By

    data, page = demo_run
    browser.get(page.as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree .node")
    operations = data["operations"]
    assert len(nodes) == len(operations) == 5
    chain = {node.id for node in reasoning_chain([OperationNode(**op) for op in operations])}
    failed = [n.get_attribute("data-key") for n in browser.find_elements(By.CSS_SELECTOR, "#tree .node.failed")]
    assert failed == [f"0:{op['id']}" for op in operations if op["id"] not in chain] == ["0:1"]
    assert browser.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:1"] .cross').is_displayed()
    assert browser.find_element(By.ID, "panel-body").get_attribute("hidden") is not None
    for node, operation in zip(nodes, operations, strict=True):
        node.click()
        assert text_of(browser.find_element(By.ID, "panel-observation")) == (operation["observation"] or "—")
        assert text_of(browser.find_element(By.ID, "panel-title")).startswith(f"[{operation['id']}] ")
        assert text_of(browser.find_element(By.ID, "panel-lessons")) == (operation["lessons"] or "—")
    calls = browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call")
    assert [text_of(c.find_element(By.CSS_SELECTOR, "summary")).split(":")[0] for c in calls] == ["#4 act"]
    recorded = next(call for call in data["model_calls"] if call["index"] == 4)
    assert text_of(calls[0].find_element(By.CSS_SELECTOR, "pre.prompt")) == recorded["prompt"]
    assert text_of(calls[0].find_element(By.CSS_SELECTOR, "pre.response")) == recorded["response"]
    nodes[1].click()
    browser.find_element(By.CSS_SELECTOR, "#panel-thought a.ref").click()
    highlighted = browser.find_elements(By.CSS_SELECTOR, "#heat tr.highlight th")
    assert [text_of(h) for h in highlighted] == ["calc/stats.py:10-17 median"]
    nodes[2].click()  # its thought cites lines 17 and 14: the second reference
    browser.find_elements(By.CSS_SELECTOR, "#panel-thought a.ref")[0].click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#heat tr")) == len(data["code_context"])
    assert "+    return (ordered[middle - 1] + ordered[middle]) / 2" in text_of(browser.find_element(By.ID, "patch"))
    assert text_of(browser.find_element(By.ID, "exit-status")) == "submitted"
    assert browser.get_log("browser") == []


def test_mini_swe_agent_trajectory_renders_as_a_chain(browser, shared_dir: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    source = shared_dir / "data" / "trajectories" / "mini-swe-agent" / "pallets__flask-5014.traj.json"
    messages = json.loads(source.read_text())["messages"]
    assert cli("inspect", str(source), "--html", str(tmp_path / "mini.html")).returncode == 0
    browser.get((tmp_path / "mini.html").as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree .node")
    assert len(nodes) == sum(1 for m in messages if m["role"] == "assistant") == 20
    assert browser.find_elements(By.CSS_SELECTOR, "#tree .node.failed") == []
    nodes[0].click()
    assert text_of(browser.find_element(By.ID, "panel-observation")) == messages[3]["content"]
    assert "ls -R" in text_of(browser.find_element(By.ID, "panel-action"))
    assert "if not name:" in text_of(browser.find_element(By.ID, "patch"))
    assert browser.get_log("browser") == []


@pytest.mark.parametrize("instance", ["pallets__flask-5014", "psf__requests-1142"])
def test_a_mini_swe_agent_runs_calls_carry_their_cost(shared_dir: Path, instance: str) -> None:
    """Each call's cost is its usage's (litellm's `cost`): the page's cost chart was all zeros."""
    from llm_ide.inspector.load import load_run

    source = shared_dir / "data" / "trajectories" / "mini-swe-agent" / f"{instance}.traj.json"
    run = load_run(source)
    total = json.loads(source.read_text())["info"]["model_stats"]["instance_cost"]
    assert all(call.cost > 0 for call in run.calls) and sum(call.cost for call in run.calls) == pytest.approx(total)


def test_a_report_into_a_file_or_a_pipe_keeps_every_cell_whole(tmp_path: Path) -> None:
    """Not a terminal: rich would fit the table to 80 columns and cut the ids (`psf__requests-…`, two rows alike)."""
    long_id, error = "scikit-learn__scikit-learn-14087", "the tests did not run to the end (no test-output markers)"
    statuses = {long_id: {"exit_status": "submitted", "cost": 0.5}, "psf__requests-1142": {"exit_status": "cost_limit"}}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump({"instances": statuses}))
    (tmp_path / "eval").mkdir()
    evaluation = {"resolved_ids": ["psf__requests-1142"], "error_ids": [long_id]}
    evaluation["instances"] = {long_id: {"status": "error", "detail": error}}
    (tmp_path / "eval" / "report.json").write_text(json.dumps(evaluation))
    result = cli("report", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines() if "│" in line]
    assert rows == [
        ["psf__requests-1142", "cost_limit", "0", "$0.0000", "resolved", ""],
        [long_id, "submitted", "0", "$0.5000", "—", error],
    ]
    page = cli("report", str(tmp_path), "--html", f"{tmp_path}/pages/")  # a folder yet to be made: report.html in it
    assert page.returncode == 0 and (tmp_path / "pages" / "report.html").is_file(), page.stderr
    bogus = cli("report", str(tmp_path), "--status", "bogus")  # no empty table for a status that does not exist
    assert (bogus.returncode, bogus.stdout) == (2, "")
    assert bogus.stderr.startswith("error: --status bogus: not an exit status; one of submitted, step_limit, ")


def test_batch_report_lists_instances_links_their_pages_and_filters(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    dataset, rows = build_dataset(tmp_path / "data", 3)
    model = write_script(tmp_path / "fix.yaml", ["grep -rn '# BUG' --include='*.py' .", FIX_COMMAND])
    config = write_config(tmp_path / "c.yaml")
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "agent": {"step_limit": 1}}))
    out = tmp_path / "out"
    for configs, only in (([short], "demo__calc"), ([config], "text|shapes")):
        options = BatchOptions(model=model, output=out, environment="local", config_files=configs)
        run_swebench(str(dataset), "test", options, filter_regex=only)
    ids = sorted(row["instance_id"] for row in rows)
    (out / "eval").mkdir()
    (out / "eval" / "report.json").write_text(json.dumps({"resolved_ids": ["demo__text-1"], "unresolved_ids": ids[:1]}))

    text = cli("report", str(out), "--unresolved")
    assert text.returncode == 0, text.stderr
    assert (
        "demo__calc-1" in text.stdout and "demo__text-1" not in text.stdout and "1 of 3 instances shown" in text.stdout
    )

    result = cli("report", str(out), "--html", str(tmp_path / "report.html"))
    assert result.returncode == 0, result.stderr
    browser.get((tmp_path / "report.html").as_uri())

    def visible() -> list[str]:
        return [r.get_attribute("data-status") + " " + text_of(r.find_element(By.TAG_NAME, "a"))
                for r in browser.find_elements(By.CSS_SELECTOR, "#rows tbody tr") if r.is_displayed()]  # fmt: skip

    assert visible() == ["step_limit demo__calc-1", "submitted demo__shapes-1", "submitted demo__text-1"]
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("submitted")
    assert visible() == ["submitted demo__shapes-1", "submitted demo__text-1"]
    Select(browser.find_element(By.ID, "filter-resolved")).select_by_value("yes")
    assert visible() == ["submitted demo__text-1"]
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-resolved")).select_by_value("unknown")
    assert visible() == ["submitted demo__shapes-1"]
    assert text_of(browser.find_element(By.ID, "shown-count")) == "1 of 3 shown"
    assert "1 resolved" in text_of(browser.find_element(By.ID, "totals"))
    browser.find_element(By.LINK_TEXT, "demo__shapes-1").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tree .node")) == 3
    assert browser.get_log("browser") == []


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


def test_attempts_side_by_side_and_decision_marks(tmp_path: Path) -> None:
    """Fields a trajectory carries for attempts (info.attempts, each operation's `attempt`) and for decisions (a
    denied permission, a review round, sampled candidates): each attempt in its own band, each decision its mark."""
    import re

    from llm_ide.inspector.load import load_run
    from llm_ide.inspector.page import run_page

    def op(attempt: int, node: int, parent: int | None, **extra: object) -> dict:
        params = {"command": f"step {attempt}.{node}"}
        return {"id": node, "parent_id": parent, "attempt": attempt, "action_type": "bash", "action_params": params,
                "observation": f"out {attempt}.{node}", **extra}  # fmt: skip

    operations = [
        op(1, 0, None), op(1, 1, 0, denied=True, lessons="navigator: not in the plan"), op(1, 2, 0),
        op(2, 0, None, candidates=[{"action_params": {"command": c}} for c in ("ls", "ls -la")]),
        op(2, 1, 0, review={"passed": False, "comment": "no test"}),
        op(2, 2, 1),
    ]  # fmt: skip
    attempts = [{"index": 1, "score": 3.0, "exit_status": "submitted"},
                {"index": 2, "score": 8.5, "chosen": True, "exit_status": "submitted"}]  # fmt: skip
    trajectory = tmp_path / "t.traj.json"
    trajectory.write_text(json.dumps({"format": "llm-ide-1", "info": {"exit_status": "submitted", "attempts": attempts},
                                      "operations": operations}))  # fmt: skip
    page = run_page(load_run(trajectory))
    marks = dict(re.findall(r'<g class="node ([^"]*)" data-key="(\d+:\d+)"', page)[i][::-1] for i in range(6))
    assert marks == {"1:0": "chain", "1:1": "failed denied", "1:2": "chain", "2:0": "chain sampled",
                     "2:1": "chain review", "2:2": "chain"}  # fmt: skip
    assert re.findall(r'<text class="band" x="[\d.]+" y="13">(attempt \d)</text>', page) == ["attempt 1", "attempt 2"]
    assert re.findall(r'class="attempt( chosen)?" data-attempt="(\d)"', page) == [("", "1"), (" chosen", "2")]
    assert "attempt 2 · score 8.5 · chosen" in page


def test_sampled_candidates_show_in_the_panel_and_the_text_tree(browser, tmp_path: Path) -> None:
    """A run with action sampling (k=3): the node that ran is marked sampled; its panel lists every candidate, the
    one that ran first marked, with the discriminator's reason; `inspect --full` lists them too."""
    from agent_script import BUGGY_FILES, TEST_COMMAND, act, reflect
    from agent_script import write_script as script_file
    from conftest import make_git_repo
    from selenium.webdriver.common.by import By

    from llm_ide.config import load_config
    from llm_ide.run.single import run_task

    view = act("Read the total.", "view", path="shop/cart.py", start_line=1, end_line=15)
    tests = act("Run the tests.", "bash", command=TEST_COMMAND)
    responses = [view, tests, view, "The tests say more.\n<choice>2</choice>", reflect(False, "Fails.")]
    responses += [act("Done.", "submit")] * 3
    settings = load_config("default", environment={"tools": []}, sampling={"k": 3})
    result = run_task(
        "Cart.total ignores quantities.",
        model=script_file(tmp_path / "script.yaml", responses),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="sampled",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
    )
    page = tmp_path / "page.html"
    assert cli("inspect", str(result.trajectory_path), "--html", str(page)).returncode == 0
    browser.get(page.as_uri())
    first = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:0"]')
    assert "sampled" in first.get_attribute("class").split()
    first.click()
    assert browser.find_element(By.ID, "panel-sampling").is_displayed()
    items = [text_of(item) for item in browser.find_elements(By.CSS_SELECTOR, "#panel-candidates li")]
    assert items[0].startswith("2× view ") and items[1].startswith("✓ ran · 1× bash ") and len(items) == 2
    assert text_of(browser.find_element(By.ID, "panel-choice")) == "ask_colleagues · 3 samples, 1 choosing call"
    assert "The tests say more." in text_of(browser.find_element(By.CSS_SELECTOR, "#panel-candidates pre"))

    text = cli("inspect", "--full", str(result.trajectory_path))
    assert text.returncode == 0, text.stderr
    assert "(sampled: 2 distinct of 3, ask_colleagues)" in text.stdout
    assert "· 2× view" in text.stdout and "✓ 1× bash" in text.stdout


def test_report_shows_evaluation_errors_in_their_own_column_and_total(tmp_path: Path) -> None:
    ids = ["a__x-1", "b__y-1", "c__z-1", "d__w-1"]
    statuses = {"instances": {i: {"exit_status": "submitted", "cost": 0.5} for i in ids}}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump(statuses))
    detail = "image swebench/sweb.eval.x86_64.c_1776_z-1:latest not found"
    report = {
        "resolved_ids": ["a__x-1"],
        "unresolved_ids": ["b__y-1"],
        "error_ids": ["c__z-1"],
        "empty_patch_ids": [],
        "instances": {"c__z-1": {"status": "error", "detail": detail}},
    }
    (tmp_path / "evaluations" / "preds.1").mkdir(parents=True)
    (tmp_path / "evaluations" / "preds.1" / "report.json").write_text(json.dumps(report))

    def report_rows(*args: str) -> tuple[dict[str, list[str]], str]:
        done = invoke("report", str(tmp_path), *args, env={**os.environ, "COLUMNS": "200"})
        assert (done.returncode, done.stderr) == (0, "")
        cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in done.stdout.splitlines() if "__" in line]
        return {row[0]: row[4:] for row in cells}, done.stdout.splitlines()[-1]

    rows, totals = report_rows()
    assert rows == {
        "a__x-1": ["resolved", ""],
        "b__y-1": ["not resolved", ""],
        "c__z-1": ["—", detail],
        "d__w-1": ["—", ""],
    }
    assert totals == (
        "4 of 4 instances shown; their total 0 steps, $2.0000, 1 resolved, 1 not resolved, 1 evaluation error"
    )
    assert report_rows("--unresolved") == (  # the totals of the rows shown (they were the batch's)
        {"b__y-1": ["not resolved", ""]},
        "1 of 4 instances shown; their total 0 steps, $0.5000, 0 resolved, 1 not resolved, 0 evaluation errors",
    )
    assert list(report_rows("--resolved")[0]) == ["a__x-1"]
    filtered = invoke("report", str(tmp_path), "--resolved", "--html", str(tmp_path / "resolved.html"))
    assert (filtered.returncode, filtered.stdout.split(" → ")[0]) == (0, "1 of 4 instances")
    assert (tmp_path / "resolved.html").read_text().count("data-resolved=") == 1

    shutil.rmtree(tmp_path / "evaluations")  # an empty table without a word, before
    refused = invoke("report", str(tmp_path), "--unresolved")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"error: --unresolved: no evaluation of {tmp_path} found"
        f" (llm-ide evaluate {tmp_path / 'preds.json'}, or --eval)\n"
    )
    (tmp_path / "evaluations" / "preds.1").mkdir(parents=True)
    (tmp_path / "evaluations" / "preds.1" / "report.json").write_text(json.dumps(report))

    page = tmp_path / "report.html"
    done = invoke("report", str(tmp_path), "--html", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert '<span class="resolved-error">1 evaluation error</span>' in html
    assert f'<td class="resolved-error">{detail}</td>' in html and html.count('data-resolved="error"') == 1
    (tmp_path / "pages").mkdir()  # a folder: report.html in it, as inspect's page (was "Is a directory")
    into = invoke("report", str(tmp_path), "--html", str(tmp_path / "pages"))
    assert (into.returncode, into.stdout.split(" → ")[1].split(" (")[0]) == (0, str(tmp_path / "pages" / "report.html"))
    assert (tmp_path / "pages" / "report.html").read_text() == html


HOSTILE = (
    "<!-- badges -->\n</script><script>document.title = 'pwned'</script>\nline\u2028separator\u2029 & &amp; <b>x</b>\n"
)


def test_any_text_of_a_run_round_trips_through_its_page(browser, tmp_path: Path) -> None:
    """Issue 32 §1: a README with `<!-- badges -->` broke the page's script (the tree drew, no node opened). An
    observation, a thought, a reflection and a prompt holding `<!--`, `</script>`, U+2028/U+2029 and `&` show exactly
    as recorded; nothing of them runs."""
    from selenium.webdriver.common.by import By

    repo = make_git_repo(tmp_path / "repo", {"README.md": HOSTILE})
    steps = [
        act("Read it <!-- here --> </script>.", "bash", command="cat README.md"),
        reflect(False, "Read \u2028 it."),
    ]
    model = agent_script.write_script(tmp_path / "s.yaml", [*steps, act("Done & </script>.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    out = tmp_path / "out"
    args = ["--repo", str(repo), "--task", HOSTILE, "--model", model, "--config", str(tmp_path / "c.yaml")]
    run = cli("run", *args, "--output", str(out), "--thread-id", "h")
    assert run.returncode == 0, run.stderr
    data = load_trajectory(out / "h.traj.json")
    operations = data["operations"]
    assert all(part in operations[0]["observation"] for part in ("<!-- badges -->", "</script>", "\u2028", "&amp;"))
    page = tmp_path / "h.html"
    assert cli("inspect", str(out / "h.traj.json"), "--html", str(page)).returncode == 0
    browser.get(page.as_uri())
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree .node")
    assert len(nodes) == len(operations) == 2
    for node, operation in zip(nodes, operations, strict=True):
        node.click()
        assert text_of(browser.find_element(By.ID, "panel-observation")) == operation["observation"]
        assert text_of(browser.find_element(By.ID, "panel-thought")) == operation["thought"]
        for call in browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call"):
            index = int(text_of(call.find_element(By.CSS_SELECTOR, "summary")).split()[0].lstrip("#"))
            recorded = next(c for c in data["model_calls"] if c["index"] == index)
            assert text_of(call.find_element(By.CSS_SELECTOR, "pre.prompt")) == recorded["prompt"]
            assert HOSTILE.strip() in recorded["prompt"]
    assert browser.title != "pwned" and browser.get_log("browser") == []


@pytest.mark.parametrize(
    ("instance_id", "trajectory", "said"),
    [
        ("../../x", None, "instance id '../../x': a path, not a name"),
        ("{elsewhere}/x", None, "a path, not a name"),
        ("..", None, "instance id '..': a path, not a name"),
        ("ok__id-1", "{elsewhere}/t.traj.json", "ok__id-1: its trajectory {elsewhere}/t.traj.json is outside"),
        ("ok__id-1", "../../elsewhere/t.traj.json", "its trajectory ../../elsewhere/t.traj.json is outside"),
    ],
)
def test_ids_and_paths_from_a_batch_never_leave_its_folder(
    demo_run, tmp_path: Path, instance_id: str, trajectory: str | None, said: str
) -> None:
    """Issue 32 §2: an instance id `../../x` or an absolute path in exit_statuses.yaml made `report --html` write
    x.html there, then crash. Now: one line, exit 2, nothing written anywhere."""
    _, page = demo_run
    elsewhere = tmp_path / "elsewhere"
    batch = tmp_path / "a" / "b" / "batch"
    instance_id, said = instance_id.format(elsewhere=elsewhere), said.format(elsewhere=elsewhere)
    info = {"exit_status": "submitted"} | ({"trajectory": trajectory.format(elsewhere=elsewhere)} if trajectory else {})
    batch.mkdir(parents=True)
    (batch / "exit_statuses.yaml").write_text(yaml.safe_dump({"instances": {instance_id: info}}))
    demo = page.with_name("d") / "run" / "demo.traj.json"
    for folder in {(batch / instance_id).resolve(), elsewhere}:  # real trajectories where the paths lead
        folder.mkdir(parents=True, exist_ok=True)
        for name in (f"{Path(instance_id).name}.traj.json", "t.traj.json"):
            (folder / name).write_bytes(demo.read_bytes())
    before = sorted(tmp_path.rglob("*"))
    done = cli("report", str(batch), "--html", str(tmp_path / "out" / "report.html"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: {batch / 'exit_statuses.yaml'}: ") and said in done.stderr
    assert sorted(tmp_path.rglob("*")) == before


def test_a_report_says_unpriced_for_a_run_of_no_price_and_for_a_part_of_one(tmp_path: Path) -> None:
    """A batch's rows said a dollar figure whatever the models' prices: $0.0000 for a run whose model had none (its
    cost unknown), and a run whose navigator had none said its driver's cost as if it were all."""
    prices = {"gpt-test": {"input": 1.0, "output": 1.0}}
    runs = {
        "a__x-1": ("gpt-test", {}, "$0.5000"),
        "b__y-1": ("gpt-free", {}, "unpriced"),
        "c__z-1": ("gpt-test", {"mode": "model", "model": "gpt-free"}, "$0.5000 + unpriced"),
    }
    statuses = {"instances": {i: {"exit_status": "submitted", "cost": 0.5 * (i != "b__y-1")} for i in runs}}
    (tmp_path / "exit_statuses.yaml").write_text(yaml.safe_dump(statuses))
    for instance, (model, navigator, _) in runs.items():
        config = {"model": {"prices": prices}, "navigator": navigator}
        (tmp_path / instance).mkdir()
        info = {"run_id": instance, "model": model, "config": config, "n_operations": 1}
        (tmp_path / instance / f"{instance}.traj.json").write_text(json.dumps({"info": info, "operations": []}))
    done = invoke("report", str(tmp_path), env={**os.environ, "COLUMNS": "200"})
    assert (done.returncode, done.stderr) == (0, "")
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in done.stdout.splitlines() if "__" in line]
    assert {row[0]: row[3] for row in cells} == {instance: said for instance, (_, _, said) in runs.items()}
    assert done.stdout.splitlines()[-1] == "3 of 3 instances shown; their total 3 steps, $1.0000 + unpriced"
    page = tmp_path / "report.html"
    assert invoke("report", str(tmp_path), "--html", str(page)).returncode == 0
    assert all(f">{said}</td>" in page.read_text() for _, _, said in runs.values())


def test_an_unpriced_runs_panel_says_its_nodes_and_calls_unpriced_not_zero(browser, tmp_path: Path) -> None:
    """A model without a price, served on loopback: the page's header said unpriced, its panel `cost $0.0000`; its
    tokens, what such a run is measured by, were said nowhere on the page."""
    from selenium.webdriver.common.by import By

    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--thread-id", "t"]
    with OpenAIServer(replies=agent_script.single_call(agent_script.FIX_SCRIPT)) as server:
        done = cli(*run, "--model", "local/free-model", "--base-url", server.url, "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert cli("inspect", str(tmp_path / "out" / "t.traj.json"), "--html", str(tmp_path / "p.html")).returncode == 0
    browser.get((tmp_path / "p.html").as_uri())
    assert text_of(browser.find_element(By.ID, "cost")) == "unpriced"
    said = re.search(r"^submitted after \d+ model calls, (\d+\+\d+ tokens), unpriced$", done.stdout, re.M)
    assert said is not None and text_of(browser.find_element(By.ID, "tokens")) == said.group(1)  # (none: no figure)
    for node in browser.find_elements(By.CSS_SELECTOR, "#tree .node"):
        node.click()
        facts = text_of(browser.find_element(By.ID, "panel-facts"))
        calls = [text_of(call) for call in browser.find_elements(By.CSS_SELECTOR, "#panel-calls summary")]
        assert "cost unpriced" in facts and calls and all(call.endswith(" out, unpriced") for call in calls), calls
    assert browser.get_log("browser") == []


@pytest.fixture(scope="module")
def attempts_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run of two attempts of three steps each, reviewed, neither accepted, the chooser's pick (its trajectory), and
    its page."""
    folder = tmp_path_factory.mktemp("attempts")
    repo = make_git_repo(folder / "repo", attempts_scripts.FILES)
    scripts = [attempts_scripts.attempt_script(fix) for fix in (attempts_scripts.WRONG, attempts_scripts.RIGHT)]
    reviews = [attempts_scripts.review(2, "no"), attempts_scripts.review(9, "ok")]
    model = attempts_scripts.scripts(folder / "s", scripts, reviews, [attempts_scripts.choice(2, "it fixes it")])
    settings = load_config("default", environment={"tools": []}, attempts={"max": 2, "accept_score": 10})
    out = folder / "out"
    result = run_attempts(attempts_scripts.TASK, model=model, settings=settings, output_dir=out, run_id="T", repo=repo)
    assert cli("inspect", str(result.trajectory_path), "--html", str(folder / "p.html")).returncode == 0
    return result.trajectory_path, (folder / "p.html").read_text()


def test_a_run_of_attempts_charts_each_attempts_steps_apart(attempts_run: tuple[Path, str]) -> None:
    """Each chart bar summed the same step of both attempts (`step 1: 4,874`, no prompt's size), and the chooser's call
    was a `step 3` bar before them."""
    trajectory, page = attempts_run
    chart = re.search(r"<figcaption>prompt characters .*?</svg>", page, re.S)
    assert chart is not None
    shown = re.findall(r"<title>([^<]*): ([\d,]+)</title>", chart.group(0))
    sums: dict[str, int] = {}
    for call in load_trajectory(trajectory)["model_calls"]:  # a review: with its attempt's last step
        key = f"attempt {call['attempt']}, step {call.get('step', 2) + 1}" if call["attempt"] else "choice"
        sums[key] = sums.get(key, 0) + call["prompt_chars"]
    assert shown == [(key, f"{chars:,}") for key, chars in sums.items()]
    assert [key for key, _ in shown] == [f"attempt {a}, step {s}" for a in (1, 2) for s in (1, 2, 3)] + ["choice"]


def test_a_run_of_attempts_names_where_its_code_context_is(attempts_run: tuple[Path, str]) -> None:
    """The run's own trajectory holds no code context, each attempt's does: the page said the run's held no chunk."""
    trajectory, page = attempts_run
    own = [attempt["trajectory"] for attempt in load_trajectory(trajectory)["info"]["attempts"]]
    assert all(load_trajectory(trajectory.parent / path)["code_context"] for path in own)
    said = f"each attempt's code context is in its own trajectory ({', '.join(own)}, beside this run's)."
    assert said in page and "held no chunk" not in page


def test_a_page_says_the_discarded_calls_its_cost_counts(browser, tmp_path: Path) -> None:
    """A stream cut mid-reply, asked again: the cost in the header counts the cut call, and the header said only the
    calls of the run's history (`4 model calls`, the console's `(+1 discarded)` nowhere). Then the header said it, and
    neither the calls table nor the first operation's calls showed it: 5 calls said, 4 rows. Both show it, marked."""
    from selenium.webdriver.common.by import By

    replies = agent_script.single_call(agent_script.FIX_SCRIPT)
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    prices = {"gpt-test": {"input": 1.0, "output": 2.0}}
    model = {"stream": True, "retry_base_delay": 0.0, "max_retries": 3, "prices": prices}
    (config := tmp_path / "c.yaml").write_text(json.dumps({"environment": {"tools": []}, "model": model}))
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(config)]
    with OpenAIServer(replies=[Reply(replies[0], cut=3), *replies]) as server:
        done = cli(*run, "--model", "gpt-test", "--base-url", server.url, "--output", str(tmp_path), "--thread-id", "t")
    assert f"after {len(replies)} model calls (+1 discarded)" in done.stdout, done.stdout + done.stderr
    assert cli("inspect", str(tmp_path / "t.traj.json"), "--html", str(tmp_path / "p.html")).returncode == 0
    calls = re.search(r"<span[^>]*>(\d+ model calls[^<]*)</span>", (tmp_path / "p.html").read_text())
    assert calls is not None and calls.group(1) == f"{len(replies)} model calls (+1 discarded)"
    recorded = load_trajectory(tmp_path / "t.traj.json")["model_calls"]
    assert [call["index"] for call in recorded] == list(range(len(replies)))  # the cut call is in the log alone

    text = cli("inspect", str(tmp_path / "t.traj.json"))
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.stdout.splitlines() if "│ act" in line]
    assert [(row[0], row[-1]) for row in rows] == [("0", "its reply was cut off mid-way; asked again")] + [
        (str(index), "") for index in range(len(replies))
    ]
    assert rows[0][4] != rows[1][4] and "discarded (paid, not in the run's history)" in text.stdout
    browser.get((tmp_path / "p.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, '#tree .node[data-key="0:0"]').click()
    shown = [text_of(c) for c in browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call summary")]
    assert len(shown) == 2 and shown[0].startswith("#0 act: ") and shown[1].startswith("#0 act: ")
    why = "its reply was cut off mid-way; asked again"
    assert shown[0].endswith(f" · discarded (paid, not in the run's history): {why}")
    assert "discarded" not in shown[1] and browser.get_log("browser") == []
    costs = re.findall(r"cost \$([\d.]+)", text_of(browser.find_element(By.ID, "panel-facts")))
    assert float(costs[0]) == pytest.approx(recorded[0]["cost"] + float(rows[0][5][1:]), abs=1e-4)  # both paid


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
    run = ["run", "--repo", str(repo), "--task", "Read.", "--model", script, "--thread-id", "t", "--step-limit", "50"]
    assert cli(*run, "--output", str(tmp_path / "out")).returncode == 0
    command = [sys.executable, "-m", "llm_ide", "inspect", str(tmp_path / "out" / "t.traj.json")]
    status, shown = in_terminal(command, {**os.environ, "COLUMNS": "80", "TERM": "dumb", "LLM_IDE_CONFIG": "off"})
    assert status == 0, shown
    drawn = re.findall(r"(✗ )?\[(\d+)\] (\w+)", re.sub(r"\x1b\[[0-9;]*m", "", shown.decode()))
    assert [int(number) for _, number, _ in drawn] == list(range(40))
    assert [number for failed, number, _ in drawn if failed] == ["9", "19", "29"]


@pytest.mark.parametrize("every", [0, 2])
def test_the_code_context_outlines_the_chunks_each_steps_prompt_held(tmp_path: Path, every: int) -> None:
    """A chunk's cell was outlined whenever its score was above the threshold, as if each prompt rendered the context
    anew: the prompts build on a snapshot renewed now and then (here never, or every 2 operations), and a demo's five
    prompts, all 'No code in context yet', had every cell outlined."""
    script = agent_script.write_script(tmp_path / "s.yaml", agent_script.FIX_SCRIPT)
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "memory": {"snapshot_every": every}}))
    run = ["run", "--repo", str(repo), "--task", "Fix Cart.total.", "--model", script, "--config", str(config)]
    assert cli(*run, "--thread-id", "t", "--output", str(tmp_path / "out")).returncode == 0
    assert cli("inspect", str(tmp_path / "out" / "t.traj.json"), "--html", str(tmp_path / "p.html")).returncode == 0
    data = json.loads(re.findall(r'<script id="run-data" [^>]*>(.*?)</script>', (tmp_path / "p.html").read_text())[0])
    calls = load_trajectory(tmp_path / "out" / "t.traj.json")["model_calls"]
    prompts = {call["step"]: call["prompt"] for call in calls}
    contexts = [prompts[step].split("## Code Context (as of ")[-1].split("\n## ")[0] for step in sorted(prompts)]
    outlined = {(chunk["file"], tuple(chunk["lines"])): chunk["shown"] for chunk in data["chunks"]}

    def held(file: str, lines: tuple[int, ...], context: str) -> bool:
        return f"### File: `{file}`" in context and any(f"{line:>6}\t" in context for line in lines)

    assert outlined == {key: [held(*key, context) for context in contexts] for key in outlined}
    assert any(map(any, outlined.values())) == bool(every)


def test_the_node_a_keyboard_reaches_is_drawn_focused(browser, demo_run: tuple[dict, Path]) -> None:
    """Tab reaches the tree's nodes and Enter opens one, but the node focused looked as any other (no outline); the
    references in a thought were links no keyboard could reach."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(demo_run[1].as_uri())
    look = "const s = getComputedStyle(document.querySelector(`#tree .node[data-key='${arguments[0]}'] .row`));"
    look += "return [s.fill, s.stroke];"
    unfocused = browser.execute_script(look, "0:0")
    for _ in range(10):
        if browser.execute_script("return document.activeElement.dataset.key") == "0:0":
            break
        ActionChains(browser).send_keys(Keys.TAB).perform()
    assert browser.execute_script(look, "0:0") != unfocused == browser.execute_script(look, "0:1")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    assert text_of(browser.find_element(By.ID, "panel-title")) == "[0] view"
    browser.execute_script("document.querySelector('#panel-thought a.ref').focus()")  # its thought's reference
    assert browser.execute_script("return document.activeElement.className") == "ref"  # (a link without a target: no)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    highlighted = browser.find_elements(By.CSS_SELECTOR, "#heat tr.highlight th")
    assert [text_of(h) for h in highlighted] == ["calc/stats.py:10-17 median"]


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


def reproduction_run(tmp_path: Path) -> Path:
    """Two reproduction tests written (one dropped) before the first step, their calls recorded at step 0; then a fix
    in three steps. Its trajectory, and its page beside it (p.html)."""
    shows_nothing = "import calc\nprint('double(1) =', calc.double(1))\nprint('Issue resolved')\n"
    script = [reproduction_scripts.written(test) for test in (shows_nothing, reproduction_scripts.REPRO)]
    script += reproduction_scripts.fix_script(reproduction_scripts.RIGHT)
    model = agent_script.write_script(tmp_path / "m.yaml", script)
    repo = make_git_repo(tmp_path / "repo", reproduction_scripts.FILES)
    settings = reproduction_scripts.config(generate=True)
    task = reproduction_scripts.TASK
    result = run_task(task, model=model, settings=settings, output_dir=tmp_path / "out", run_id="G", repo=repo)
    assert cli("inspect", str(result.trajectory_path), "--html", str(tmp_path / "p.html")).returncode == 0
    return result.trajectory_path


def test_the_reproduction_tests_written_before_the_first_step_have_their_own_bar(tmp_path: Path) -> None:
    """The charts' `step 1` bar summed the reproduction tests' prompts with the first step's, a size no prompt had."""
    trajectory = reproduction_run(tmp_path)
    chart = re.search(r"<figcaption>prompt characters .*?</svg>", (tmp_path / "p.html").read_text(), re.S)
    assert chart is not None
    calls = load_trajectory(trajectory)["model_calls"]
    written = sum(call["prompt_chars"] for call in calls if call["kind"] == "write_reproduction")
    steps = [(f"step {call['step'] + 1}", f"{call['prompt_chars']:,}") for call in calls if call["kind"] == "act"]
    shown = re.findall(r"<title>([^<]*): ([\d,]+)</title>", chart.group(0))
    assert shown == [("reproduction tests written", f"{written:,}"), *steps] and written > 0


def test_a_batch_of_one_one_step_run_says_its_counts_in_the_singular(tmp_path: Path) -> None:
    """`report --html` said `(+ 1 inspector pages)`, its page `1 instances`, `1 steps`, the run's page `1 operations`,
    `1 model calls`; the text report `1 of 1 instances shown; their total 1 steps`."""
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    model = agent_script.write_script(tmp_path / "s.yaml", [act("Nothing to do.", "submit")])
    batch = tmp_path / "batch"
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    run = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    assert cli(*run, "--output", str(batch / "a__x-1"), "--thread-id", "a__x-1").returncode == 0
    statuses = {"instances": {"a__x-1": {"exit_status": "submitted", "cost": 0.0}}}
    (batch / "exit_statuses.yaml").write_text(yaml.safe_dump(statuses))
    (batch / "eval").mkdir()
    (batch / "eval" / "report.json").write_text(json.dumps({"resolved_ids": [], "error_ids": ["a__x-1"]}))
    text = cli("report", str(batch))
    assert text.returncode == 0, text.stderr
    said = "1 of 1 instance shown; their total 1 step, $0.0000, 0 resolved, 0 not resolved, 1 evaluation error"
    assert text.stdout.splitlines()[-1] == said
    done = cli("report", str(batch), "--html", str(tmp_path / "out" / "report.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"1 of 1 instance → {tmp_path / 'out' / 'report.html'} (+ 1 inspector page)"
    totals = re.findall(r"<span[^>]*>(\d+ [a-z ]+)</span>", (tmp_path / "out" / "report.html").read_text())
    assert totals[:2] == ["1 instance", "0 resolved"] and {"1 evaluation error", "1 step"} <= set(totals)
    page = (tmp_path / "out" / "report_pages" / "a__x-1.html").read_text()
    facts = re.findall(r"<span(?: id=\"calls\")?>(\d+ [a-z ]+)</span>", page)
    assert facts == ["1 operation", "1 model call"]


def test_an_operation_the_navigator_denied_says_so_not_an_exit_code(browser, tmp_path: Path) -> None:
    """The navigator refused an edit before it ran: its panel said `exit code -1` (the placeholder of a command that
    never ran), the text tree `(failed alternative)`, neither that nor why it was denied."""
    from agent_script import CART_FIX, CART_SUBMIT, CART_VIEW
    from selenium.webdriver.common.by import By

    cheat = act("Make the test expect 11.5.", "edit", path="tests/test_cart.py", old="16.0", new="11.5")
    reason = "Changing the test hides the bug: fix Cart.total instead."
    navigator = ['<view>{"path": "shop/cart.py"}</view>', "<plan>1. Fix Cart.total.</plan>"]
    navigator += [f"<deny>{reason}</deny>", "<approve>As planned.</approve>"]
    driver = [CART_VIEW, reflect(False, "Sums price only."), cheat, CART_FIX, reflect(False, "Fixed."), CART_SUBMIT]
    nav = {"mode": "model", "model": agent_script.write_script(tmp_path / "n.yaml", navigator)}
    settings = load_config("default", environment={"tools": []}, navigator=nav, agent={"single_call": False})
    model = agent_script.write_script(tmp_path / "d.yaml", driver)
    repo = make_git_repo(tmp_path / "repo", agent_script.BUGGY_FILES)
    result = run_task("Fix Cart.total.", model=model, settings=settings, output_dir=tmp_path, run_id="t", repo=repo)
    operations = load_trajectory(result.trajectory_path)["operations"]
    assert operations[1]["returncode"] == -1 and operations[1]["denied"] == {"reason": reason, "by": "model"}
    said = f"denied by the navigator (model): {reason}"

    text = cli("inspect", str(result.trajectory_path))
    assert text.returncode == 0, text.stderr
    denied = next(line for line in text.stdout.splitlines() if "[1] edit" in line)
    assert denied.endswith(f"(not run: {said})") and "✗" in denied and "(failed alternative)" not in denied
    assert "not run" not in text.stdout.replace(denied, "")
    assert cli("inspect", str(result.trajectory_path), "--html", str(tmp_path / "p.html")).returncode == 0
    browser.get((tmp_path / "p.html").as_uri())
    facts = {}
    for node in browser.find_elements(By.CSS_SELECTOR, "#tree .node"):
        node.click()
        facts[node.get_attribute("data-key")] = text_of(browser.find_element(By.ID, "panel-facts"))
    assert facts["0:1"].endswith(f" · not run: {said}") and "exit code" not in facts["0:1"]
    assert all("not run" not in said for key, said in facts.items() if key != "0:1")
    assert "exit code 0" in facts["0:0"] and browser.get_log("browser") == []


def test_a_mini_swe_agent_pages_header_says_the_tokens_its_trajectory_holds(shared_dir: Path, tmp_path: Path) -> None:
    """mini-swe-agent keeps each reply's usage (litellm's): its page said no tokens (its panel each call's); where
    some replies lack it, the tokens are said as those of the calls that had it, and with none, not at all."""
    source = shared_dir / "data" / "trajectories" / "mini-swe-agent" / "pallets__flask-5014.traj.json"
    data = json.loads(source.read_text())
    replies = [m for m in data["messages"] if m["role"] == "assistant"]
    usages = [m["extra"]["response"]["usage"] for m in replies]
    assert len(replies) == data["info"]["model_stats"]["api_calls"] == 20

    def header(trajectory: Path) -> str | None:
        page = trajectory.with_suffix(".html")
        assert cli("inspect", str(trajectory), "--html", str(page)).returncode == 0
        found = re.search(r'<span id="tokens">([^<]*)</span>', page.read_text())
        return found.group(1) if found else None

    sums = [sum(u[key] for u in usages) for key in ("prompt_tokens", "completion_tokens")]
    assert header(source) == f"{sums[0]}+{sums[1]} tokens" and sums[0] > 0
    for message in replies[5:]:
        del message["extra"]["response"]["usage"]
    (part := tmp_path / "part.traj.json").write_text(json.dumps(data))
    sums = [sum(u[key] for u in usages[:5]) for key in ("prompt_tokens", "completion_tokens")]
    assert header(part) == f"{sums[0]}+{sums[1]} tokens (the usage of 5 of 20 calls)"
    for message in replies[:5]:
        del message["extra"]["response"]["usage"]
    (none := tmp_path / "none.traj.json").write_text(json.dumps(data))
    assert header(none) is None


def test_the_calls_that_wrote_the_reproduction_tests_are_no_operations(browser, tmp_path: Path) -> None:
    """The two calls that wrote the reproduction tests, before the first step, were drawn under operation [0] as if
    part of it (its panel: three calls, its cost theirs too); they are apart, before the tree."""
    from selenium.webdriver.common.by import By

    calls = load_trajectory(reproduction_run(tmp_path))["model_calls"]
    kinds = {call["index"]: call["kind"] for call in calls}
    assert list(kinds.values()) == ["write_reproduction"] * 2 + ["act"] * 3
    browser.get((tmp_path / "p.html").as_uri())

    def shown(calls: list) -> list[str]:
        return [text_of(call.find_element(By.CSS_SELECTOR, "summary")).split(":")[0] for call in calls]

    for key, index in (("0:0", 2), ("0:1", 3), ("0:2", 4)):
        browser.find_element(By.CSS_SELECTOR, f'#tree .node[data-key="{key}"]').click()
        assert shown(browser.find_elements(By.CSS_SELECTOR, "#panel-calls details.call")) == [f"#{index} act"]
    before = browser.find_element(By.ID, "before-steps")
    said = "Reproduction tests written before the first step: 2 model calls"
    assert text_of(before.find_element(By.CSS_SELECTOR, "summary")) == said
    before.find_element(By.CSS_SELECTOR, "summary").click()
    written = before.find_elements(By.CSS_SELECTOR, "details.call")
    assert shown(written) == ["#0 write_reproduction", "#1 write_reproduction"]
    for box, call in zip(written, calls, strict=False):
        assert text_of(box.find_element(By.CSS_SELECTOR, "pre.response")) == call["response"]
    assert browser.get_log("browser") == []
