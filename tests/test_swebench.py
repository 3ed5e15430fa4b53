"""Batch runner without docker: the output store under concurrency, the progress lines and live table,
local-environment batches (resume, redo, malformed rows, a row's repository not there), an interrupted
instance and Ctrl-C in a silent command, failed instances and a batch of nothing but failures."""

from __future__ import annotations

import io
import json
import multiprocessing
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import store_writer
import yaml
from conftest import wait_for
from in_process import invoke
from rich.console import Console
from swebench_fixtures import (
    FIX_COMMAND,
    build_dataset,
    cli,
    gated_batch,
    write_config,
    write_script,
)

from llm_ide.run.trajectory import load_trajectory
from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.choice import batch_config
from llm_ide.swebench.dataset import load_dataset
from llm_ide.swebench.instances import run_instance
from llm_ide.swebench.progress import BatchProgress
from llm_ide.swebench.store import OutputStore, read_preds


def test_output_store_survives_concurrent_threads_and_processes(tmp_path: Path) -> None:
    """Two processes of their own (forked: a fresh interpreter importing the store cost ~1.2 s of CPU each; the
    lock is the same flock across processes) and four threads write at once."""
    write = store_writer.writer_process
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=write, args=(tmp_path, f"proc{p}", 10)) for p in range(2)]
    threads = [threading.Thread(target=write, args=(tmp_path, f"thread{t}", 10)) for t in range(4)]
    for worker in [*procs, *threads]:
        worker.start()
    for worker in [*procs, *threads]:
        worker.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0]
    preds = read_preds(tmp_path)
    expected = {f"{who}-{n}" for who in ["proc0", "proc1", *(f"thread{t}" for t in range(4))] for n in range(10)}
    assert set(preds) == expected
    assert preds["thread3-7"] == {"instance_id": "thread3-7", "model_name_or_path": "m", "model_patch": "patch 7\n"}
    statuses = yaml.safe_load((tmp_path / "exit_statuses.yaml").read_text())
    assert sorted(statuses["instances_by_exit_status"]["submitted"]) == sorted(expected)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    OutputStore(tmp_path).remove_prediction("proc1-3")
    assert len(read_preds(tmp_path)) == len(expected) - 1


def test_progress_plain_lines_and_live_render() -> None:
    plain = io.StringIO()
    with BatchProgress(total=3, console=Console(file=plain, width=200), title="swebench") as progress:
        progress.start("a__x-1")
        progress.event("a__x-1", "phase", phase="starting environment")
        progress.event("a__x-1", "step", step=3, action="bash: pytest -q", cost=0.25)
        progress.start("b__y-2")
        progress.event("b__y-2", "step", step=1, action="view a.py:1-20", cost=0.00004)  # .2f: "$0.00"
        live = Console(file=io.StringIO(), width=160, force_terminal=True, color_system=None)
        live.print(progress.render())
        screen = live.file.getvalue()
        progress.finish("a__x-1", "submitted", cost=0.5, steps=4)
    assert "0/3" in screen and "$0.2500" in screen and "ETA -:--:--" in screen
    assert [line.split()[:3] for line in screen.splitlines() if "__" in line] == [
        ["a__x-1", "step", "3"],
        ["b__y-2", "step", "1"],
    ]
    assert "bash: pytest -q" in screen and "$0.25" in screen and "$0.000040" in screen  # as errors.usd says costs
    lines = plain.getvalue().splitlines()
    assert lines[0] == "swebench: 3 instances"
    assert lines[1:3] == ["[0/3] a__x-1: started", "[0/3] b__y-2: started"]
    assert lines[3].startswith("[1/3] a__x-1: submitted (4 steps, $0.5000) | total $0.5000 | ETA ")
    assert lines[3].endswith("| submitted: 1")
    assert lines[4] == "swebench: 1/3 done, cost $0.5000, submitted: 1"
    assert (progress.done, dict(progress.statuses), list(progress.running)) == (1, {"submitted": 1}, ["b__y-2"])


