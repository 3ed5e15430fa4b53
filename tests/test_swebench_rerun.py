"""A batch run again (local environment, no docker): --redo-existing with a checkpoint store outside the run
folders, a repository that lacks an instance's base commit, the batch's cost limit with less than a call left."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from attempts_scripts import review, scripts
from in_process import invoke
from openai_server import OpenAIServer, Reply
from swebench_fixtures import (
    FIX_COMMAND,
    WRONG_COMMAND,
    build_dataset,
    dollar_calls,
    priced_options,
    script,
    write_config,
    write_script,
)

from llm_ide.swebench.batch import BatchOptions, run_swebench
from llm_ide.swebench.store import OutputStore, read_preds, statuses_from_trajectories


def test_redo_existing_with_a_shared_checkpoint_store_runs_the_instance_afresh(tmp_path: Path) -> None:
    """The threads of --checkpoint sqlite:PATH (or postgres) outlive the run folders: a redone instance resumed its
    finished thread, and preds.json got the old patch again with the new model's name."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    options = BatchOptions(
        model=write_script(tmp_path / "wrong.yaml", [WRONG_COMMAND]),
        output=tmp_path / "out",
        environment="local",
        config_files=[write_config(tmp_path / "c.yaml")],
        checkpoint=f"sqlite:{tmp_path / 'threads.sqlite'}",
    )
    first = run_swebench(str(dataset), "test", options)
    assert first.counts() == {"submitted": 1}
    assert "README.md" in read_preds(options.output)[row["instance_id"]]["model_patch"]

    options.model, options.redo_existing = write_script(tmp_path / "fix.yaml", [FIX_COMMAND]), True
    redo = run_swebench(str(dataset), "test", options)
    assert redo.counts() == {"submitted": 1}
    assert read_preds(options.output)[row["instance_id"]]["model_patch"] == row["patch"]


def test_a_repository_without_the_instances_base_is_its_environment_error_and_leaves_no_clone(tmp_path: Path) -> None:
    """It was a crash: a traceback in swebench.log, `SWEbenchError: <id>: …` on the console, and the half clone
    (`repo.partial`, a whole repository's objects) left in the instance's folder, then an empty folder."""
    dataset, rows = build_dataset(tmp_path / "data", 2)
    lost = {**rows[0], "base_commit": "0" * 40}
    dataset.write_text("".join(json.dumps(row) + "\n" for row in [lost, rows[1]]))
    options = BatchOptions(
        model=write_script(tmp_path / "fix.yaml", [FIX_COMMAND]),
        output=tmp_path / "out",
        environment="local",
        config_files=[write_config(tmp_path / "c.yaml")],
    )
    for _ in range(2):  # not a prediction: the next run tries it again
        summary = run_swebench(str(dataset), "test", options)
        failed = summary.outcomes[lost["instance_id"]]
        assert (failed.exit_status, failed.steps) == ("environment_error", 0)
        assert failed.error == f"{lost['repo']} holds neither the base commit {'0' * 40} nor a branch demo__calc-1"
        assert list(read_preds(options.output)) == [rows[1]["instance_id"]]
    assert not (options.output / lost["instance_id"]).exists()
    log = (options.output / "swebench.log").read_text()
    assert "Traceback" not in log and f"demo__text-1: starting (checkout {options.output}/demo__text-1/repo)" in log
    assert log.count(f"WARNING demo__calc-1: environment_error (0 steps): {lost['repo']} holds neither") == 2


def test_a_rerun_with_less_than_a_call_left_in_the_batchs_limit_makes_no_call(tmp_path: Path) -> None:
    """$4 of $4.50 spent by $1 calls: the run stopped, and the same command again let its first call through as free
    (the budget knew no call's price yet), spending $5 of $4.50."""
    dataset, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_calls(tmp_path, 3)
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url, cost_limit=4.5)
        first = run_swebench(str(dataset), "test", options)
        assert (server.hits, first.cost, first.not_started) == (4, 4.0, ["demo__shapes-1"])
        again = run_swebench(str(dataset), "test", options)
    assert (server.hits, again.outcomes, again.not_started) == (4, {}, ["demo__shapes-1"])
    assert OutputStore(options.output).spent() == 4.0


