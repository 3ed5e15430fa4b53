"""Batch runner without docker: output store under concurrency, progress, CLI errors, local-environment batches."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import store_writer
import yaml
from agent_script import BUGGY_FILES
from conftest import make_git_repo, wait_for
from in_process import invoke
from openai_server import OpenAIServer
from rich.console import Console
from swebench_fixtures import (
    FIX_COMMAND,
    assert_four_dollars,
    build_dataset,
    dollar_calls,
    dollar_steps,
    gated_batch,
    priced_options,
    write_config,
    write_script,
)

from llm_ide.budget import CostBudget
from llm_ide.config import load_config
from llm_ide.errors import usd
from llm_ide.run.single import run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.choice import batch_config
from llm_ide.swebench.dataset import load_dataset
from llm_ide.swebench.instances import run_instance
from llm_ide.swebench.preflight import model_endpoint
from llm_ide.swebench.progress import BatchProgress
from llm_ide.swebench.store import OutputStore, read_preds
from llm_ide.variant import AgentContext, ModelCall, ModelRequest, ModelResponse, Variant

Completed = subprocess.CompletedProcess[str]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli(program: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Completed:
    """`program` (llm-ide or mini-extra) with `args`."""
    return invoke(*args, program=program, env=env, cwd=cwd)


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


@pytest.mark.parametrize(
    ("model", "base_url", "env_url", "expected"),
    [
        ("scripted:x.yaml", None, None, None),
        ("tensorblock/gpt-5-mini", None, None, "https://api.openai.com/v1"),
        ("tensorblock/gpt-5-mini", None, "http://proxy:4000/v1", "http://proxy:4000/v1"),
        ("tensorblock/gpt-5-mini", "http://127.0.0.1:1/v1", "http://proxy:4000/v1", "http://127.0.0.1:1/v1"),
        ("openai:gpt-5-mini", None, None, "https://api.openai.com/v1"),
        ("anthropic:claude-sonnet-4-5", None, None, "https://api.anthropic.com"),
        ("anthropic:claude-sonnet-4-5", "http://127.0.0.1:1", None, "http://127.0.0.1:1"),
        ("groq:llama-3", None, None, None),
    ],
)
def test_model_endpoint(model: str, base_url: str | None, env_url: str | None, expected: str | None) -> None:
    previous = os.environ.pop("OPENAI_BASE_URL", None)
    try:
        if env_url:
            os.environ["OPENAI_BASE_URL"] = env_url
        assert model_endpoint(model, base_url) == expected
    finally:
        os.environ.pop("OPENAI_BASE_URL", None)
        if previous is not None:
            os.environ["OPENAI_BASE_URL"] = previous


def offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HF_", "LLM_IDE_"))}
    return {**env, "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "HF_HOME": str(tmp_path / "hf")}


@pytest.mark.parametrize("command", ["swebench", "swebench-single"])
def test_request_command_lines_offline_fail_with_one_clear_line(tmp_path: Path, command: str) -> None:
    env = offline_env(tmp_path)
    args = ["mini-extra", command, "--subset", "verified", "--split", "test", "--model", "tensorblock/gpt-5-mini"]
    result = cli(*args, "-o", str(tmp_path / "out"), env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: could not reach dataset princeton-nlp/SWE-bench_Verified (split test)")
    assert "--subset path/to/SWE-bench_Verified-test.jsonl" in result.stderr
    assert not (tmp_path / "out").exists()


def test_unreachable_model_and_missing_key_fail_before_the_batch(tmp_path: Path) -> None:
    dataset, _ = build_dataset(tmp_path / "data", 3)
    env = offline_env(tmp_path)
    base = ["mini-extra", "swebench", "--subset", str(dataset), "--split", "test", "--model", "tensorblock/gpt-5-mini"]
    base += ["--environment", "local"]  # the model is checked whether a Docker engine runs here or not
    port = closed_port()
    unreachable = cli(*base, "--base-url", f"http://127.0.0.1:{port}/v1", "-o", str(tmp_path / "o1"), env=env)
    assert unreachable.returncode == 2 and unreachable.stderr.count("\n") == 1, unreachable.stderr
    assert unreachable.stderr.startswith(
        f"error: could not reach model tensorblock/gpt-5-mini at http://127.0.0.1:{port}/v1"
    )
    no_key = cli(*base, "-o", str(tmp_path / "o2"), env=env)
    assert no_key.returncode == 2 and no_key.stderr.count("\n") == 1, no_key.stderr
    assert "OPENAI_API_KEY is not set" in no_key.stderr
    bad_args = cli(
        "llm-ide", "swebench", "--subset", str(dataset), "--slice", "x:y", "--model", "scripted:s.yaml", env=env
    )
    assert (bad_args.returncode, bad_args.stderr.strip()) == (
        2,
        "error: invalid slice 'x:y': expected integers, e.g. 0:10",
    )
    bad_env = cli("llm-ide", "swebench", "--subset", str(dataset), "--environment", "podman", "--model", "m", env=env)
    assert (bad_env.returncode, bad_env.stderr.strip()) == (
        2,
        "error: Invalid value for '--environment': 'podman' is not one of 'local', 'docker'. "
        "(see: llm-ide swebench --help)",
    )


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"readable": ["/no-such-data"]}, "error: environment.readable: /no-such-data: no such file or folder"),
        ({"writable": ["/no-such-cache"]}, "error: environment.writable: /no-such-cache: no such file or folder"),
    ],
)
def test_a_local_batch_refuses_paths_of_its_sandbox_that_are_not_there(
    tmp_path: Path, environment: dict, said: str
) -> None:
    """`run` refuses them before it starts; a batch in the local environment ran every instance without them (its
    commands found the one read-only, the other not there), without a word."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    (config := tmp_path / "c.yaml").write_text(yaml.safe_dump({"environment": {"tools": [], **environment}}))
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    args = ["swebench", "--subset", str(dataset), "--model", model, "--environment", "local", "-c", str(config)]
    refused = invoke(*args, "-o", str(tmp_path / "out"))
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1), refused.stdout + refused.stderr
    assert refused.stderr.startswith(said) and not (tmp_path / "out" / "preds.json").exists()


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


