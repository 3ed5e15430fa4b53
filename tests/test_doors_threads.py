"""A thread given again at each door — in another repository, with another model, finished, of another task or of a
run without attempts, a batch's instance whose task changed — is told in the words of the door it came through:
`llm-ide run`'s options, the Python API's arguments, swebench-single's and swebench's options."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, act, write_script
from conftest import make_git_repo
from in_process import invoke
from swebench_fixtures import FIX_COMMAND, build_dataset
from swebench_fixtures import write_script as batch_script

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.run.single import run_task


def test_a_thread_resumed_in_another_repository_names_the_python_apis_arguments(tmp_path: Path) -> None:
    """run_task's and run_attempts' callers, who pass repo= and run_id=, were told of "--repo" and "a new
    --thread-id", the command line's options (which `llm-ide run` still says: tests/test_resume.py)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    other = make_git_repo(tmp_path / "other", {"b.py": "y = 1\n"})
    values = {"model": write_script(tmp_path / "s.yaml", FIX_SCRIPT), "output_dir": tmp_path / "out", "run_id": "T"}
    settings = load_config(agent={"step_limit": 1}, environment={"tools": []})
    first = run_task("Fix Cart.total.", settings=settings, repo=repo, **values)
    assert first.exit_status == "step_limit"
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout[:12]
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api("Fix Cart.total.", settings=settings, repo=other, **values)
        assert str(raised.value) == (
            f"thread T started in {repo}; `repo` {other} is another repository (no commit {base}, the thread's base): "
            "give the thread's repository (or a clone of it), or a new `run_id`"
        )


@pytest.mark.parametrize("door", ["run", "run_task"])
def test_a_thread_resumed_with_another_model_goes_on_with_it_and_says_so(tmp_path: Path, door: str) -> None:
    """`llm-ide run --thread-id T -m OTHER` and run_task(model=OTHER) went on with OTHER unsaid (Studio dropped it:
    tests/test_studio_threads.py); each door now says it, in the same line."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    first = write_script(tmp_path / "first.yaml", FIX_SCRIPT)
    other = write_script(tmp_path / "other.yaml", [FIX_SCRIPT[1], act("Submit as it is.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    said = f"run T started with model {first}: it goes on with model {other}, the one given now"
    args = ["run", "--repo", str(repo), "-t", "Fix Cart.total.", "-c", "c.yaml", "-o", "out", "--thread-id", "T"]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    stopped = invoke(*args, "-m", first, "--step-limit", "1", cwd=tmp_path, env=env)
    assert stopped.returncode == 1 and "step_limit" in stopped.stdout, stopped.stdout + stopped.stderr
    if door == "run":
        again = invoke(*args, "-m", other, "--step-limit", "4", cwd=tmp_path, env=env)
        assert again.returncode == 0 and said in again.stdout, again.stdout + again.stderr
        return
    phases: list[str] = []
    settings = load_config(agent={"step_limit": 4}, environment={"tools": []})
    result = run_task("Fix Cart.total.", model=other, settings=settings, repo=repo, output_dir=tmp_path / "out",
                      run_id="T", on_event=lambda event: phases.append(event.phase or ""))  # fmt: skip
    assert result.exit_status == "submitted" and said in phases, phases


@pytest.mark.parametrize("door", ["run", "run_task", "run_attempts"])
def test_a_finished_thread_given_again_names_the_doors_way_to_run_it_anew(tmp_path: Path, door: str) -> None:
    """run_task's and run_attempts' callers, who pass run_id= and output_dir=, were told "a new --thread-id or output
    folder runs the task anew", the command line's words (which `llm-ide run` still says)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = ["run", "--repo", str(repo), "-t", "Fix Cart.total.", "-c", "c.yaml", "-o", "out", "--thread-id", "T"]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    first = invoke(*args, "-m", model, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    said = "run T had already finished (submitted): its result again; "
    if door == "run":
        again = invoke(*args, "-m", model, cwd=tmp_path, env=env)
        assert f"{said}a new --thread-id or output folder runs the task anew" in again.stdout, again.stdout
        return
    phases: list[str] = []
    api = run_task if door == "run_task" else run_attempts
    settings = load_config(environment={"tools": []})
    result = api("Fix Cart.total.", model=model, settings=settings, repo=repo, output_dir=tmp_path / "out",
                 run_id="T", on_event=lambda event: event.kind == "phase" and phases.append(event.phase))  # fmt: skip
    assert result.exit_status == "submitted" and phases == [f"{said}a new `run_id` or `output_dir` runs the task anew"]