def test_the_console_says_once_that_the_batchs_limit_left_instances_unstarted(tmp_path: Path) -> None:
    """The batch's log line came after the log was closed: Python's own handler printed it on the console as well, as
    "1 instances not started", under the command's own line."""
    dataset, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_calls(tmp_path, 3)
    with OpenAIServer(replies=calls) as server:
        ran = invoke(
            "swebench", "--subset", str(dataset), "--split", "test", "--model", "gpt-test", "--base-url", server.url,
            "--output", str(tmp_path / "out"), "--environment", "local", "--config", str(config), "--cost-limit", "4",
        )  # fmt: skip
    said = ran.stdout + ran.stderr
    assert ran.returncode == 0, said
    assert said.count("global cost limit") == 1 and "1 instance not started" in said and "batch:" not in said
    log = (tmp_path / "out" / "swebench.log").read_text()
    assert "reached (spent $4.0000, earlier runs in this folder included); 1 instance not started" in log


def ran_at_rising_limits(args: list[str], output: Path, row: dict) -> subprocess.CompletedProcess[str]:
    """The batch at --step-limit 1 (it stops there and prints the command that goes on), again at 1 (skipped), then
    with none (it goes on): the fix in preds.json from the first step on; the last run."""
    first = "1 instance run (0 resumed, 1 new), 0 skipped"
    ran_as = [("1", first), ("1", "0 instances run, 1 skipped"), ("0", "1 instance stopped at")]
    for limit, said in ran_as:
        ran = invoke(*args, "--step-limit", limit)
        assert ran.returncode == 0 and said in ran.stdout, ran.stdout + ran.stderr
        assert read_preds(output)[row["instance_id"]]["model_patch"] == row["patch"]  # the fix, from the first step
        assert ("0/0 done" in ran.stdout, "0 instances\n" in ran.stdout) == (False, False)  # (none to run: no progress)
        if "0 skipped" in said:
            assert shlex.split(ran.stdout.splitlines()[-1]) == ["llm-ide", *args, "--step-limit", "2"]
    return ran


def test_an_instance_stopped_at_its_step_limit_goes_on_when_the_batch_is_given_a_higher_one(tmp_path: Path) -> None:
    """It was finished for good: the same command with a higher --step-limit skipped it, and only --redo-existing
    went further, every step paid again. Now it goes on from its last step (the scripted model's replies and the
    commands not repeated); the same limit still skips it."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "git diff --stat"])
    config, output = write_config(tmp_path / "c.yaml", step_limit=1), tmp_path / "out"
    args = ["swebench", "--subset", str(dataset), "--model", model, "--environment", "local", "-c", str(config)]
    args += ["-o", str(output)]
    ran = ran_at_rising_limits(args, output, row)
    assert "goes on from its last step, under the limits given now" in ran.stdout
    assert "1 instance run (1 resumed, 0 new), 0 skipped" in ran.stdout
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())["instances"]
    assert statuses[row["instance_id"]]["exit_status"] == "submitted"
    traj = json.loads((output / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
    commands = [op["action_params"].get("command") for op in traj["operations"]]
    assert commands == [FIX_COMMAND, "git diff --stat", None] and traj["info"]["exit_status"] == "submitted"


def test_an_instances_attempts_stopped_at_their_step_limit_go_on_when_the_batch_is_given_a_higher_one(
    tmp_path: Path,
) -> None:
    """With attempts the instance stayed finished at any limit: now its attempts go on from their last step (each
    attempt's commands not run twice), are reviewed and chosen among again; the same limit still skips it."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    reviews = [review(2, "Unfinished."), review(2, "Unfinished."), review(9, "Fixed."), review(1, "Unneeded.")]
    model = scripts(tmp_path / "scripts", [script([FIX_COMMAND, "git diff --stat"])] * 2, reviews)
    config, output = tmp_path / "c.yaml", tmp_path / "out"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 2, "parallel": True}}))
    args = ["swebench", "--subset", str(dataset), "--model", model, "--environment", "local", "-c", str(config)]
    args += ["-o", str(output)]
    ran_at_rising_limits(args, output, row)
    folder = output / row["instance_id"]
    traj = json.loads((folder / f"{row['instance_id']}.traj.json").read_text())
    assert [(a["exit_status"], a["score"]) for a in traj["info"]["attempts"]] == [
        ("submitted", 9.0),
        ("submitted", 1.0),
    ]
    for index in (1, 2):
        own = json.loads((folder / f"attempt{index}" / f"{row['instance_id']}-attempt{index}.traj.json").read_text())
        commands = [op["action_params"].get("command") for op in own["operations"]]
        assert commands == [FIX_COMMAND, "git diff --stat", None]
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())["instances"]
    assert statuses[row["instance_id"]]["exit_status"] == "submitted"