@pytest.mark.parametrize("node", ["", "3b8df95f"])
def test_a_long_phase_leaves_each_running_instances_id_node_and_cost_whole(node: str) -> None:
    """A run's phase is a sentence at times (its baseline, the Python its commands use): the live table squeezed the
    other columns for it, to `demo…` and `$0.00…` at 150 columns, and the node's to nothing."""
    said = "baseline: commit b8cc466e0fb8 (HEAD); the patch is the working tree's change against it, " * 2
    with BatchProgress(total=2, console=Console(file=io.StringIO(), width=200), title="swebench") as progress:
        progress.start("demo__calc-1", node)
        progress.event("demo__calc-1", "phase", phase=said)
        progress.start("demo__shapes-1", node)
        progress.event("demo__shapes-1", "step", step=2, action="bash: " + "x" * 200, cost=1.25)
        live = Console(file=io.StringIO(), width=150, force_terminal=True, color_system=None)
        live.print(progress.render())
    rows = [line.split() for line in live.file.getvalue().splitlines() if "demo__" in line]
    assert [row[:2] for row in rows] == [["demo__calc-1", node or "baseline:"], ["demo__shapes-1", node or "step"]]
    assert "$1.2500" in rows[1] and "$0.0000" in rows[0]


def test_an_interrupted_instance_is_not_counted_done() -> None:
    """Ctrl-C in a batch of one: its summary said `1/1 done`."""
    plain = io.StringIO()
    with BatchProgress(total=2, console=Console(file=plain, width=200), title="swebench") as progress:
        progress.start("a__x-1")
        progress.finish("a__x-1", "submitted", cost=0.5, steps=4)
        progress.start("b__y-2")
        progress.finish("b__y-2", "interrupted", cost=0.25, steps=1, error="interrupted by the user")
    lines = plain.getvalue().splitlines()
    said = "[1/2] b__y-2: interrupted (1 step, $0.2500): interrupted by the user | total $0.7500 | "
    assert lines[4].startswith(said)
    assert lines[5] == "swebench: 1/2 done, cost $0.7500, interrupted: 1, submitted: 1"


def test_progress_of_an_unpriced_model_shows_no_cost_of_zero() -> None:
    plain = io.StringIO()
    with BatchProgress(3, Console(file=plain, width=200), "swebench", priced=False) as progress:
        progress.start("a__x-1")
        progress.event("a__x-1", "step", step=2, action="view a.py", cost=0.0)
        live = Console(file=io.StringIO(), width=160, force_terminal=True, color_system=None)
        live.print(progress.render())
        progress.finish("a__x-1", "submitted", cost=0.0, steps=2)
    screen, lines = live.file.getvalue(), plain.getvalue().splitlines()
    assert "$" not in screen + plain.getvalue() and screen.count("unpriced") == 2  # the batch's and the instance's
    assert lines[2].startswith("[1/3] a__x-1: submitted (2 steps, unpriced) | total unpriced | ETA ")
    assert lines[3] == "swebench: 1/3 done, cost unpriced, submitted: 1"


@pytest.mark.parametrize("given", ["/nope/repo", "./gone/repo", "~/gone-llm-ide-repo"])
def test_a_rows_repository_path_that_is_not_there_is_said_so(tmp_path: Path, given: str) -> None:
    """A row's `repo` naming a local path that is not there was taken for GitHub's owner/name: the instance's error
    was git's failure to clone https://github.com//nope/repo.git (offline: a wait, then a network error)."""
    dataset, rows = build_dataset(tmp_path / "data", 1)
    dataset.write_text(json.dumps({**rows[0], "repo": given}) + "\n")
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    options = BatchOptions(model=model, output=tmp_path / "out", environment="local",
                           config_files=[write_config(tmp_path / "c.yaml")])  # fmt: skip
    summary = run_swebench(str(dataset), "test", options)
    error = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"][rows[0]["instance_id"]]
    assert summary.counts() == {"environment_error": 1}
    assert error["error"].endswith(f"its repository {given} is not there (the row's `repo` field)"), error
    assert "github.com" not in error["error"]