@pytest.mark.parametrize("given", ["another task", "attempts"])
def test_a_thread_the_api_cannot_go_on_with_names_a_new_run_id(tmp_path: Path, given: str) -> None:
    """A thread id of another task (run_task) or of a run without attempts (run_attempts with attempts.max 2) told
    the Python API's callers to "give a new --thread-id", the command line's option (which `llm-ide run` still says:
    tests/test_cli_resume.py, tests/test_attempts_resume.py)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    values = {"model": write_script(tmp_path / "s.yaml", FIX_SCRIPT), "output_dir": tmp_path / "out", "run_id": "T"}
    settings = load_config(environment={"tools": []})
    assert run_task("Fix Cart.total.", settings=settings, repo=repo, **values).exit_status == "submitted"
    with pytest.raises(UsageError) as raised:
        if given == "another task":
            run_task("Another task.", settings=settings, repo=repo, **values)
        else:
            run_attempts("Fix Cart.total.", settings=settings.merged({"attempts": {"max": 2}}), repo=repo, **values)
    said = {
        "another task": "thread id 'T' is a run of another task; give a new `run_id` (or the same task to resume)",
        "attempts": f"thread T is a run without attempts ({tmp_path / 'out' / 'T.traj.json'}): resume it as it ran "
        "(attempts.max: 1), or give a new `run_id`",
    }
    assert str(raised.value) == said[given]


def test_swebench_single_given_a_finished_instance_again_names_its_own_way_to_run_it_anew(tmp_path: Path) -> None:
    """swebench-single, which has no --thread-id, said "a new --thread-id or output folder" (then the Python API's
    words) of an instance it had finished: its own option now, --output."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "s.yaml", [act("Submit as it is.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = ["swebench-single", "--subset", str(dataset), "-i", "0", "--environment", "local", "-m", model]
    args += ["-c", "c.yaml"]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    assert invoke(*args, "-o", "out", cwd=tmp_path, env=env).returncode == 0
    again = invoke(*args, "-o", "out", cwd=tmp_path, env=env)
    said = "… run demo__calc-1 had already finished (submitted): its result again; another --output runs the task anew"
    assert again.returncode == 0 and said in again.stdout.splitlines(), again.stdout + again.stderr


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_batchs_instance_whose_thread_ran_another_task_names_the_batchs_options(
    tmp_path: Path, checkpoint: bool
) -> None:
    """`swebench` resuming an instance whose thread (in its folder, or a --checkpoint store) ran another problem
    statement said "AnotherTask: … give a new `run_id`", the Python API's words, with a traceback in swebench.log."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    model = batch_script(tmp_path / "fix.yaml", ["ls", FIX_COMMAND])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\nagent: {step_limit: 1}\n")
    args = ["swebench", "--subset", str(dataset), "--split", "test", "--model", model, "--environment", "local"]
    args += ["-c", "c.yaml", *(["--checkpoint", f"sqlite:{tmp_path / 'threads.db'}"] if checkpoint else [])]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    assert invoke(*args, "-o", "first", cwd=tmp_path, env=env).returncode == 0
    dataset.write_text(dataset.read_text().replace('"problem_statement": "', '"problem_statement": "Now: '))
    if not checkpoint:  # an instance interrupted in its folder: its thread resumes there, its task changed meanwhile
        (tmp_path / "first" / "preds.json").unlink()
    again = invoke(*args, "-o", "second" if checkpoint else "first", cwd=tmp_path, env=env)
    new = "another --output and --checkpoint" if checkpoint else "another --output"
    said = f"thread id 'demo__calc-1' is a run of another task; give {new} (or the same task to resume)"
    assert f"demo__calc-1: error (0 steps, $0.0000): {said}" in " ".join(again.stdout.split()), again.stdout
    log = (tmp_path / ("second" if checkpoint else "first") / "swebench.log").read_text()
    assert f"demo__calc-1: error (0 steps): {said}" in log and "Traceback" not in log
