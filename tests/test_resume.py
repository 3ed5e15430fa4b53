from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agent_script import act, reflect, write_script
from conftest import git, make_git_repo
from in_process import invoke

from llm_ide.config import load_config
from llm_ide.run.single import run_task

WAIT_FOR_GO = "touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two >> trail.txt; echo wrote two"


def llm_ide(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from llm_ide.cli import app; app()", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_sigkill_mid_command_then_resume_loses_nothing_and_runs_it_again_once(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n", ".gitignore": "waiting\ngo\n"})
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    model = write_script(
        tmp_path / "script.yaml",
        [
            act("First[1](README.md:1).", "bash", command="echo one >> trail.txt"),
            reflect(False, "wrote one"),
            act("Second.", "bash", command=WAIT_FOR_GO),
            reflect(False, "wrote two"),
            act("Third.", "bash", command="echo three >> trail.txt"),
            reflect(False, "wrote three"),
            act("Done.", "submit"),
        ],
    )
    args = ["run", "--repo", str(repo), "--task", "write the trail", "--model", model, "--thread-id", "T"]
    args += ["--output", str(tmp_path / "out"), "--config", str(tmp_path / "no-tools.yaml")]
    first = llm_ide(*args, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (repo / "waiting").exists():
        assert first.poll() is None, first.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL
    killed = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert [o["thought"] for o in killed["operations"]] == ["First[1](README.md:1)."]

    (repo / "go").touch()
    second = invoke(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted"
    assert [(o["id"], o["parent_id"], o["thought"]) for o in traj["operations"]] == [
        (0, None, "First[1](README.md:1)."),
        (1, 0, "Second."),
        (2, 1, "Third."),
        (3, 2, "Done."),
    ]
    assert (repo / "trail.txt").read_text() == "one\ntwo\nthree\n"  # the killed command ran again, once in all
    assert traj["operations"][1]["observation"].startswith("wrote two\n[The run was stopped while this command ran.")
    assert "\n         → wrote two  " in second.stdout  # its output, the note after it
    assert [c["index"] for c in traj["model_calls"]] == list(range(4))  # one call per step
    assert [c["kind"] for c in traj["model_calls"]] == ["act"] * 4
    readme = next(c for c in traj["code_context"] if c["file_path"] == "README.md")
    assert readme["activity"]["referred"] == [1, 0, 0, 0]
    assert "+one\n+two\n+three" in traj["info"]["submission"]


@pytest.mark.parametrize("where", ["another repository", "a clone of it"])
def test_a_thread_resumed_in_another_repository_is_refused_in_a_clone_goes_on(tmp_path: Path, where: str) -> None:
    """`--thread-id T --repo OTHER`, T begun in another repository: it resumed there without a word (and ended in a
    patch extraction error of git's). A clone of the thread's repository (another node's checkout) goes on."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(tmp_path / "s.yaml", [act("One.", "bash", command="echo one >> trail.txt")] + [
        reflect(False, "one"), act("Done.", "submit")])  # fmt: skip
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    args = ["run", "-t", "trail", "-m", model, "-c", "no-tools.yaml", "-o", "out", "--thread-id", "T"]
    first = invoke(*args, "--repo", str(repo), "--step-limit", "1", cwd=tmp_path)
    assert first.returncode == 1 and "step_limit" in first.stdout, first.stdout + first.stderr
    other = tmp_path / "other"
    if where == "another repository":
        make_git_repo(other, {"b.py": "y = 1\n"})
    else:
        git(tmp_path, "clone", "-q", str(repo), str(other))
    again = invoke(*args, "--repo", str(other), "--step-limit", "4", cwd=tmp_path)
    if where == "another repository":
        base = git(repo, "rev-parse", "--short=12", "HEAD").strip()
        assert (again.returncode, again.stdout) == (2, ""), again.stdout + again.stderr
        assert again.stderr == (
            f"error: thread T started in {repo}; --repo {other} is another repository (no commit {base}, the thread's "
            "base): give the thread's repository (or a clone of it), or a new --thread-id\n"
        )
        assert sorted(p.name for p in other.iterdir()) == [".git", "b.py"]
    else:
        assert again.returncode == 0 and "resuming run T after step 1" in again.stdout, again.stdout + again.stderr
        assert "+one" in (tmp_path / "out" / "T.patch").read_text()


def test_a_run_stopped_before_its_first_step_resumes_with_its_own_task(tmp_path: Path) -> None:
    """Ctrl-C while the environment started: the trajectory held no task (""), so `--thread-id T` alone, the command
    printed for a task read from a stream, found none to go on with."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    settings = load_config("default", environment={"tools": []})

    def stop_at_the_start(event) -> None:
        if event.kind == "phase" and event.phase == "starting environment":
            raise KeyboardInterrupt

    run = {"model": model, "repo": repo, "run_id": "T", "output_dir": tmp_path / "out", "settings": settings}
    with pytest.raises(KeyboardInterrupt):
        run_task("a task\nof two lines", on_event=stop_at_the_start, **run)
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert (traj["task"], traj["info"]["exit_status"]) == ("a task\nof two lines", "interrupted")
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    args = ["--repo", str(repo), "--model", model, "-c", "no-tools.yaml", "-o", "out", "--thread-id", "T"]
    resumed = invoke("run", *args, cwd=tmp_path)
    assert resumed.returncode == 0 and "submitted" in resumed.stdout, resumed.stdout + resumed.stderr
    assert json.loads((tmp_path / "out" / "T.traj.json").read_text())["task"] == "a task\nof two lines"


def test_a_resume_after_head_left_the_runs_history_says_what_the_patch_now_holds(tmp_path: Path) -> None:
    """The user checked out an older commit while the run was stopped: the resume went on without a word, and its
    patch (the working tree against the run's base) held the whole difference between the two commits."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    user = ["git", "-C", str(repo), "-c", "user.name=u", "-c", "user.email=u@x"]
    (repo / "a.py").write_text("x = 2\n")
    subprocess.run([*user, "commit", "-qam", "two"], check=True)
    base = subprocess.run([*user, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    steps = [act("Note.", "bash", command="echo n > n.txt"), reflect(False, "noted"), act("Done.", "submit")]
    model = write_script(tmp_path / "s.yaml", steps)
    settings = load_config("default", environment={"tools": []})
    run = {"model": model, "repo": repo, "output_dir": tmp_path / "out", "settings": settings}

    said: list[str] = []

    def stop_after_step_1(event) -> None:
        if event.kind == "step":
            raise KeyboardInterrupt

    def listen(event) -> None:
        if event.kind == "phase" and "HEAD" in event.phase:
            said.append(event.phase)

    for run_id, move in (("T", []), ("U", ["checkout", "-q", "HEAD~"])):
        with pytest.raises(KeyboardInterrupt):
            run_task("note", on_event=stop_after_step_1, **run, run_id=run_id)
        if move:
            subprocess.run([*user, *move], check=True)
        again = run_task("note", on_event=listen, **run, run_id=run_id)
        assert again.exit_status == "submitted"
    head = subprocess.run([*user, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    short = base[:12]
    assert said == [  # (HEAD where the run left it: nothing said)
        f"warning: HEAD ({head}) is no longer the run's base commit {short} or a commit after it: the patch is the "
        f"working tree against {short}, so it holds what the checkout changes from it; check out {short} (or a "
        "branch holding it) to go on where the run stopped"
    ]
    assert "-x = 2\n+x = 1" in again.submission  # as the warning says


@pytest.mark.parametrize(
    ("first", "then", "status", "said"),
    [
        ({"step_limit": 1}, {"step_limit": 0}, "step_limit", "the run's step limit (1) is reached"),
        ({"token_limit": 1}, {"token_limit": 10**9}, "cost_limit", "the run's token limit (1) is reached"),
        ({"wall_time_limit": 0.001}, {"wall_time_limit": 0}, "time_limit", "the run's wall-time limit (0.001 s)"),
    ],
)
def test_a_run_stopped_at_a_limit_goes_on_from_there_when_given_a_higher_one(
    tmp_path: Path, first: dict[str, float], then: dict[str, float], status: str, said: str
) -> None:
    """A run that reached a limit was done for good: the same thread given a higher limit gave its result again, and
    only a new thread went further (its steps paid again). It goes on from its last step, the same limit ends it again
    as it was, and the command line says which."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "wrote one")]
    model = write_script(tmp_path / "s.yaml", [*script, act("Two.", "bash", command="echo two >> trail.txt")] + [
        reflect(False, "wrote two"), act("Done.", "submit")])  # fmt: skip
    run = {"repo": repo, "model": model, "output_dir": tmp_path / "out", "run_id": "T"}

    def attempt(agent: dict[str, float]) -> tuple[str, list[str]]:
        events: list[Any] = []
        settings = load_config("default", environment={"tools": []}, agent=agent)
        result = run_task("write the trail", on_event=events.append, settings=settings, **run)
        return result.exit_status, [event.phase for event in events if event.kind == "phase"]

    assert attempt(first)[0] == status and (repo / "trail.txt").read_text() == "one\n"
    ended = json.loads((tmp_path / "out" / "T.traj.json").read_text())["info"]
    assert ended["error"].startswith(said)
    again, phases = attempt(first)
    assert again == status and phases[0].endswith(
        "a higher limit continues it, a new `run_id` or `output_dir` runs the task anew"
    )
    went_on, phases = attempt(then)
    assert (
        phases[0].startswith(f"run T had stopped at a limit ({said}")
        and phases[1] == "resuming run T after step 1 (its checkpoint)"
    )
    traj = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert (went_on, traj["info"]["exit_status"], traj["info"].get("error")) == ("submitted", "submitted", None)
    assert [op["thought"] for op in traj["operations"]] == ["One.", "Two.", "Done."]
    assert [op["parent_id"] for op in traj["operations"]] == [None, 0, 1]
    assert (repo / "trail.txt").read_text() == "one\ntwo\n" and traj["info"]["model_stats"]["api_calls"] == 3
    cli = invoke("run", "--repo", str(repo), "--task", "write the trail", "--model", model, "--thread-id", "T",
                 "--output", str(tmp_path / "out"), "--step-limit", "1", cwd=tmp_path)  # fmt: skip
    assert cli.returncode == 0 and "run T had already finished (submitted): its result again; a new" in cli.stdout