def test_local_environment_batch_fixes_every_instance_and_resume_skips_them(tmp_path: Path) -> None:
    dataset, rows = build_dataset(tmp_path / "data", 3)
    model = write_script(tmp_path / "fix.yaml", ["grep -rn '# BUG' --include='*.py' .", FIX_COMMAND])
    options = BatchOptions(
        model=model,
        output=tmp_path / "out",
        workers=2,
        environment="local",
        config_files=[write_config(tmp_path / "c.yaml")],
    )
    summary = run_swebench(str(dataset), "test", options)
    assert summary.counts() == {"submitted": 3} and summary.skipped_existing == []
    preds = read_preds(options.output)
    assert {k: v["model_patch"] for k, v in preds.items()} == {row["instance_id"]: row["patch"] for row in rows}
    assert {v["model_name_or_path"] for v in preds.values()} == {model}
    for row in rows:
        trajectory = json.loads((options.output / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
        assert trajectory["info"]["exit_status"] == "submitted"
        assert [op["action_type"] for op in trajectory["operations"]] == ["bash", "bash", "submit"]
        assert (Path(row["repo"]) / ".git").exists()  # the dataset's repositories are cloned, never edited
        assert "# BUG" in (Path(row["repo"]) / next(n for n in ("calc/stats.py", "text/words.py", "shapes/rect.py")
                                                    if (Path(row["repo"]) / n).exists())).read_text()  # fmt: skip
    statuses = yaml.safe_load((options.output / "exit_statuses.yaml").read_text())
    assert sorted(statuses["instances_by_exit_status"]["submitted"]) == sorted(r["instance_id"] for r in rows)
    log = (options.output / "swebench.log").read_text()
    assert log.count(": submitted (cost $0.0000") == 3
    stamps = {p: p.stat().st_mtime_ns for p in options.output.rglob("*.traj.json")}

    again = run_swebench(str(dataset), "test", options)
    assert (again.selected, sorted(again.skipped_existing)) == ([], sorted(r["instance_id"] for r in rows))
    assert {p: p.stat().st_mtime_ns for p in options.output.rglob("*.traj.json")} == stamps

    options.redo_existing = True
    redo = run_swebench(str(dataset), "test", options, filter_regex="demo__calc")
    assert (redo.selected, redo.counts()) == (["demo__calc-1"], {"submitted": 1})
    changed = [p.parent.name for p, stamp in stamps.items() if p.stat().st_mtime_ns != stamp]
    assert changed == ["demo__calc-1"]


def test_malformed_row_is_reported_and_the_others_run(tmp_path: Path) -> None:
    dataset, rows = build_dataset(tmp_path / "data", 2)
    broken = {**rows[0], "instance_id": "demo__broken-1", "PASS_TO_PASS": "[oops"}
    dataset.write_text(dataset.read_text() + json.dumps(broken) + "\n")
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    result = cli(
        "llm-ide", "swebench", "--subset", str(dataset), "--environment", "local", "--model", model, "-w", "2",
        "-c", str(write_config(tmp_path / "c.yaml")), "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "skipping malformed row 2 (demo__broken-1): field PASS_TO_PASS: not a JSON list" in result.stderr
    assert sorted(read_preds(tmp_path / "out")) == ["demo__calc-1", "demo__text-1"]
    assert "submitted: 2" in result.stdout
    assert "skipping malformed row 2 (demo__broken-1)" in (tmp_path / "out" / "swebench.log").read_text()


def test_an_instance_interrupted_during_a_command_counts_the_steps_its_trajectory_holds(tmp_path: Path) -> None:
    """Ctrl-C while step 2's command runs: the console and exit_statuses.yaml said "interrupted (2 steps)" (the step
    under way) while the trajectory held one operation."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    (instance,) = load_dataset(str(dataset)).instances
    options = BatchOptions(
        model=write_script(tmp_path / "m.yaml", ["true", FIX_COMMAND]),
        output=tmp_path / "out",
        environment="local",
        config_files=[write_config(tmp_path / "c.yaml")],
    )
    stop = threading.Event()
    ended = run_instance(
        instance, options, batch_config(options), OutputStore(options.output),
        on_event=lambda _, event: stop.set() if (event.kind, event.step) == ("command", 2) else None, stop=stop,
    )  # fmt: skip
    trajectory = load_trajectory(options.output / instance.instance_id / f"{instance.instance_id}.traj.json")
    assert (ended.exit_status, ended.steps, len(trajectory["operations"])) == ("interrupted", 1, 1)
    statuses = yaml.safe_load((options.output / "exit_statuses.yaml").read_text())["instances"]
    assert statuses[instance.instance_id]["steps"] == 1


def test_ctrl_c_ends_a_batchs_silent_command_at_once_and_the_rerun_runs_it_again(tmp_path: Path) -> None:
    """Ctrl-C reaches the main thread; the instances run in the pool's: one in a command that printed nothing ran
    until the command ended (here: never), as "the running instances end at their next event". The one queued behind
    it (one worker) is in exit_statuses.yaml as not started (it was missing)."""
    args = gated_batch(tmp_path, 2)
    cli = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args]
    batch = subprocess.Popen(cli, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for((tmp_path / "started").exists, what="the command's start")
    batch.send_signal(signal.SIGINT)
    stdout, stderr = batch.communicate(timeout=60)  # the gate still shut
    assert batch.returncode == 130, stdout + stderr
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    said = [(status["exit_status"], status.get("steps")) for status in statuses.values()]
    assert said == [("interrupted", 0), ("not_started", None)]

    (tmp_path / "gate").touch()
    rerun = invoke(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (tmp_path / "trail").read_text() == "waited\n" * 3  # the cut command again, on resume; then the other's
    assert sorted(read_preds(tmp_path / "out")) == sorted(statuses)
    again = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    assert {status["exit_status"] for status in again.values()} == {"submitted"}


def test_failed_instances_say_why_and_a_batch_of_nothing_but_failures_exits_non_zero(tmp_path: Path) -> None:
    dataset, rows = build_dataset(tmp_path / "data", 2)
    ids = sorted(row["instance_id"] for row in rows)
    empty = tmp_path / "empty.yaml"
    empty.write_text("- no action in this reply\n")  # asked again, the script has no more
    out = tmp_path / "out"
    args = ["--subset", str(dataset), "--environment", "local", "-c", str(write_config(tmp_path / "c.yaml"))]
    failed = cli("llm-ide", "swebench", *args, "--model", f"scripted:{empty}", "-o", str(out))
    reason = f"scripted model ran out of responses after 1 call ({empty})"
    assert failed.returncode == 1, failed.stdout + failed.stderr
    finished = [line for line in failed.stdout.splitlines() if line.startswith("[")]
    assert sorted(line.split("] ")[1].split(" |")[0] for line in finished if "model_error" in line) == [
        f"{instance_id}: model_error (0 steps, $0.0000): {reason}" for instance_id in ids
    ]
    assert failed.stderr.splitlines()[-1] == f"every instance failed (reasons above and in {out / 'swebench.log'})"
    log = (out / "swebench.log").read_text()
    for instance_id in ids:
        assert f"WARNING {instance_id}: model_error (cost $0.0000, 0 patch lines): {reason}\n" in log
    statuses = yaml.safe_load((out / "exit_statuses.yaml").read_text())["instances"]
    assert {statuses[instance_id]["error"] for instance_id in ids} == {reason}

    broken = {**rows[0], "instance_id": "demo__nowhere-1", "repo": str(tmp_path / "no-such-repo")}
    dataset.write_text(dataset.read_text() + json.dumps(broken) + "\n")
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    mixed = cli("llm-ide", "swebench", *args, "--model", model, "-o", str(tmp_path / "mixed"))
    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
    [line] = [line for line in mixed.stdout.splitlines() if "demo__nowhere-1: environment_error" in line]
    said = f"demo__nowhere-1: environment_error (0 steps, $0.0000): its repository {tmp_path / 'no-such-repo'} is not"
    assert said in line
    assert "every instance failed" not in mixed.stderr and "submitted: 2" in mixed.stdout


def test_a_batch_without_a_prediction_names_no_predictions_file(tmp_path: Path) -> None:
    """A batch whose instances never started (their repository gone) writes no preds.json: its summary said
    `preds: out/preds.json` all the same, a file `llm-ide evaluate` then did not find."""
    dataset, rows = build_dataset(tmp_path / "data", 1)
    dataset.write_text(json.dumps({**rows[0], "repo": str(tmp_path / "no-such-repo")}) + "\n")
    out = tmp_path / "out"
    args = ["--subset", str(dataset), "--environment", "local", "-c", str(write_config(tmp_path / "c.yaml"))]
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    failed = cli("llm-ide", "swebench", *args, "--model", model, "-o", str(out))
    assert failed.returncode == 1 and not (out / "preds.json").exists(), failed.stdout + failed.stderr
    said = f"preds: none (no instance has a prediction yet)  exit statuses: {out / 'exit_statuses.yaml'}"
    assert said in failed.stdout.splitlines(), failed.stdout
