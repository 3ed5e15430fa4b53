"""Attempts killed, stopped and resumed (issue 11): a kill or Ctrl-C during an attempt resumed with the finished ones
kept, a model error's rerun, a stop said in the trajectory and by inspect, and a thread resumed as the kind of run it
was, in its own repository only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect
from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, review, scripts, write
from attempts_support import NO_TOOLS, settings
from conftest import killed_in_command, make_git_repo
from in_process import invoke

from llm_ide import run_attempts  # the Python API
from llm_ide.inspector.load import load_run
from llm_ide.inspector.page import run_page


def llm_ide(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from llm_ide.cli import app; app()", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


@pytest.mark.slow
def test_a_kill_during_attempt_2_resumes_it_with_attempt_1_kept_and_the_command_run_again(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    trail, waiting, go = tmp_path / "trail.txt", tmp_path / "waiting", tmp_path / "go"
    wait = f"echo a2-wait-start >> {trail}; touch {waiting}; while [ ! -f {go} ]; do sleep 0.05; done; "
    wait += f"echo a2-wait-end >> {trail}"
    second = [
        act("Record.", "bash", command=f"echo a2-first >> {trail}"),
        reflect(False, "recorded"),
        act("Wait.", "bash", command=wait),
        reflect(False, "waited"),
        act("Fix.", "bash", command=RIGHT),
        reflect(False, "fixed"),
        act("Done.", "submit"),
    ]
    first = [act("Record.", "bash", command=f"echo a1 >> {trail}"), reflect(False, "recorded"),
             *attempt_script(WRONG)[2:]]  # fmt: skip
    tries = [first, second, attempt_script(RIGHT)]  # the third is never run
    model = scripts(tmp_path / "scripts", tries, [review(2, "README only."), review(9, "Fixed.")])
    config = tmp_path / "config.yaml"
    mark = f"{tmp_path.name}-{os.getpid()}"  # in the environment of the run's commands
    # the trail and the signal files are beside the worktrees
    environment = {"tools": [], "writable": [str(tmp_path)], "env": {"LLM_IDE_TEST_MARK": mark}}
    config.write_text(yaml.safe_dump({"environment": environment, "attempts": {"max": 3}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "T"]
    args += ["--output", str(tmp_path / "out"), "--config", str(config)]
    killed = llm_ide(*args, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not waiting.exists():
        assert killed.poll() is None, killed.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    killed_in_command(killed, mark)
    first_traj = (tmp_path / "out" / "attempt1" / "T-attempt1.traj.json").read_bytes()

    go.touch()
    resumed = invoke(*args, cwd=tmp_path)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert "resuming run T: attempts [1] finished are kept" in output
    # the trail is outside the worktree: the killed command's first half is there twice (it ran again, as its
    # observation says); every other command once
    assert trail.read_text() == "a1\na2-first\na2-wait-start\na2-wait-start\na2-wait-end\n"
    assert (tmp_path / "out" / "attempt1" / "T-attempt1.traj.json").read_bytes() == first_traj
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert [(a["index"], a["score"], a["chosen"]) for a in traj["info"]["attempts"]] == [
        (1, 2.0, False),
        (2, 9.0, True),
    ]
    assert [c["attempt"] for c in traj["model_calls"] if c["kind"] == "review"] == [1, 2]
    second_ops = [op for op in traj["operations"] if op["attempt"] == 2]
    assert [op["thought"] for op in second_ops] == ["Record.", "Wait.", "Fix.", "Done."]
    assert second_ops[1]["observation"].startswith("[The run was stopped while this command ran.")
    assert "+    return x + x\n" in traj["info"]["submission"]
    assert "attempt 2: submitted, score 9, $0.0000 (chosen)" in output


def test_a_run_stopped_before_it_chose_says_so_not_an_empty_patch(tmp_path: Path) -> None:
    """The reviewer failed after both attempts submitted: the run printed `(empty patch)`, as if they found nothing."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(5, "Fixed.")])
    (config := tmp_path / "config.yaml").write_text(
        yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 2}})
    )
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "T"]
    done = invoke(*args, "--output", str(tmp_path / "out"), "--config", str(config), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "patch: none chosen yet: the run stopped before it chose among its attempts (2 submitted)" in done.stdout
    assert "(empty patch)" not in done.stdout and not (tmp_path / "out" / "T.patch").exists()
    assert "the run goes on where it stopped (model_error) with:" in done.stderr


def test_an_attempts_thread_resumed_in_another_repository_is_refused(tmp_path: Path) -> None:
    """As a run's (tests/test_resume.py): `--thread-id T --repo OTHER`, T's attempts begun in another repository."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(5, "Fixed.")])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}, "attempts": {"max": 2}}))
    args = ["run", "--task", TASK, "--model", model, "--thread-id", "T", "--output", "out", "--config", "config.yaml"]
    stopped = invoke(*args, "--repo", str(repo), cwd=tmp_path)  # the reviewer's script ran out: it goes on
    assert stopped.returncode == 1 and "goes on where it stopped" in stopped.stderr, stopped.stdout + stopped.stderr
    other = make_git_repo(tmp_path / "other", {"b.py": "y = 1\n"})
    refused = invoke(*args, "--repo", str(other), cwd=tmp_path)
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1), refused.stdout + refused.stderr
    assert refused.stderr.startswith(f"error: thread T started in {repo}; --repo {other} is another repository (no")
    assert sorted(path.name for path in other.iterdir()) == [".git", "b.py"]


@pytest.mark.parametrize(
    ("how", "status", "error", "resumed"),
    [
        ("ctrl-c", "interrupted", "interrupted by the user", "submitted"),
        ("step limit", "step_limit", "attempt 2: the run's step limit (1) is reached", "step_limit"),
    ],
)
def test_an_attempts_run_stopped_says_how_in_its_trajectory_and_inspect(
    tmp_path: Path, how: str, status: str, error: str, resumed: str
) -> None:
    """Ctrl-C left the combined trajectory without an exit status (`inspect`: `None`, `chosen: no attempt ()`), and a
    run whose attempts all reached a limit did not say which."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    attempts, reviews = [attempt_script(RIGHT), attempt_script(RIGHT)], [review(2, "x"), review(2, "y")]
    model = scripts(tmp_path / "scripts", attempts, reviews)
    limits = {"agent": {"step_limit": 1}} if how == "step limit" else {}
    run = {"model": model, "settings": settings(max=2).merged(limits), "output_dir": tmp_path / "out", "run_id": "T"}

    def ctrl_c_at_the_second_step(event) -> None:
        if how == "ctrl-c" and event.kind == "step" and event.step == 2:
            raise KeyboardInterrupt

    try:
        result = run_attempts(TASK, repo=repo, on_event=ctrl_c_at_the_second_step, **run)
    except KeyboardInterrupt:
        result = None
    assert (how == "ctrl-c") == (result is None)
    info = json.loads((tmp_path / "out" / "T.traj.json").read_text())["info"]
    assert (info["exit_status"], info["error"]) == (status, error)
    shown = invoke("inspect", str(tmp_path / "out" / "T.traj.json"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"T: {status} — ") and f"ended: {error}" in shown.stdout
    assert ("chosen:" in shown.stdout) == (how != "ctrl-c")  # no choice made yet: none shown
    assert status in run_page(load_run(tmp_path / "out" / "T.traj.json"))
    again = run_attempts(TASK, repo=repo, **run)  # the interrupted run resumes; the limited one is its result again
    assert again.exit_status == resumed


@pytest.mark.slow
def test_ctrl_c_stops_parallel_attempts_and_the_rerun_resumes_both(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    go = tmp_path / "go"

    def waiting(number: int) -> list[str]:
        started = tmp_path / f"started{number}"
        command = f"echo {number} >> {tmp_path}/trail; touch {started}; while [ ! -f {go} ]; do sleep 0.05; done"
        return [act("Wait.", "bash", command=command), reflect(False, "waited"), *attempt_script(RIGHT)]

    model = scripts(tmp_path / "scripts", [waiting(1), waiting(2)], [review(5, "Fine."), review(5, "Fine.")])
    config = tmp_path / "config.yaml"
    environment = {"tools": [], "writable": [str(tmp_path)]}
    config.write_text(yaml.safe_dump({"environment": environment, "attempts": {"max": 2, "parallel": True}}))
    args = ["run", "--repo", str(repo), "--task", TASK, "--model", model, "--thread-id", "P"]
    args += ["--output", str(tmp_path / "out"), "--config", str(config)]
    first = llm_ide(*args, cwd=tmp_path)
    deadline = time.monotonic() + 300
    while not all((tmp_path / f"started{n}").exists() for n in (1, 2)):  # both attempts at once
        assert first.poll() is None, first.stdout.read().decode()
        if time.monotonic() > deadline:  # what each attempt got instead, for the failure's message
            first.kill()
            trajectories = {p.name: p.read_text()[-2000:] for p in (tmp_path / "out").rglob("*.traj.json")}
            pytest.fail(f"not both started in 300 s: {first.communicate()[0].decode()}\n{trajectories}")
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGINT)
    output = first.communicate(timeout=60)[0].decode()  # their silent commands ended with it: the gate still shut
    assert first.returncode == 130, output
    for number in (1, 2):
        killed = json.loads((tmp_path / "out" / f"attempt{number}" / f"P-attempt{number}.traj.json").read_text())
        assert (killed["info"]["exit_status"], killed["operations"]) == ("interrupted", [])

    go.touch()
    rerun = invoke(*args, cwd=tmp_path)
    output = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, output
    traj = json.loads((tmp_path / "out" / "P.traj.json").read_text())
    assert [(a["index"], a["exit_status"]) for a in traj["info"]["attempts"]] == [(1, "submitted"), (2, "submitted")]
    assert sorted((tmp_path / "trail").read_text().split()) == ["1", "1", "2", "2"]  # each cut command again
    waits = [op for op in traj["operations"] if op["thought"] == "Wait."]
    assert [op["observation"].startswith("[The run was stopped while this command ran.") for op in waits] == [True] * 2
    assert traj["info"]["choice"]["by"] == "only"  # the same fix twice: one distinct patch


def test_an_attempt_stopped_by_a_model_error_stops_the_run_and_the_rerun_resumes_it(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    second = attempt_script(RIGHT)
    folder = tmp_path / "scripts"
    tries = [attempt_script(WRONG), second[:3], attempt_script(RIGHT)]  # the third is never run
    model = scripts(folder, tries, [review(2, "README only."), review(9, "Fixed.")])
    run = dict(model=model, settings=settings(max=3), output_dir=tmp_path / "out", run_id="T", repo=repo)
    stopped = run_attempts(TASK, **run)
    assert stopped.exit_status == "model_error"  # the script ran out during attempt 2
    assert "attempt 2 stopped with model_error" in stopped.error
    assert [a["index"] for a in stopped.attempts] == [1]

    write(folder, "attempt2.yaml", second)  # the model answers again
    resumed = run_attempts(TASK, **run)
    assert resumed.exit_status == "submitted" and resumed.chosen == 2
    assert [(a["index"], a["score"]) for a in resumed.attempts] == [(1, 2.0), (2, 9.0)]
    traj = json.loads(resumed.trajectory_path.read_text())
    assert [op["thought"] for op in traj["operations"] if op["attempt"] == 2] == [
        "Check what double(2) gives; run the test.",
        "Apply the fix.",
        "Done.",
    ]
    assert [c["attempt"] for c in traj["model_calls"] if c["kind"] == "review"] == [1, 2]


def test_a_thread_id_resumes_as_the_kind_of_run_it_was_never_over_it(tmp_path: Path) -> None:
    """A finished run at the same id run again with attempts started anew over its trajectory and patch; a run with
    attempts run again without them was refused as if its checkpoint had been emptied."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(RIGHT)], [review(5, "Fixed.")] * 2)
    configs = {most: tmp_path / f"max{most}.yaml" for most in (1, 2)}
    for most, path in configs.items():
        path.write_text(yaml.safe_dump({**NO_TOOLS, "attempts": {"max": most}}))
    out = tmp_path / "out"

    def run(thread: str, most: int) -> subprocess.CompletedProcess:
        spec = model.replace("{attempt}", "1") if most == 1 else model  # a run without attempts: one script
        args = ["run", "--repo", str(repo), "--task", TASK, "--model", spec, "--thread-id", thread, "--output"]
        return invoke(*args, str(out), "--config", str(configs[most]), cwd=tmp_path)

    assert run("T", 1).returncode == 0 and run("U", 2).returncode == 0
    saved = {name: (out / name).read_bytes() for name in ("T.traj.json", "T.patch", "U.traj.json", "U.patch")}
    said = {"T": "without attempts", "U": "with attempts"}
    for thread, most, had in (("T", 2, 1), ("U", 1, 2)):
        done = run(thread, most)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr == (
            f"error: thread {thread} is a run {said[thread]} ({out / thread}.traj.json): resume it as it ran "
            f"(attempts.max: {had}), or give a new --thread-id\n"
        )
    assert {name: (out / name).read_bytes() for name in saved} == saved
    again = run("U", 2)  # as it ran: its result again, said as a single run says it
    assert again.returncode == 0 and "… run U had already finished (submitted): its result again" in again.stdout
    assert {name: (out / name).read_bytes() for name in saved} == saved