def test_global_cost_limit_stops_the_batch(tmp_path: Path) -> None:
    """A real OpenAI-compatible server on loopback; every call costs $1 (1M input tokens at $1/M)."""
    dataset, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_calls(tmp_path, 3)
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url, cost_limit=4.0)
        summary = run_swebench(str(dataset), "test", options)
    assert {k: (v.exit_status, v.cost, v.error) for k, v in summary.outcomes.items()} == {
        "demo__calc-1": ("submitted", 3.0, ""),
        "demo__text-1": ("cost_limit", 1.0, "the shared cost limit is reached"),  # not its own $3
    }
    assert summary.not_started == ["demo__shapes-1"]
    assert sorted(read_preds(options.output)) == ["demo__calc-1", "demo__text-1"]
    assert (summary.cost, summary.spent_before) == (4.0, 0.0)

    text_went_on = {"demo__text-1": ("cost_limit", 3.0, "the run's cost limit $3.0000 is reached (spent $3.0000)")}
    for limit, hits, outcomes in [(4.0, 0, {}), (6.0, 2, text_went_on)]:  # (stopped by the batch's: it goes on)
        with OpenAIServer(replies=calls) as server:  # the same command again, then with $2 more: what is left
            again = run_swebench(str(dataset), "test", replace(options, base_url=server.url, cost_limit=limit))
        skipped = sorted(set(summary.outcomes) - set(outcomes))
        assert server.hits == hits and again.spent_before == 4.0 and again.skipped_existing == skipped
        assert {k: (v.exit_status, v.cost, v.error) for k, v in again.outcomes.items()} == outcomes
        assert again.not_started == ["demo__shapes-1"]
    assert OutputStore(options.output).spent() == 6.0


