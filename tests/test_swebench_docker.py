"""End to end in real containers: batches with 1 and 2 workers, evaluation, kill/interrupt and resume, single runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BASE_IMAGE, wait_for
from in_process import invoke
from swebench_fixtures import (  # noqa: F401 - tiny_dataset is a fixture
    FIX_COMMAND,
    TinyDataset,
    containers_held_by,
    leftover_containers,
    tiny_dataset,
    write_config,
    write_script,
)

from llm_ide.config import load_config
from llm_ide.swebench.dataset import load_dataset
from llm_ide.swebench.evaluate import evaluate_predictions

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = "import sys; from llm_ide.cli import app, extra_app; (extra_app if sys.argv.pop(1) == 'mini-extra' else app)()"
IDS = ["demo__calc-1", "demo__shapes-1", "demo__text-1"]
SLOW_STEPS = ["sleep 1; date +%s%N", "sleep 1; date +%s%N", "sleep 1; date +%s%N", FIX_COMMAND]


def command(*args: str) -> list[str]:
    return [sys.executable, "-c", CLI, *args]


def in_process(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A command line made by `command` (a child's argv), run in the test's process instead."""
    program, *args = argv[3:]
    return invoke(*args, program=program)


def batch_args(dataset: Path, model: str, output: Path, config: Path, workers: int) -> list[str]:
    """The request's command line, against the local dataset."""
    return command(
        "mini-extra", "swebench", "--subset", str(dataset), "--split", "test", "--model", model,
        "--workers", str(workers), "--output", str(output), "--config", str(config),
    )  # fmt: skip


def operations(output: Path, instance_id: str) -> list[dict]:
    path = output / instance_id / f"{instance_id}.traj.json"
    return json.loads(path.read_text())["operations"] if path.exists() else []


def preds_ids(output: Path) -> list[str]:
    path = output / "preds.json"
    return sorted(json.loads(path.read_text())) if path.exists() else []


@pytest.mark.parametrize("workers", [1, 2])
def test_batch_end_to_end(tiny_dataset: TinyDataset, tmp_path: Path, workers: int) -> None:  # noqa: F811
    from swebench.harness.utils import get_predictions_from_file

    model = write_script(tmp_path / "fix.yaml", ["grep -rn '# BUG' --include='*.py' .", FIX_COMMAND])
    output = tmp_path / "out"
    result = in_process(batch_args(tiny_dataset.path, model, output, write_config(tmp_path / "c.yaml"), workers))
    assert result.returncode == 0, result.stderr
    assert "swebench: 3/3 done, cost $0.0000, submitted: 3" in result.stdout

    predictions = get_predictions_from_file(str(output / "preds.json"), "SWE-bench/SWE-bench_Lite", "test")
    assert sorted(p["instance_id"] for p in predictions) == IDS
    for prediction in predictions:
        assert set(prediction) == {"instance_id", "model_name_or_path", "model_patch"}
        assert prediction["model_name_or_path"] == model
        assert prediction["model_patch"] == tiny_dataset.row(prediction["instance_id"])["patch"]

    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())
    assert statuses["instances_by_exit_status"] == {"submitted": IDS}
    for instance_id in IDS:
        trajectory = json.loads((output / instance_id / f"{instance_id}.traj.json").read_text())
        assert trajectory["info"]["exit_status"] == "submitted"
        assert trajectory["info"]["submission"] == tiny_dataset.row(instance_id)["patch"]
        assert [op["action_type"] for op in trajectory["operations"]] == ["bash", "bash", "submit"]
        assert "# BUG" in trajectory["operations"][0]["observation"]
        run_log = (output / instance_id / f"{instance_id}.log").read_text()
        assert f"run {instance_id} ended: submitted" in run_log
        assert [other for other in IDS if other != instance_id and other in run_log] == []  # logs never mix
    log = (output / "swebench.log").read_text()
    assert "demo__text-1: starting (image swebench/sweb.eval.x86_64.demo_1776_text-1:latest)" in log  # name rule
    assert f"{workers} workers" in log
    assert leftover_containers(tiny_dataset.client, "demo__") == []

    report = evaluate_predictions(
        json.loads((output / "preds.json").read_text()),
        {i.instance_id: i for i in load_dataset(str(tiny_dataset.path)).instances},
        settings=load_config("swebench").swebench,
        log_dir=tmp_path / "eval",
        workers=workers,
    )
    assert (report.ids("resolved"), report.resolve_rate) == (IDS, 1.0)


