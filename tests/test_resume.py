from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_script import act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke

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
