"""Attempts in docker: a container per attempt, parallel attempts leaving none behind, and `llm-ide swebench` with
attempts.max=3 then `llm-ide evaluate --attempts` on the tiny local dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, choice, review, scripts, write
from conftest import BASE_IMAGE, make_git_repo, require_docker
from in_process import invoke
from swebench_fixtures import (  # noqa: F401 - tiny_dataset is a fixture
    FIX_COMMAND,
    WRONG_COMMAND,
    TinyDataset,
    leftover_containers,
    script,
    tiny_dataset,
)

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_parallel_attempts_in_docker_each_get_a_container_and_leave_none(tmp_path: Path) -> None:
    import docker

    require_docker()
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts",
        [attempt_script(WRONG), attempt_script(RIGHT), attempt_script(RIGHT)],
        [review(2, "README only."), review(9, "Fixed."), review(9, "Fixed.")],
    )
    settings = load_config("default", environment={"tools": []}, attempts={"max": 3, "parallel": True})
    result = run_attempts(TASK, model=model, settings=settings, output_dir=tmp_path / "out", run_id="par",
                          repo=repo, environment="docker", image=BASE_IMAGE)  # fmt: skip
    assert [(a["index"], a["exit_status"], a["score"]) for a in result.attempts] == [
        (1, "submitted", 2.0), (2, "submitted", 9.0), (3, "submitted", 9.0),
    ]  # fmt: skip
    assert result.chosen == 2  # accepted: the best score, the earliest of equals
    assert "+    return x + x\n" in result.submission
    assert "README" in [a for a in result.attempts if a["index"] == 1][0]["submission"]  # each its own container
    assert leftover_containers(docker.from_env(), "par-attempt") == []


def test_attempts_stopped_at_their_step_limit_go_on_in_new_containers_with_their_changes(tmp_path: Path) -> None:
    """Each attempt's container is gone when the run ends: going on past the limit, each attempt starts a new one with
    its worktree put back as its last step left it (the fix made before the limit is in the patch it submits)."""
    import docker

    require_docker()
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(2, "Unfinished."), review(2, "Unfinished."), review(9, "Fixed."), review(3, "README.")]
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(WRONG)], reviews)
    run = {"model": model, "output_dir": tmp_path / "out", "run_id": "lim", "repo": repo, "environment": "docker"}

    def settings(step_limit: int):
        given = {"tools": []}, {"max": 2, "parallel": True}, {"step_limit": step_limit}
        return load_config("default", environment=given[0], attempts=given[1], agent=given[2])

    stopped = run_attempts(TASK, settings=settings(2), image=BASE_IMAGE, **run)
    assert [a["exit_status"] for a in stopped.attempts] == ["step_limit", "step_limit"]
    went_on = run_attempts(TASK, settings=settings(0), image=BASE_IMAGE, **run)
    assert [(a["exit_status"], a["score"]) for a in went_on.attempts] == [("submitted", 9.0), ("submitted", 3.0)]
    assert (went_on.chosen, went_on.exit_status) == (1, "submitted")
    assert "+    return x + x\n" in went_on.submission  # made at step 2, in the first container
    assert "see the issue tracker" in went_on.attempts[1]["submission"]
    assert leftover_containers(docker.from_env(), "lim-attempt") == []


def test_swebench_with_three_attempts_then_evaluate_attempts(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    folder = tmp_path / "scripts"
    wrong, right = script([WRONG_COMMAND]), script([FIX_COMMAND])
    for number, responses in enumerate([wrong, wrong, right], 1):
        write(folder, f"a{number}.yaml", responses)
    write(folder, "areview.yaml", [review(3, "Only the README."), review(3, "Only the README."), review(6, "Maybe.")])
    write(folder, "achoose.yaml", [choice(2, "Candidate 2 fixes the off-by-one.")])
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 3}}))
    output = tmp_path / "out"
    run = invoke(
        "swebench", "--subset", str(tiny_dataset.path), "--split", "test",
         "--filter", "calc-1", "--model", f"scripted:{folder}/a{{attempt}}.yaml", "--output", str(output),
         "--config", str(config),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    preds = json.loads((output / "preds.json").read_text())
    assert preds["demo__calc-1"]["model_patch"] == tiny_dataset.row("demo__calc-1")["patch"]  # attempt 3's
    traj = json.loads((output / "demo__calc-1" / "demo__calc-1.traj.json").read_text())
    assert traj["info"]["choice"] == {"attempt": 3, "by": "chooser", "reasons": "Candidate 2 fixes the off-by-one."}
    assert leftover_containers(tiny_dataset.client, "demo__calc-1") == []

    evaluation = invoke(
        "evaluate", str(output / "preds.json"), "--subset", str(tiny_dataset.path),
         "--split", "test", "--attempts", "--output", str(tmp_path / "eval"),
    )  # fmt: skip
    assert evaluation.returncode == 0, evaluation.stdout + evaluation.stderr
    assert "pass@3 1/1 (100.0%) (any attempt resolved); chosen patch resolved 1/1 (100.0%)" in evaluation.stdout
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["attempts"]["instances"]["demo__calc-1"] == {
        "chosen": "resolved", "attempts": {"1": "unresolved", "2": "unresolved", "3": "resolved"},
        "execution": [],  # no reproduction: execution narrowed nothing
    }  # fmt: skip
    assert report["attempts"]["pass_at_k"] == 1.0 and report["resolved"] == 1