def test_killed_batch_resumes_without_redoing_finished_instances(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    model = write_script(tmp_path / "slow.yaml", SLOW_STEPS)
    output = tmp_path / "out"
    args = batch_args(tiny_dataset.path, model, output, write_config(tmp_path / "c.yaml"), workers=1)
    batch = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: preds_ids(output) == ["demo__calc-1"] and len(operations(output, "demo__text-1")) >= 1)
    finally:
        os.killpg(batch.pid, signal.SIGKILL)
        batch.wait()
    at_kill = operations(output, "demo__text-1")
    finished = (output / "demo__calc-1" / "demo__calc-1.traj.json").read_text()
    assert len(at_kill) in (1, 2, 3) and not (output / "demo__shapes-1").exists()  # killed before its fix

    rerun = in_process(args)
    assert rerun.returncode == 0, rerun.stderr
    assert "1 instance skipped as finished in an earlier run" in rerun.stdout
    assert preds_ids(output) == IDS
    assert (output / "demo__calc-1" / "demo__calc-1.traj.json").read_text() == finished  # not redone
    resumed = operations(output, "demo__text-1")
    assert [op["action_type"] for op in resumed] == ["bash"] * 4 + ["submit"]
    # the nanosecond timestamps printed before the kill survive: the steps were continued, not run again
    assert [op["observation"] for op in resumed[: len(at_kill)]] == [op["observation"] for op in at_kill]
    assert len({op["observation"] for op in resumed[:3]}) == 3
    preds = json.loads((output / "preds.json").read_text())
    assert preds["demo__text-1"]["model_patch"] == tiny_dataset.row("demo__text-1")["patch"]  # edits made after resume
    assert leftover_containers(tiny_dataset.client, "demo__") == []


def test_interrupted_batch_ends_running_instances_and_resumes_them(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    model = write_script(tmp_path / "slow.yaml", SLOW_STEPS)
    output = tmp_path / "out"
    args = batch_args(tiny_dataset.path, model, output, write_config(tmp_path / "c.yaml"), workers=2)
    batch = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(lambda: all(len(operations(output, i)) >= 1 for i in ["demo__calc-1", "demo__text-1"]))
    batch.send_signal(signal.SIGINT)
    stdout, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 130, stderr
    assert "interrupted: finished instances are in" in stderr
    assert stderr.splitlines()[-1] == shlex.join(["llm-ide", *args[4:]])  # the resume command: the same one
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())
    assert statuses["instances_by_exit_status"] == {
        "interrupted": ["demo__calc-1", "demo__text-1"],
        "not_started": ["demo__shapes-1"],  # queued behind the two workers' instances
    }
    assert preds_ids(output) == []
    assert leftover_containers(tiny_dataset.client, "demo__") == []
    at_stop = {i: operations(output, i) for i in ["demo__calc-1", "demo__text-1"]}

    rerun = in_process(args)
    assert rerun.returncode == 0, rerun.stderr
    assert preds_ids(output) == IDS
    for instance_id, before in at_stop.items():
        after = operations(output, instance_id)
        assert len(after) == 5
        assert [op["observation"] for op in after[: len(before)]] == [op["observation"] for op in before]