def test_an_instance_whose_first_call_the_batchs_limit_refused_runs_when_the_limit_is_raised(tmp_path: Path) -> None:
    """Started while the budget had room, refused at its first call (the other workers spent the rest meanwhile): no
    prediction, so a rerun with a higher --cost-limit runs it (it was kept as an empty patch, skipped forever)."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 1)
    (instance,) = load_dataset(str(dataset)).instances
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url)
        spent = CostBudget(2.0, 2.0)  # what the others spent
        refused = run_instance(instance, options, batch_config(options), OutputStore(options.output), budget=spent)
        assert (refused.exit_status, refused.cost, refused.steps, server.hits) == ("cost_limit", 0.0, 0, 0)
        assert read_preds(options.output) == {}

        again = run_swebench(str(dataset), "test", replace(options, cost_limit=5.0))
    assert again.skipped_existing == [] and server.hits == 3
    assert {k: (v.exit_status, v.cost) for k, v in again.outcomes.items()} == {instance.instance_id: ("submitted", 3.0)}
    assert list(read_preds(options.output)) == [instance.instance_id]


def test_an_interrupted_instance_records_what_it_spent_and_the_batchs_limit_counts_it(tmp_path: Path) -> None:
    dataset, _ = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 1)
    (instance,) = load_dataset(str(dataset)).instances
    stop = threading.Event()
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url)
        ended = run_instance(  # Ctrl-C in the batch as its first step is told: the run ends at its next event
            instance, options, batch_config(options), OutputStore(options.output),
            on_event=lambda _, event: stop.set() if event.kind == "step" else None, stop=stop,
        )  # fmt: skip
        assert (ended.exit_status, ended.cost, ended.steps, server.hits) == ("interrupted", 1.0, 1, 1)
        statuses = yaml.safe_load((options.output / "exit_statuses.yaml").read_text())["instances"]
        assert statuses == {instance.instance_id: {"exit_status": "interrupted", "steps": 1, "cost": 1.0}}

        resumed = run_swebench(str(dataset), "test", replace(options, cost_limit=2.0))
    assert resumed.spent_before == 1.0 and server.hits == 2  # $1 left: the resumed run's one more call
    assert {k: (v.exit_status, v.cost) for k, v in resumed.outcomes.items()} == {
        instance.instance_id: ("cost_limit", 2.0)
    }


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
    until the command ended (here: never), as "the running instances end at their next event"."""
    args = gated_batch(tmp_path)
    cli = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args]
    batch = subprocess.Popen(cli, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for((tmp_path / "started").exists, what="the command's start")
    batch.send_signal(signal.SIGINT)
    stdout, stderr = batch.communicate(timeout=60)  # the gate still shut
    assert batch.returncode == 130, stdout + stderr
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    assert [(status["exit_status"], status["steps"]) for status in statuses.values()] == [("interrupted", 0)]

    (tmp_path / "gate").touch()
    rerun = invoke(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (tmp_path / "trail").read_text() == "waited\nwaited\n"  # the cut command again, on resume
    assert list(read_preds(tmp_path / "out")) == list(statuses)


class CtrlCAfterTheFirstCall(Variant):
    """Ctrl-C as the step's reply has come (paid, logged) and its update is not saved yet."""

    name = "ctrl_c_after_the_first_call"

    def __init__(self) -> None:
        self.calls = 0

    def wrap_model_call(self, ctx: AgentContext, request: ModelRequest, call: ModelCall) -> ModelResponse:
        response = call(request)
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt
        return response


def test_a_call_paid_at_a_step_cut_by_ctrl_c_stays_in_the_runs_cost_after_the_resume(tmp_path: Path) -> None:
    """The step's reply was paid for; the resumed run asks for that step again (the same call index): both are spent,
    the first one counted as a discarded call beside the run's history, in the trajectory, the result and the batch's
    spending."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    calls, config = dollar_steps(tmp_path, 3)
    settings = load_config(overrides=[config], agent={"step_limit": 2})
    run = {"model": "gpt-test", "settings": settings, "output_dir": tmp_path / "out", "run_id": "r", "repo": repo}
    with OpenAIServer(replies=calls) as server:
        with pytest.raises(KeyboardInterrupt):
            run_task("Go on.", base_url=server.url, variants=[CtrlCAfterTheFirstCall()], **run)
        cut = load_trajectory(tmp_path / "out" / "r.traj.json")["info"]
        assert (cut["exit_status"], server.hits) == ("interrupted", 1)
        assert {k: cut["model_stats"][k] for k in SPENT} == {"api_calls": 0, "discarded_calls": 1, "cost": 1.0}
        assert cut["model_stats"]["input_tokens"] == 1_000_000

        resumed = run_task("Go on.", base_url=server.url, **run)
    assert (resumed.exit_status, server.hits) == ("step_limit", 3)
    assert {k: resumed.model_stats[k] for k in SPENT} == {"api_calls": 2, "discarded_calls": 1, "cost": 3.0}
    info = load_trajectory(resumed.trajectory_path)["info"]
    assert info["model_stats"] == resumed.model_stats and info["model_stats"]["input_tokens"] == 3_000_000
    assert [call["index"] for call in load_trajectory(resumed.trajectory_path)["model_calls"]] == [0, 1]


SPENT = ("api_calls", "discarded_calls", "cost")


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


def test_global_cost_limit_holds_for_runs_calling_at_the_same_moment(tmp_path: Path) -> None:
    """Three workers whose first calls the server answers only once all three have arrived: each call is admitted
    against the budget before it starts, so $4 buys four $1 calls whatever the order, never more."""
    dataset, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_steps(tmp_path, 12)
    with OpenAIServer(replies=calls, together=3) as server:
        options = priced_options(tmp_path, config, server.url, cost_limit=4.0, workers=3)
        summary = run_swebench(str(dataset), "test", options)
    assert_four_dollars(server, summary)


@pytest.mark.parametrize("prices", [{}, {"gpt-test": {"input": 0.01, "output": 0.0}}], ids=["unpriced", "cheap"])
def test_the_batch_log_says_an_instances_cost_as_the_console_does(tmp_path: Path, prices: dict[str, Any]) -> None:
    """swebench.log said `cost 0.0000` for a model without a price (its cost unknown, not nothing) and rounded a cost
    under $0.0001 to nothing; everywhere else it is `unpriced`, or dollars as errors.usd shows them."""
    dataset, rows = build_dataset(tmp_path / "data", 1)
    config = write_config(tmp_path / "c.yaml", max_format_errors=1)
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "model": {"prices": prices}}))
    with OpenAIServer(replies=["no action in this reply"]) as server:
        options = BatchOptions(
            model="gpt-test", output=tmp_path / "out", environment="local", config_files=[config], base_url=server.url
        )
        run_swebench(str(dataset), "test", options)
    cost = yaml.safe_load((options.output / "exit_statuses.yaml").read_text())["instances"][rows[0]["instance_id"]]
    assert (0 < cost["cost"] < 1e-4) if prices else cost["cost"] == 0
    said = f"cost {usd(cost['cost'])}" if prices else "cost unpriced"
    line = next(line for line in (options.output / "swebench.log").read_text().splitlines() if "patch lines" in line)
    assert f"({said}, 0 patch lines)" in line and said != "cost $0.0000", line


def test_an_instances_live_cost_and_steps_count_each_of_its_attempts(tmp_path: Path) -> None:
    """Two attempts of one instance, $3 and 3 steps each: the events the batch's live line reads said each attempt's
    own cost ($3, then from $0 again), so the line, which adds a run's rises, stayed at $3 until the instance ended at
    $6; its steps (the batch's line, exit_statuses.yaml of one interrupted) were the largest attempt's, 3, where
    `llm-ide report` counts every attempt's, 6, as the cost counts every attempt's dollars."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 2)
    data = yaml.safe_load(config.read_text())
    (tmp_path / "review.yaml").write_text(yaml.safe_dump({"responses": ["<score>3</score><reasons>Hm.</reasons>"] * 2}))
    reviewer = {"model": f"scripted:{tmp_path / 'review.yaml'}"}
    data["attempts"] = {"max": 2, "choose": "best_score", "reviewer": reviewer}
    config.write_text(yaml.safe_dump(data))
    (instance,) = load_dataset(str(dataset)).instances
    told: list[float] = []
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url)
        tell = lambda _, event: told.append(event.cost) if event.kind in ("step", "end") else None  # noqa: E731
        ended = run_instance(instance, options, batch_config(options), OutputStore(options.output), on_event=tell)
    assert (ended.exit_status, ended.cost, ended.steps, server.hits) == ("submitted", 6.0, 6, 6)
    assert told == sorted(told) and told[-1] == 6.0, told
    report = invoke("report", str(options.output))
    assert report.stdout.splitlines()[-1] == "1 of 1 instance shown; their total 6 steps, $6.0000", report.stdout
