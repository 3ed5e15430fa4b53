"""A batch over pairs and settings: progress, a row per pair, the summary per setting (summary.json), and `coop
evaluate` over the folder of runs; the Python API's summary of the same results."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from agent_script import act
from conftest import wait_for
from coop_support import scripts
from in_process import invoke
from test_coop_evaluate import build_task
from test_coop_messages import pair_scripts

from llm_ide.config import load_config
from llm_ide.coop import collect, load_task, run_pairs, summarize
from llm_ide.coop.run import CoopRun
from llm_ide.coop.settings import load_coop_settings


@pytest.mark.slow
def test_batch_over_pairs_and_settings_summarizes_pass_and_conflict_rates(tmp_path: Path) -> None:
    """Agent 2 keeps out of core.py only when agent 1's message reaches it: coop merges cleanly, the ablation
    conflicts; feature 3 (`five`) is never implemented, so pair 1,3 fails its tests in both settings."""
    task, source = build_task(tmp_path)
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}}))
    (tmp_path / "coop.yaml").write_text(yaml.safe_dump({"execution": {"lockstep": True}}))
    out = tmp_path / "out"
    command = [
        "coop",
        "run",
        str(task),
        "--pairs",
        "1,2 1,3",
        "--setting",
        "coop,coop_ablation",
        "--model",
        pair_scripts(tmp_path / "scripts"),
        "--repo-source",
        str(source),
        "-o",
        str(out),
        "--config",
        str(tmp_path / "agent.yaml"),
        "--coop-config",
        str(tmp_path / "coop.yaml"),
    ]
    done = invoke(*command, env={**os.environ, "COLUMNS": "160"})
    assert done.returncode == 0, done.stdout + done.stderr
    for line in (
        "pair 1,2 coop k=0: clean, both pass",
        "pair 1,3 coop k=0: clean, not both pass",
        "pair 1,2 coop_ablation k=0: conflicts, not both pass",
        "pair 1,3 coop_ablation k=0: conflicts",
    ):
        assert line in done.stdout, done.stdout
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("│ ") and "/" in line}  # fmt: skip
    assert rows == {
        "coop": ["2", "1/2 (50%)", "0/2 (0%)", "0"],
        "coop_ablation": ["2", "0/2 (0%)", "2/2 (100%)", "0"],
        "all": ["4", "1/4 (25%)", "2/4 (50%)", "0"],
    }
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["total"]["pass_rate"], summary["total"]["conflict_rate"]) == (0.25, 0.5)
    assert summarize(collect(out)).as_dict() == summary
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == sorted(f"demo_task7_f1_f{j}_{s}_k0" for s in ("coop", "coop_ablation") for j in (2, 3))
    for folder in folders:
        graded = json.loads((out / folder / "eval.json").read_text())
        assert set(graded["seconds"]) == {"planning", "execution", "evaluation"}
        conflicted = "ablation" in folder  # graded as a conflict, then merged with the union strategy and tested
        assert (graded["merge"]["status"], graded["merge"]["strategy"]) == (
            ("conflicts", "union") if conflicted else ("clean", "naive"))  # fmt: skip
        assert (graded["merge"]["conflict_sections"] > 0) is conflicted

    (out / "demo_task7_f1_f2_coop_k0" / "eval.json").unlink()  # graded again by `coop evaluate` over the folder
    again = invoke("coop", "evaluate", str(out), env={**os.environ, "COLUMNS": "160"})
    assert again.returncode == 0, again.stdout + again.stderr
    assert "4 pairs graded" in again.stdout and "2/4 (50%)" in again.stdout
    assert json.loads((out / "demo_task7_f1_f2_coop_k0" / "eval.json").read_text())["both_passed"] is True
    assert json.loads((out / "summary.json").read_text()) == summary


def test_a_single_setting_counts_its_one_feature_and_never_says_both_pass() -> None:
    """`single` implements the pair's first feature alone: its result says whether that one passes (`passed`), not
    `both_passed` (it said both passed, and counted so, for a feature never implemented)."""
    from rich.console import Console

    from llm_ide.cli.coop_batch import pairs_table, summary_table

    single = {"setting": "single", "k": 0, "pair": [1, 2], "feature1": {"passed": True, "tests_passed": 2},
              "passed": True, "merge": None}  # fmt: skip
    coop = {"setting": "coop", "k": 0, "pair": [1, 2], "feature1": {"passed": True, "tests_passed": 2},
            "feature2": {"passed": False, "tests_passed": 0}, "both_passed": False,
            "merge": {"status": "clean"}}  # fmt: skip
    summary = summarize([single, coop])
    assert (summary.by_setting["single"].passed, summary.by_setting["single"].graded) == (1, 1)
    assert (summary.total.passed, summary.total.graded, summary.total.merged) == (1, 2, 1)
    console = Console(width=200, record=True)
    console.print(pairs_table([single, coop]))
    console.print(summary_table(summary))
    text = console.export_text()
    rows = [line for line in text.splitlines() if line.startswith("│ 1,2")]
    assert [row.split("│")[6].strip() for row in rows] == ["—", "no"]  # the "both" column
    assert "pass rate (both features; single: one)" in text


def test_the_live_line_shows_each_agents_step_and_the_command_it_is_running() -> None:
    """The bar's line says what each agent of the pair is doing now: its last step, or the command under way with its
    time so far (as the run's `command` events tell it); a command's end leaves the line to the step that follows."""
    from io import StringIO

    from rich.console import Console
    from rich.progress import Progress

    from llm_ide.cli.coop_batch import PairProgress
    from llm_ide.environments.live import CommandProgress
    from llm_ide.run.outputs import RunEvent

    progress = Progress(console=Console(file=StringIO()))
    live = PairProgress(progress, total=1)
    live.begin("pair 1,2 coop k=0")
    said = []
    events = [
        ("1", RunEvent("agent1", "step", step=1, action="view src/a.py")),
        ("2", RunEvent("agent2", "command", step=1, command=CommandProgress("start", "pytest -q tests"))),
        ("2", RunEvent("agent2", "command", step=1, command=CommandProgress("output", "pytest -q tests", 12.4))),
        ("2", RunEvent("agent2", "command", step=1, command=CommandProgress("end", "pytest -q tests", 13.0, (), 1))),
        ("2", RunEvent("agent2", "phase", phase="warning: slow")),
        ("2", RunEvent("agent2", "step", step=1, action="bash pytest -q tests\x1b[31m")),
    ]
    for agent, event in events:
        live.event(agent, event)
        said.append(live.line().removeprefix("pair 1,2 coop k=0  "))
    seconds = [[int(n) for n in re.findall(r"\((\d+) s\)", line)] for line in said]  # they go on while we look
    assert [re.sub(r"\(\d+ s\)", "(N s)", line) for line in said] == [
        "agent 1 step 1: view src/a.py",
        "agent 1 step 1: view src/a.py | agent 2 step 1: running pytest -q tests (N s)",
        "agent 1 step 1: view src/a.py | agent 2 step 1: running pytest -q tests (N s)",
        "agent 1 step 1: view src/a.py | agent 2 step 1: running pytest -q tests (N s)",
        "agent 1 step 1: view src/a.py | agent 2 step 1: running pytest -q tests (N s)",
        "agent 1 step 1: view src/a.py | agent 2 step 1: bash pytest -q tests",
    ]
    assert seconds[1][0] < 12 <= min(seconds[2] + seconds[3] + seconds[4])  # counted from the 12.4 s its output told
    live.event("1", RunEvent("agent1", "command", step=2, command=CommandProgress("start", "sleep 30")))
    # a command that prints nothing: its seconds go on all the same (they stayed at 0 s)
    wait_for(lambda: "running sleep 30 (0 s)" not in live.line(), 60, "the silent command's seconds to go on")
    rest = r"running sleep 30 \([1-9]\d* s\) \| agent 2 step 1: bash pytest -q tests"
    assert re.fullmatch(rf"pair 1,2 coop k=0  agent 1 step 2: {rest}", live.line()), live.line()


def test_evaluating_a_folder_keeps_an_unfinished_pair_counted_as_an_error(tmp_path: Path) -> None:
    """Agent 2's script runs out: the batch's summary counts 1 pair, 1 error; `coop evaluate` over the folder kept
    neither (it rewrote summary.json with 0 pairs, 0 errors), only saying "1 unfinished" on the console."""
    task, source = build_task(tmp_path)
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}}))
    model = scripts(tmp_path / "scripts", plan_1=[act("Done.", "agreement_reached", plan="three()")],
                    plan_2=[act("Done.", "agreement_reached", plan="four()")], run_1=[act("Submit.", "submit")],
                    run_2=[act("Look.", "bash", command="ls")])  # fmt: skip
    out = tmp_path / "out"
    args = ("--model", model, "--repo-source", str(source), "-o", str(out), "--config", str(tmp_path / "agent.yaml"))
    done = invoke("coop", "run", str(task), "--pair", "1,2", *args)
    assert done.returncode == 1 and "ran out of responses" in done.stdout, done.stdout + done.stderr
    ran = json.loads((out / "summary.json").read_text())
    assert (ran["total"]["pairs"], ran["total"]["errors"]) == (1, 1)
    assert summarize(collect(out)).as_dict() == ran

    again = invoke("coop", "evaluate", str(out), env={**os.environ, "COLUMNS": "200"})
    assert again.returncode == 1, again.stdout + again.stderr  # as `coop run` exits (it exited 0)
    assert json.loads((out / "summary.json").read_text()) == ran
    assert "0 pairs graded, 1 unfinished" in again.stdout
    assert "patch_agent2.patch missing" in again.stdout


def test_evaluating_a_folder_counts_the_pairs_a_stopped_batch_never_started(tmp_path: Path) -> None:
    """A batch of two pairs stopped (Ctrl-C) before its second began: `coop evaluate` over its folder counted only the
    first (the second has no folder) and exited 0."""
    task, source = build_task(tmp_path)
    model = scripts(tmp_path / "scripts", plan_1=[act("Done.", "agreement_reached", plan="three()")],
                    plan_2=[act("Done.", "agreement_reached", plan="four()")], run_1=[act("Submit.", "submit")],
                    run_2=[act("Submit.", "submit")])  # fmt: skip

    def stopped_at_the_second(run: CoopRun) -> None:
        if tuple(run.pair) == (1, 3):
            raise KeyboardInterrupt

    out, settings = tmp_path / "out", load_config("default", environment={"tools": []})
    with pytest.raises(KeyboardInterrupt):
        run_pairs(load_task(task), [(1, 2), (1, 3)], ["coop"], model=model, repo_source=source, output=out,
                  settings=settings, coop=load_coop_settings(), on_pair=stopped_at_the_second)  # fmt: skip
    assert [path.name for path in out.iterdir() if path.is_dir()] == ["demo_task7_f1_f2_coop_k0"]
    again = invoke("coop", "evaluate", str(out), env={**os.environ, "COLUMNS": "200"})
    assert again.returncode == 1 and "1 pair graded, 1 unfinished" in again.stdout, again.stdout + again.stderr
    summary = json.loads((out / "summary.json").read_text())["total"]
    assert (summary["pairs"], summary["errors"]) == (2, 1)
