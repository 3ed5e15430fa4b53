"""Reproduction first (issue 25) in docker: a given script installed beside the tools in the container, run on the
original code and at submit (a hanging one cut at its timeout); a dataset row's `reproduction` through
`llm-ide swebench` with attempts, each patch run in a clean container, then `llm-ide evaluate --attempts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from attempts_scripts import choice, review, write
from conftest import BASE_IMAGE, make_git_repo, require_docker
from in_process import invoke
from reproduction_scripts import FILES, REPRO, RIGHT, TASK, fix_script
from swebench_fixtures import (  # noqa: F401 - tiny_dataset is a fixture
    FIX_COMMAND,
    WRONG_COMMAND,
    TinyDataset,
    leftover_containers,
    script,
    tiny_dataset,
)

from llm_ide.config import load_config
from llm_ide.reproduction.script import script as given
from llm_ide.reproduction.variant import Reproduction
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory

pytestmark = [pytest.mark.docker, pytest.mark.slow]
HANGS = "import threading\n\nprint('waiting for ever', flush=True)\nthreading.Event().wait()\n"


def test_a_given_script_runs_in_the_container_before_and_at_submit(tmp_path: Path) -> None:
    import docker

    require_docker()
    from agent_script import write_script

    model = write_script(tmp_path / "m.yaml", fix_script(RIGHT))
    settings = load_config("default", environment={"tools": [], "pull": "never"}, reproduction={"timeout": 3})
    variant = Reproduction(given(REPRO, "reproduce_double.py"), given(HANGS, "hangs.py"))
    result = run_task(TASK, model=model, settings=settings, output_dir=tmp_path / "out", run_id="repro-docker",
                      repo=make_git_repo(tmp_path / "repo", FILES), environment="docker", image=BASE_IMAGE,
                      variants=[variant])  # fmt: skip
    assert result.exit_status == "submitted", result.error
    assert result.submission.count("diff --git") == 1 and "+    return x + x\n" in result.submission
    traj = load_trajectory(result.trajectory_path)
    record = traj["info"]["reproduction"]
    double, hangs = record["scripts"]
    assert (double["before"]["verdict"], double["before"]["output"]) == (
        "reproduced",
        "double(2) = 5\nIssue reproduced",
    )
    assert (record["after"]["reproduce_double.py"]["verdict"], hangs["before"]["verdict"]) == ("resolved", "timed out")
    assert hangs["before"]["output"].startswith("waiting for ever\n[command timed out after 3 s")
    assert record["after"]["hangs.py"]["timed_out"] is True
    prompt = traj["model_calls"][0]["prompt"]
    assert "`/tools/reproduction/reproduce_double.py` (given with the task) printed on the original code" in prompt
    assert "`/tools/reproduction/hangs.py` (given with the task) printed on the original code (timed out" in prompt
    check = next(op for op in traj["operations"] if op["action_type"] == "reproduce")
    assert "/tools/reproduction/reproduce_double.py: resolved (exit 0)" in check["observation"]
    assert check["returncode"] == 1  # the hanging one never resolves
    assert leftover_containers(docker.from_env(), "repro-docker") == []


CALC_REPRO = (
    "from calc.stats import mean\n\nvalue = mean([1, 2, 3])\nprint('mean([1, 2, 3]) =', value)\n"
    "print('Issue resolved' if value == 2 else 'Issue reproduced')\n"
)


def test_swebench_attempts_chosen_by_running_them(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    """The reviewer prefers the README patches and the chooser the first candidate: each patch runs in a clean
    container against the row's reproduction (and the repository's tests of calc/stats.py): the fix is chosen, and
    `evaluate --attempts` says the execution signal picked the patch the harness resolves."""
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text(json.dumps({**tiny_dataset.row("demo__calc-1"), "reproduction": CALC_REPRO}) + "\n")
    folder = tmp_path / "scripts"
    for number, responses in enumerate([script([WRONG_COMMAND]), script([WRONG_COMMAND]), script([FIX_COMMAND])], 1):
        write(folder, f"a{number}.yaml", responses)
    write(folder, "areview.yaml", [review(9, "Documents it."), review(9, "Documents it."), review(4, "Maybe.")])
    write(folder, "achoose.yaml", [choice(1, "The first.")])
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 3}}))
    output = tmp_path / "out"
    run = invoke(
        "swebench", "--subset", str(dataset), "--split", "test",
         "--model", f"scripted:{folder}/a{{attempt}}.yaml", "--output", str(output), "--config", str(config),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    preds = json.loads((output / "preds.json").read_text())
    assert preds["demo__calc-1"]["model_patch"] == tiny_dataset.row("demo__calc-1")["patch"]
    traj = json.loads((output / "demo__calc-1" / "demo__calc-1.traj.json").read_text())
    assert {key: traj["info"]["choice"][key] for key in ("attempt", "by", "execution")} == {
        "attempt": 3, "by": "execution", "execution": [3],
    }  # fmt: skip
    ranks = {a["index"]: a["rank"] for a in traj["info"]["attempts"]}
    assert ranks == {1: [0, 1, 0], 2: [0, 1, 0], 3: [0, 0, 0]}  # all verified
    checks = next(a["checks"] for a in traj["info"]["attempts"] if a["index"] == 3)
    assert checks["regressions (clean run)"] == "0 of 1 tests that passed before (tests/test_stats.py)"
    attempt = json.loads((output / "demo__calc-1" / "attempt1" / "demo__calc-1-attempt1.traj.json").read_text())
    assert (
        attempt["info"]["reproduction"]["scripts"][0]["before"]["output"] == "mean([1, 2, 3]) = 1.5\nIssue reproduced"
    )
    assert leftover_containers(tiny_dataset.client, "demo__calc-1") == []

    evaluation = invoke(
        "evaluate", str(output / "preds.json"), "--subset", str(dataset),
         "--split", "test", "--attempts", "--output", str(tmp_path / "eval"),
    )  # fmt: skip
    assert evaluation.returncode == 0, evaluation.stdout + evaluation.stderr
    assert (
        "execution signal: narrowed the choice on 1 instances, picked only resolved patches on 1" in evaluation.stdout
    )
    report = json.loads((tmp_path / "eval" / "report.json").read_text())["attempts"]
    assert (report["execution_narrowed"], report["execution_resolved"], report["execution_resolved_rate"]) == (
        1,
        1,
        1.0,
    )
    assert report["instances"]["demo__calc-1"]["execution"] == [3]
