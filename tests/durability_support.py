"""A scripted run to kill and resume (tests/test_durability.py and the tests of what a rerun finds): its set-up, the
`llm-ide run` child to kill, the in-process rerun, and a run killed mid-command once per worker (`killed_run`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, write_script
from conftest import isolated_environ, killed_in_command, make_git_repo
from in_process import invoke

STEPS = [
    act("First.", "bash", command="echo one >> trail.txt"),
    reflect(False, "one"),
    act("Second.", "bash", command="echo two >> trail.txt"),
    reflect(False, "two"),
    act("Third.", "edit", path="README.md", old="demo\n", new="demo, edited\n"),
    reflect(False, "three"),
    act("Fourth.", "create", path="notes.txt", content="a note\n"),
    reflect(False, "four"),
    act("Done.", "submit"),
]
RERUN = "[The run was stopped while this command ran. The repository's files were put back"


def llm_ide(args: list[str], cwd: Path, failpoints: str = "", env: dict[str, str] | None = None) -> subprocess.Popen:
    env = dict(os.environ if env is None else env)
    if failpoints:
        env["LLM_IDE_FAILPOINTS"] = failpoints
    return subprocess.Popen(
        [sys.executable, "-c", "from llm_ide.cli import app; app()", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def rerun(args: list[str], cwd: Path) -> tuple[int, str]:
    """A run to its end (no failpoint, nothing to kill): in-process."""
    done = invoke(*args, cwd=cwd)
    return done.returncode, done.stdout + done.stderr


def finish(process: subprocess.Popen) -> tuple[int, str]:
    output = process.communicate(timeout=180)[0].decode()
    return process.returncode, output


def mark(tmp_path: Path) -> str:
    """LLM_IDE_TEST_MARK's value in the environment of the run's commands: this test's alone."""
    return f"{tmp_path.name}-{os.getpid()}"


def setup_run(tmp_path: Path, steps: list[str] = STEPS) -> tuple[Path, list[str]]:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n", ".gitignore": "waiting\ngo\n"})
    environment = {"tools": [], "env": {"LLM_IDE_TEST_MARK": mark(tmp_path)}}
    (tmp_path / "no-tools.yaml").write_text(yaml.safe_dump({"environment": environment}))
    model = write_script(tmp_path / "script.yaml", steps)
    args = ["run", "--repo", str(repo), "--task", "write the trail", "--model", model, "--thread-id", "T"]
    args += ["--output", str(tmp_path / "out"), "--config", str(tmp_path / "no-tools.yaml")]
    return repo, args


def trajectory(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "T.traj.json").read_text())


def wait_for(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert process.poll() is None, process.stdout.read().decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


WAITING_STEPS = [
    act("First.", "bash", command="echo one >> trail.txt"),
    reflect(False, "one"),
    act("Wait.", "bash", command="touch waiting; while [ ! -f go ]; do sleep 0.05; done; echo two >> trail.txt"),
    reflect(False, "two"),
    act("Done.", "submit"),
]


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> tuple[Path, list[str]]:
    """A run SIGKILLed while its second command runs (one operation saved), made once per worker and kept
    as it was left beside it: a kill costs a child process (~1 s of CPU) and every test that takes it reruns the same
    killed run. Its environment is a test's (conftest.isolated_environ); its temp folders are in its folder too, so
    that the copy holds all the run left."""
    folder = tmp_path_factory.mktemp("killed-run")
    (folder / "tmp").mkdir()
    repo, args = setup_run(folder, WAITING_STEPS)
    env = isolated_environ(tmp_path_factory, session_cache) | {"TMPDIR": str(folder / "tmp")}
    first = llm_ide(args, folder, env=env)
    wait_for(repo / "waiting", first)
    killed_in_command(first, mark(folder))
    assert json.loads((folder / "out" / "T.traj.json").read_bytes())["info"]["n_operations"] == 1
    shutil.copytree(folder, pristine(folder), symlinks=True)
    return folder, args


def pristine(folder: Path) -> Path:
    return folder.with_name(f"{folder.name}-pristine")


@pytest.fixture
def killed_mid_run(killed_run: tuple[Path, list[str]]) -> tuple[Path, list[str], bytes]:
    """The killed run as it was left, in its folder again (what the test before changed is gone); its trajectory's
    bytes."""
    folder, args = killed_run
    shutil.rmtree(folder)
    shutil.copytree(pristine(folder), folder, symlinks=True)
    return folder, args, (folder / "out" / "T.traj.json").read_bytes()
