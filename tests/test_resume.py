from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
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
