"""A batch's shared files under kills, corruption and a full disk: preds.json never half-written, never lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from in_process import invoke
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config, write_script

from llm_ide.swebench.store import OutputStore, StoreError, read_preds

CLI = "from llm_ide.cli import app; app()"


def swebench(
    dataset: Path, model: str, config: Path, output: Path, failpoints: str = "", workers: str = "2"
) -> subprocess.CompletedProcess[str]:
    """The batch; with failpoints it kills itself: a child process, else in-process."""
    args = ["swebench", "--subset", str(dataset), "--environment", "local", "--model", model, "-w", workers]
    args += ["-c", str(config), "-o", str(output)]
    if not failpoints:
        return invoke(*args)
    env = {**os.environ, "LLM_IDE_FAILPOINTS": failpoints}
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, env=env, timeout=600)


def test_batch_killed_right_after_a_submit_loses_no_patch(tmp_path: Path) -> None:
    dataset, rows = build_dataset(tmp_path / "data", 3)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    config, output = write_config(tmp_path / "c.yaml"), tmp_path / "out"
    killed = swebench(dataset, model, config, output, "run.ended=1")
    assert killed.returncode == -9, killed.stderr
    again = swebench(dataset, model, config, output)
    assert again.returncode == 0, again.stderr
    preds = read_preds(output)
    assert sorted(preds) == sorted(row["instance_id"] for row in rows)
    for row in rows:  # the other worker's fix command may have been the one the kill interrupted: told, not rerun
        traj = json.loads((output / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
        stopped = any(o["observation"].startswith("The run was stopped while") for o in traj["operations"])
        assert preds[row["instance_id"]]["model_patch"] in (("", row["patch"]) if stopped else (row["patch"],))
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())
    assert sorted(statuses["instances_by_exit_status"]["submitted"]) == sorted(r["instance_id"] for r in rows)


def test_a_batch_run_again_after_a_kill_says_how_many_instances_resumed(tmp_path: Path) -> None:
    """One worker, three instances: the kill comes in the second's second command, the first finished, the third never
    started. The rerun said "2 instances run" alone; now the console and swebench.log both say which resumed."""
    dataset, rows = build_dataset(tmp_path / "data", 3)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "git diff --stat"])
    config, output = write_config(tmp_path / "c.yaml"), tmp_path / "out"
    killed = swebench(dataset, model, config, output, "execute.done=4", workers="1")
    assert killed.returncode == -9, killed.stderr
    assert len(read_preds(output)) == 1 and len([path for path in output.iterdir() if path.is_dir()]) == 2
    again = swebench(dataset, model, config, output, workers="1")
    assert again.returncode == 0, again.stderr
    said = "2 instances run (1 resumed, 1 new), 1 skipped as finished in an earlier run"
    assert said in again.stdout
    assert (output / "swebench.log").read_text().splitlines()[-1].endswith(f"INFO batch: {said}")
    assert len(read_preds(output)) == 3


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"a": "not a prediction"}', "entry 'a' is not a prediction"),
        ('{"a": {"instance_id": "b", "model_patch": ""}}', "entry 'a' is not a prediction"),
        ('[{"model_patch": "x"}]', "is not a prediction"),
        ('"text"', "got str"),
        ('{"a": {"instance_id": "a", "model_patch": 3}}', "entry 'a' is not a prediction"),
        ('{"a": ', "is not valid JSON"),
    ],
)
def test_wrong_shaped_preds_is_an_error_and_left_untouched(tmp_path: Path, content: str, problem: str) -> None:
    (tmp_path / "preds.json").write_text(content)
    store = OutputStore(tmp_path)
    with pytest.raises(StoreError, match=problem):
        store.add_prediction("x", "m", "diff\n")
    assert (tmp_path / "preds.json").read_text() == content


def test_corrupt_exit_statuses_is_rebuilt_from_the_trajectories(tmp_path: Path) -> None:
    dataset, rows = build_dataset(tmp_path / "data", 2)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    config, output = write_config(tmp_path / "c.yaml"), tmp_path / "out"
    assert swebench(dataset, model, config, output).returncode == 0
    (output / "exit_statuses.yaml").write_text("instances: [1, 2\n  : {")
    OutputStore(output).record_status("demo__new-1", "error", error="boom")
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())
    assert statuses["instances_by_exit_status"] == {
        "error": ["demo__new-1"],
        "submitted": sorted(row["instance_id"] for row in rows),
    }
    for row in rows:
        info = statuses["instances"][row["instance_id"]]
        assert info["trajectory"] == f"{row['instance_id']}/{row['instance_id']}.traj.json"
        assert info["patch_lines"] == row["patch"].count("\n")


def test_preds_survive_a_full_disk(tmp_path: Path, small_disk: Path) -> None:
    store = OutputStore(small_disk)
    store.add_prediction("a", "m", "diff a\n")
    before = (small_disk / "preds.json").read_bytes()
    assert fill(small_disk)
    with pytest.raises(OSError):
        store.add_prediction("b", "m", "x" * 300_000)
    assert (small_disk / "preds.json").read_bytes() == before
    assert not [p.name for p in small_disk.iterdir() if p.name.startswith(".preds.json.")]
    (small_disk / "filler").unlink()
    store.add_prediction("b", "m", "diff b\n")
    assert json.loads((small_disk / "preds.json").read_text())["b"]["model_patch"] == "diff b\n"


def fill(disk: Path) -> bool:
    """Fill the disk with a file `filler`: whether it ended full (OSError)."""
    try:
        with (disk / "filler").open("wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
    except OSError:
        return True


def test_batch_on_a_full_disk_says_one_line_per_instance_and_loses_no_patch(tmp_path: Path, small_disk: Path) -> None:
    """Both instances wait at a command; the disk is filled; they go on and fail; a rerun with room finishes both.
    The signal to go lies outside the repositories: the rerun puts a repository back as it was before the interrupted
    command and runs it again, which then goes at once. The batch runs in-process; a thread fills the disk."""
    dataset, rows = build_dataset(tmp_path / "data", 2)
    go = tmp_path / "go"
    wait = f"touch waiting; while [ ! -f {go} ]; do sleep 0.05; done; echo went"
    model = write_script(tmp_path / "fix.yaml", [wait, FIX_COMMAND])
    config, output = write_config(tmp_path / "c.yaml"), small_disk / "out"
    repos = [output / row["instance_id"] / "repo" for row in rows]
    ended, filled = threading.Event(), []

    def fill_then_go() -> None:
        while not all((repo / "waiting").exists() for repo in repos):
            if ended.wait(0.05):
                return
        filled.append(fill(small_disk))
        go.touch()

    filling = threading.Thread(target=fill_then_go)
    filling.start()
    try:
        batch = swebench(dataset, model, config, output)
    finally:
        ended.set()
        filling.join()
    assert filled == [True], batch.stdout + batch.stderr  # both waited, the batch still running, and the disk filled
    assert "Traceback" not in batch.stdout + batch.stderr, batch.stderr
    if (output / "preds.json").exists():
        read_preds(output)  # whole, never half-written
    (small_disk / "filler").unlink()
    again = swebench(dataset, model, config, output)
    assert again.returncode == 0, again.stderr
    preds = read_preds(output)
    assert sorted(preds) == sorted(row["instance_id"] for row in rows), again.stdout + again.stderr
    for row in rows:
        assert row["patch"] in preds[row["instance_id"]]["model_patch"]


def killed_then_again(tmp_path: Path, count: int, checkpoint: str | None = None) -> tuple[Any, int]:
    """$1 calls, one worker: the batch killed in its second command ($2 paid, $1 of it after the last checkpoint),
    then the same command again under a $3 limit: (the rerun, the calls made in all)."""
    from openai_server import OpenAIServer
    from swebench_fixtures import dollar_steps

    dataset, _ = build_dataset(tmp_path / "data", count)
    calls, config = dollar_steps(tmp_path, 10)
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "agent": {"cost_limit": 100}}))
    with OpenAIServer(replies=calls) as server:
        args = ["swebench", "--subset", str(dataset), "--environment", "local", "--model", "gpt-test", "--base-url",
                server.url, "-c", str(config), "-o", str(tmp_path / "out"), "--cost-limit", "3", "-w", "1"]  # fmt: skip
        if checkpoint:
            args += ["--checkpoint", f"sqlite:{tmp_path / 'threads.sqlite'}"]
        env = {**os.environ, "OPENAI_API_KEY": "k", "LLM_IDE_FAILPOINTS": "execute.begun=2"}
        killed = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, env=env)
        assert killed.returncode == -9 and server.hits == 2, killed.stderr
        env["LLM_IDE_FAILPOINTS"] = ""
        again = invoke(*args, env=env)  # the rerun after the killed child: in-process (tests/README.md)
    assert again.returncode == 0, again.stderr
    return again, server.hits


@pytest.mark.parametrize("checkpoint", [None, "sqlite"])
def test_a_rerun_after_a_kill_counts_what_the_killed_runs_spent_in_the_batchs_cost_limit(
    tmp_path: Path, checkpoint: str | None
) -> None:
    """The rerun took what exit_statuses.yaml held as spent (nothing: the killed run never recorded its outcome) and
    made three more calls, $5 in all."""
    _, calls = killed_then_again(tmp_path, 1, checkpoint)
    assert calls == 3
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    assert [(info["exit_status"], info["cost"]) for info in statuses.values()] == [("cost_limit", 3.0)]


def test_the_limit_reached_line_counts_a_resumed_instances_earlier_spend_once(tmp_path: Path) -> None:
    """The resumed instance's cost is all it paid, its earlier runs' $2 included: the line added the earlier runs'
    spend to it again ("spent $5.0000, $2.0000 of it by earlier runs")."""
    again, calls = killed_then_again(tmp_path, 2)
    assert calls == 3
    said = " ".join(again.stdout.split())
    assert "global cost limit reached (spent $3.0000, $2.0000 of it by earlier runs in " in said, said
    assert "1 instance not started" in said