@pytest.mark.parametrize("instance", ["demo__shapes-1", "2"])
def test_swebench_single_prints_steps_live(tiny_dataset: TinyDataset, tmp_path: Path, instance: str) -> None:  # noqa: F811
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "python -m pytest -q tests 2>&1 | tail -1"])
    result = in_process(
        command(
            "mini-extra", "swebench-single", "--subset", str(tiny_dataset.path), "--split", "test", "--model", model,
            "-i", instance, "-o", str(tmp_path / "single"), "-c", str(write_config(tmp_path / "c.yaml")),
        ),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("demo__shapes-1 (llm-ide-test/demo.shapes-1:latest)")
    steps = [line.split()[:3] for line in lines if line.startswith("step")]
    assert steps == [["step", "1", "bash:"], ["step", "2", "bash:"], ["step", "3", "submit"]]
    assert any("1 passed" in line for line in lines)  # the run's own test command, inside the container
    assert "submitted after 3 steps" in result.stdout
    assert "-        return (self.w + 1) * self.h  # BUG" in result.stdout
    assert (
        json.loads((tmp_path / "single" / "preds.json").read_text())["demo__shapes-1"]["model_patch"]
        == (tiny_dataset.row("demo__shapes-1")["patch"])
    )


def test_missing_image_is_an_environment_error_retried_on_the_next_run(
    tiny_dataset: TinyDataset,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An image not found, and (issue: it ran the agent, `submitted` an empty prediction) one whose /testbed is no
    repository: each its instance's environment_error at its start, said in one line, retried on the next run."""
    rows = [dict(tiny_dataset.row("demo__calc-1")), {**tiny_dataset.row("demo__calc-1"), "instance_id": "demo__gone-1"}]
    rows[1]["image_name"] = "llm-ide-test/never-built:1"
    rows.append({**rows[0], "instance_id": "demo__bare-1", "image_name": BASE_IMAGE})  # (no /testbed in it)
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = write_config(tmp_path / "c.yaml")
    settings = yaml.safe_load(config.read_text())
    settings["environment"]["pull"] = "never"  # no registry lookups
    config.write_text(yaml.safe_dump(settings))
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    output = tmp_path / "out"
    for rerun in (False, True):
        result = in_process(batch_args(dataset, model, output, config, 2))
        assert result.returncode == (1 if rerun else 0), result.stderr  # the rerun runs only the failing one
        statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())["instances_by_exit_status"]
        assert statuses == {"environment_error": ["demo__bare-1", "demo__gone-1"], "submitted": ["demo__calc-1"]}
        assert preds_ids(output) == ["demo__calc-1"]  # the failed start is not a prediction: the rerun retries it
    [line] = [line for line in result.stdout.splitlines() if "demo__gone-1: environment_error" in line]
    assert "llm-ide-test/never-built:1 not found locally" in line  # why, on the console
    [line] = [line for line in result.stdout.splitlines() if "demo__bare-1: environment_error (0 steps" in line]
    assert f"/testbed is not a git repository with a commit (image: {BASE_IMAGE})" in line
    assert "llm-ide-test/never-built:1 not found locally" in (output / "demo__gone-1" / "demo__gone-1.log").read_text()
    batch_log = (output / "swebench.log").read_text()
    assert "WARNING demo__gone-1: environment_error (cost $0.0000, 0 patch lines): " in batch_log
    assert batch_log.count("llm-ide-test/never-built:1 not found locally") == 2  # once per run

    assert result.stderr.splitlines()[-1] == f"every instance failed (reasons above and in {output / 'swebench.log'})"

    single_args = ["--subset", str(dataset), "-i", "demo__gone-1", "-o", str(tmp_path / "single"), "-c", str(config)]
    single = in_process(command("llm-ide", "swebench-single", *single_args, "--model", model))  # as `run`: exit 2
    assert single.returncode == 2, single.stderr
    assert "llm-ide-test/never-built:1 not found locally" in single.stderr


def running_sleep(client: Any, pid: int) -> list[str]:
    """The batch's containers whose command `sleep 8` is running now (the processes docker lists in each)."""
    names = containers_held_by(client, "demo__", pid)
    return [name for name in names if any("sleep 8" in " ".join(row) for row in processes_in(client, name))]


def log_text(output: Path) -> str:
    log = output / "swebench.log"
    return log.read_text(errors="replace") if log.is_file() else ""


def processes_in(client: Any, name: str) -> list[list[str]]:
    try:
        return client.api.top(name.lstrip("/"))["Processes"] or []
    except Exception:  # gone or not started yet: none
        return []


def test_second_interrupt_leaves_at_once_and_containers_go(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    model = write_script(tmp_path / "long.yaml", ["sleep 8; date +%s%N", FIX_COMMAND])
    output = tmp_path / "out"
    args = batch_args(tiny_dataset.path, model, output, write_config(tmp_path / "c.yaml"), workers=2)
    batch = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(lambda: len(running_sleep(tiny_dataset.client, batch.pid)) == 2)  # both runs inside their 8 s command
    batch.send_signal(signal.SIGINT)
    wait_for(lambda: "batch: interrupted; the running" in log_text(output))  # the first one handled
    batch.send_signal(signal.SIGINT)
    stdout, stderr = batch.communicate(timeout=5)  # not waiting for the commands to end
    assert batch.returncode == 130, stderr
    assert "interrupted again; leaving at once" in (output / "swebench.log").read_text()
    wait_for(lambda: leftover_containers(tiny_dataset.client, "demo__") == [], timeout=30)
    rerun = in_process(args)
    assert rerun.returncode == 0, rerun.stderr
    assert preds_ids(output) == IDS


def test_a_step_limited_instance_goes_on_in_a_new_container(tiny_dataset: TinyDataset, tmp_path: Path) -> None:  # noqa: F811
    """Its container is gone with the first batch: the one the higher limit starts gets the worktree back (the fix
    of step 1 is in `git diff` at step 2) and the patch holds it once."""
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "git diff --stat"])
    output, config = tmp_path / "out", write_config(tmp_path / "c.yaml", step_limit=1)
    args = [*batch_args(tiny_dataset.path, model, output, config, 1), "--filter", "calc"]
    for limit in ("1", "0"):
        result = in_process([*args, "--step-limit", limit])
        assert result.returncode == 0, result.stderr
    assert "1 instance stopped at a limit in an earlier run goes on from its last step" in result.stdout
    steps = operations(output, "demo__calc-1")
    assert [op["action_params"].get("command") for op in steps] == [FIX_COMMAND, "git diff --stat", None]
    assert "stats.py | 2 +-" in steps[1]["observation"].replace("calc/", "")
    assert (
        json.loads((output / "preds.json").read_text())["demo__calc-1"]["model_patch"]
        == tiny_dataset.row("demo__calc-1")["patch"]
    )
    assert leftover_containers(tiny_dataset.client, "demo__") == []
