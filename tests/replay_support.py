"""What the replay's tests share (test_replay, test_replay_metrics, test_sandbox_root, test_hostile_input,
test_repository_trust): a repository of one module, a hand-made mini-swe-agent trajectory over it, and `llm-ide
replay` run in-process with our python on PATH."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from in_process import invoke

from llm_ide.environments.bwrap import bwrap_path
from llm_ide.replay.model import ReplayReport

INSTANCE = "demo__demo-1"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
MODULE = "".join(
    "alpha_value = 1\n" if n == 15 else "omega_value = 2\n" if n == 25 else f"filler_line_{n} = {n}\n"
    for n in range(1, 31)
)


PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the replayed commands' python: ours


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    if args[:1] == ("replay",) and bwrap_path() is None and "--unsandboxed" not in args:
        args = (*args, "--unsandboxed")  # no bubblewrap here: the tests' own trajectories, run as the user on purpose
    return invoke(*args, cwd=cwd, env={**os.environ, "COLUMNS": "200", "PATH": PATH})


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    return subprocess.run(["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def make_repo(path: Path, branch: str = INSTANCE) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", branch)
    (path / "m.py").write_text(MODULE)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


OBSERVATION = "<returncode>{{ output.returncode }}</returncode>\n<output>\n{{ output.output }}</output>"


def mini_trajectory(path: Path, steps: list[tuple[str, str, int, str]], submission: str = "") -> Path:
    """A mini-swe-agent-1 trajectory: each step (thought, command, return code, output), then the submit."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer shell."},
        {"role": "user", "content": "<pr_description>\nConsider the following PR description:\nRaise the values.\n"
         "</pr_description>\n<instructions>Fix it; submit with COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT.</instructions>"},
    ]  # fmt: skip
    for thought, command, returncode, output in [*steps, ("Done. I submit.", SUBMIT, 0, submission)]:
        messages.append({"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```"})
        text = (
            submission if command == SUBMIT else f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"
        )
        messages.append({"role": "user", "content": text})
    config = {"environment": {"timeout": 60}, "agent": {"action_observation_template": OBSERVATION}}
    info = {"exit_status": "Submitted", "submission": submission, "config": config}
    data = {"trajectory_format": "mini-swe-agent-1", "instance_id": INSTANCE, "info": info, "messages": messages}
    path.write_text(json.dumps(data))
    return path


def fingerprint(path: Path) -> dict[str, str]:
    """Every file under `path` (or `path` itself) with its content's hash and mtime: what a write would change."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(f): f"{hashlib.sha256(f.read_bytes()).hexdigest()} {f.stat().st_mtime_ns}" for f in files}


def report_of(out: Path) -> ReplayReport:
    return ReplayReport.model_validate_json((out / "replay.json").read_text())


STEPS = [
    ("Where is alpha_value set?", "grep -n alpha_value m.py", 0, "15:alpha_value = 1\n"),
    ("Line 15 sets it: raise it.", "sed -i 's/alpha_value = 1/alpha_value = 10/' m.py", 0, ""),
    ("Raise omega_value too.", "sed -i 's/omega_value = 2/omega_value = 20/' m.py", 0, ""),
    ("Look at lines 15 and 16.", "sed -n '15,16p' m.py", 0, "alpha_value = 10\nfiller_line_16 = 16\n"),
    ("Check a name of my own.", "python3 -c \"print('invented_token_xyz')\"", 0, "invented_token_xyz\n"),
]