def test_a_finished_instance_that_accepted_no_attempt_gets_more_when_the_batch_is_given_a_higher_attempts_max(
    tmp_path: Path,
) -> None:
    """It was skipped as finished: now its third attempt runs, and the choice among the three is its prediction; the
    same maximum still skips it. The batch said it had stopped at a limit and went on from its last step."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    attempts = [script([WRONG_COMMAND])] * 2 + [script([FIX_COMMAND])]
    model = scripts(tmp_path / "scripts", attempts, [review(3, "No."), review(2, "No."), review(9, "Fixed.")])
    config, output = tmp_path / "c.yaml", tmp_path / "out"
    args = ["swebench", "--subset", str(dataset), "--model", model, "--environment", "local", "-c", str(config)]
    more = "1 instance finished in an earlier run with no attempt accepted gets more attempts, up to attempts.max"
    first = "1 instance run (0 resumed, 1 new), 0 skipped"
    for most, said in [(2, first), (2, "0 instances run, 1 skipped"), (3, more)]:
        config.write_text(yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": most, "accept_score": 8}}))
        ran = invoke(*args, "-o", str(output))
        assert ran.returncode == 0 and said in ran.stdout and "stopped at a limit" not in ran.stdout, ran.stdout
        assert ("README.md" in read_preds(output)[row["instance_id"]]["model_patch"]) == (most == 2)
    assert read_preds(output)[row["instance_id"]]["model_patch"] == row["patch"]
    traj = json.loads((output / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
    assert [(a["index"], a["score"]) for a in traj["info"]["attempts"]] == [(1, 3.0), (2, 2.0), (3, 9.0)]


@pytest.mark.parametrize(("program", "chosen"), [("llm-ide", "--model"), ("mini-extra", "--model"), ("llm-ide", "env")])
def test_a_batch_stopped_at_its_step_limit_prints_the_command_that_goes_on_and_it_does(
    tmp_path: Path, program: str, chosen: str
) -> None:
    """`run` printed the command that goes on from a limit, the batch said only `step_limit: 1`: now it says how, and
    with a step limit prints the command, the limit doubled; pasted as printed, again after each stop, it goes on
    from the last step (no command run twice) to the end (swebench-single: as `run`, in the test below). A model
    $LLM_IDE_MODEL chose is named in it (pasted without the variable, it said 'no model')."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "git diff --stat", "git status --short"])
    config, output = write_config(tmp_path / "c.yaml"), tmp_path / "out"
    named = ["--model", model] if chosen == "--model" else []
    args = ["swebench", "--subset", str(dataset), *named, "--environment", "local", "-c", str(config)]
    args += ["-o", str(output), "--step-limit", "1"]
    environ = {key: value for key, value in os.environ.items() if key != "LLM_IDE_MODEL"}
    ran = invoke(*args, program=program, env=environ if named else {**environ, "LLM_IDE_MODEL": model})
    for limit in (2, 4):
        said = "1 instance stopped at a limit: the same command with a higher --step-limit goes on from its last step"
        assert ran.stdout.splitlines()[-2] == said, ran.stdout + ran.stderr
        again = shlex.split(ran.stdout.splitlines()[-1])
        assert again == [program, *args[:-2], *([] if named else ["--model", model]), "--step-limit", str(limit)]
        ran = invoke(*again[1:], program=program, env=environ)
    assert "stopped at a limit:" not in ran.stdout and ran.returncode == 0, ran.stdout + ran.stderr
    traj = json.loads((output / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
    commands = [op["action_params"].get("command") for op in traj["operations"]]
    assert commands == [FIX_COMMAND, "git diff --stat", "git status --short", None]


@pytest.mark.parametrize("program", ["swebench", "swebench-single"])
def test_a_config_read_from_a_pipe_is_kept_and_the_command_that_goes_on_names_the_copy(
    tmp_path: Path, program: str
) -> None:
    """`-c <(…)`: the batch read the stream at its first use and found it empty at the next (its step limit, its
    tools: silently the defaults), and the command printed named /dev/fd/63, gone; now the config is saved in the
    output folder as it is read, as `run` does, and the command names that copy."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    config = yaml.safe_dump({"environment": {"tools": []}, "agent": {"step_limit": 1}})
    chosen = ["-i", row["instance_id"]] if program == "swebench-single" else []
    args = [program, "--subset", str(dataset), *chosen, "--model", model, "--environment", "local", "-o", "out"]
    reader, writer = os.pipe()  # `<(…)`: /dev/fd/N, a pipe whose writer has written and closed
    os.write(writer, config.encode())
    os.close(writer)
    try:
        first = invoke(*args, "-c", f"/dev/fd/{reader}", cwd=tmp_path)
    finally:
        os.close(reader)
    said = (first.stderr if chosen else first.stdout).splitlines()
    assert "step_limit" in first.stdout and first.returncode == (1 if chosen else 0), first.stdout + first.stderr
    copy = tmp_path / "out" / f"{program}.config.yaml"
    assert shlex.split(said[-1]) == ["llm-ide", *args, "-c", str(copy.relative_to(tmp_path)), "--step-limit", "2"]
    assert copy.read_text() == config
    went_on = invoke(*shlex.split(said[-1])[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and "submitted" in went_on.stdout, went_on.stdout + went_on.stderr
    traj = json.loads((tmp_path / "out" / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
    assert [op["action_params"].get("command") for op in traj["operations"]] == [FIX_COMMAND, None]


def test_a_batch_kept_in_memory_stopped_at_its_step_limit_says_it_cannot_go_on(tmp_path: Path) -> None:
    """`--checkpoint memory`: the batch printed the command that goes on, which skipped the instance as finished (its
    thread gone with the process)."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "git diff --stat"])
    args = ["swebench", "--subset", str(dataset), "--model", model, "--environment", "local", "--checkpoint", "memory"]
    args += ["-c", str(write_config(tmp_path / "c.yaml")), "-o", str(tmp_path / "out"), "--step-limit", "1"]
    ran = invoke(*args)
    assert ran.stdout.splitlines()[-1] == (
        "1 instance stopped at a limit: its thread was in memory only (--checkpoint memory) and is gone; the same "
        "command skips it as finished; a batch with a checkpoint that outlives the process (the default, or "
        "--checkpoint sqlite:PATH|postgres://…) can go on after a limit"
    ), ran.stdout + ran.stderr
    again = invoke(*args[:-1], "2")
    assert "0 instances run, 1 skipped as finished" in again.stdout and "step   " not in again.stdout, again.stdout
    status = json.loads((tmp_path / "out" / row["instance_id"] / f"{row['instance_id']}.traj.json").read_text())
    assert status["info"]["exit_status"] == "step_limit"


def test_instances_the_batchs_cost_limit_stopped_go_on_when_it_is_raised(tmp_path: Path) -> None:
    """$1 calls, $2 for the batch: the instance stopped after two calls; the same limit again makes no call, a higher
    one lets it go on from there (one more call, not three), and what it spent counts once."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    calls, config = dollar_calls(tmp_path, 1)
    with OpenAIServer(replies=calls) as server:
        options = priced_options(tmp_path, config, server.url, cost_limit=2.0)
        runs = [run_swebench(str(dataset), "test", options) for _ in range(2)]
        options.cost_limit = 5.0
        runs.append(run_swebench(str(dataset), "test", options))
        assert server.hits == 3
    assert [run.counts() for run in runs] == [{"cost_limit": 1}, {}, {"submitted": 1}]
    assert [run.skipped_existing for run in runs] == [[], [row["instance_id"]], []]
    assert OutputStore(options.output).spent() == 3.0 and runs[-1].cost == 3.0
    assert read_preds(options.output)[row["instance_id"]]["model_patch"] == row["patch"]


def test_swebench_single_stopped_at_its_step_limit_prints_the_command_that_goes_on_and_it_does(tmp_path: Path) -> None:
    """`run` printed it, `swebench-single` said only `step_limit after 1 step`; pasted, the command goes on from the
    step it stopped at."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND, "git diff --stat"])
    args = ["swebench-single", "--subset", str(dataset), "-i", row["instance_id"], "--model", model]
    args += ["--environment", "local", "-c", str(write_config(tmp_path / "c.yaml")), "-o", str(tmp_path / "out")]
    stopped = invoke(*args, "--step-limit", "1")
    said = stopped.stderr.splitlines()
    assert stopped.returncode == 1 and said[-2] == "it goes on from its last step with a higher step limit:", said
    program, *pasted = shlex.split(said[-1])
    assert (program, pasted) == ("llm-ide", [*args, "--step-limit", "2"])
    went_on = invoke(*pasted)  # one step more (the limit doubled), the first not run again
    assert "step   2 bash: git diff --stat" in went_on.stdout and "step   1 " not in went_on.stdout, went_on.stdout
    assert went_on.returncode == 1 and "step_limit after 2 steps" in went_on.stdout
    assert went_on.stderr.splitlines()[-1].endswith("--step-limit 4")


def navigated_single(tmp_path: Path, replies: list[Reply], gate: list[str]) -> tuple[str, str]:
    """`swebench-single` of one instance under a $0.50 --cost-limit, its navigator's `replies` priced at $1 per 1,000
    input tokens (permission asked for `gate`): what it said, and the instance."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    with OpenAIServer(replies=replies) as server:
        nav = {"mode": "model", "model": "navigator-test", "base_url": server.url, "gate": gate}
        prices = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        config = tmp_path / "nav.yaml"
        config.write_text(yaml.safe_dump({"environment": {"tools": []}, "navigator": nav, "model": prices}))
        args = ["--subset", str(dataset), "-i", row["instance_id"], "--model", model, "--environment", "local"]
        done = invoke("swebench-single", *args, "-c", str(config), "-o", "out", "--cost-limit", "0.5", cwd=tmp_path)
    return done.stdout + done.stderr, row["instance_id"]


def test_swebench_single_its_navigator_brought_to_its_cost_limit_prints_the_command_that_goes_on(
    tmp_path: Path,
) -> None:
    """The navigator's permission for the first command spends $1 of a $0.50 --cost-limit: `run` printed the command
    with the limit doubled (its cost counts the navigator's), swebench-single nothing (it read the driver's $0)."""
    plan = Reply(text="<plan>Fix it.</plan>", input_tokens=100, output_tokens=0)
    approve = Reply(text="<approve>Fine.</approve>", input_tokens=1000, output_tokens=0)
    said, _ = navigated_single(tmp_path, [plan, approve], ["bash"])
    assert "is reached (spent $1.1000: the driver $0.0000, the navigator $1.1000)" in said, said  # (no parts before)
    assert said.rstrip().endswith("--cost-limit 2"), said
    assert "cost_limit after 1 step, $0.0000; its navigator: 2 model calls, 1100+0 tokens, $1.1000" in said, said


def test_swebench_single_a_run_its_navigator_stopped_before_the_drivers_first_call_keeps_its_folder(
    tmp_path: Path,
) -> None:
    """The navigator's plan spends $1 of a $0.50 --cost-limit before the driver's first call: taken for a run the
    batch's budget refused (no driver call), its folder went (the trajectory, the record of the $1 paid) and the
    instance stayed out of preds.json, so a rerun paid the navigator again."""
    plan = Reply(text="<plan>Fix it.</plan>", input_tokens=1000, output_tokens=0)
    said, instance = navigated_single(tmp_path, [plan], [])
    traj = tmp_path / "out" / instance / f"{instance}.traj.json"
    assert traj.is_file(), said
    info = json.loads(traj.read_text())["info"]
    assert (info["exit_status"], info["model_stats"]["api_calls"], info["navigator"]["usage"]["cost"]) == (
        "cost_limit",
        0,
        1.0,
    )
    assert read_preds(tmp_path / "out")[instance]["model_patch"] == ""
    assert said.rstrip().endswith("--cost-limit 2"), said


@pytest.mark.parametrize("attempts", [1, 2])
def test_a_batch_counts_its_navigators_spend_in_each_instances_cost(tmp_path: Path, attempts: int) -> None:
    """Each navigator's plan costs $1 (the driver's calls $0): the progress line, the batch's total and
    exit_statuses.yaml (which a rerun's --cost-limit counts as spent) said $0.0000, its attempts' or not."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = scripts(tmp_path / "scripts", [script([FIX_COMMAND])] * 2, [review(3, "No."), review(9, "Fixed.")])
    model = model if attempts > 1 else model.replace("{attempt}", "1")
    plan = Reply(text="<plan>Fix it.</plan>", input_tokens=1000, output_tokens=0)
    with OpenAIServer(replies=[plan]) as server:
        nav = {"mode": "model", "model": "navigator-test", "base_url": server.url, "gate": []}
        prices = {"prices": {"navigator-test": {"input": 1000.0, "output": 0.0}}}
        config = {"environment": {"tools": []}, "navigator": nav, "model": prices, "attempts": {"max": attempts}}
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
        args = ["--subset", str(dataset), "--model", model, "--environment", "local", "-c", "c.yaml", "-o", "out"]
        done = invoke("swebench", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    spent = f"${attempts}.0000"
    steps = f"{2 * attempts} steps"  # every attempt's, as its cost is
    assert f"{row['instance_id']}: submitted ({steps}, {spent}) | total {spent}" in done.stdout, done.stdout
    assert f"1/1 done, cost {spent}" in done.stdout, done.stdout
    status = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"][row["instance_id"]]
    assert (status["cost"], status["calls_apart"]) == (attempts, attempts)
    assert OutputStore(tmp_path / "out").spent() == attempts
    assert statuses_from_trajectories(tmp_path / "out")[row["instance_id"]]["cost"] == attempts


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_swebench_single_streams_each_reply_with_verbose_as_run_does(tmp_path: Path, flag: str) -> None:
    """`swebench-single -v` was "No such option" (it had run's --thoughts, not run's -v/--verbose)."""
    dataset, (row,) = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    args = ["swebench-single", "--subset", str(dataset), "-i", row["instance_id"], "--model", model]
    args += ["--environment", "local", "-c", str(write_config(tmp_path / "c.yaml")), "--step-limit", "1"]
    quiet = invoke(*args, "-o", str(tmp_path / "quiet"))
    verbose = invoke(*args, "-o", str(tmp_path / "verbose"), flag)
    assert (quiet.returncode, verbose.returncode) == (1, 1), verbose.stdout + verbose.stderr
    assert "<action_params>" in verbose.stdout and "<action_params>" not in quiet.stdout, verbose.stdout
