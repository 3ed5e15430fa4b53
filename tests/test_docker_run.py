from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, require_docker

from llm_ide.run.commands import DEMO_DIR

BASE_IMAGE = "llm-ide-base:bookworm"


def containers(label: str) -> list[str]:
    result = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True, check=True
    )
    return result.stdout.split()


@pytest.mark.docker
@pytest.mark.slow
def test_run_in_docker_fixes_the_demo_bug_and_leaves_nothing_behind(tmp_path: Path) -> None:
    require_docker()
    project = tmp_path / "project"
    shutil.copytree(DEMO_DIR / "project", project)
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    result = subprocess.run(
        [sys.executable, "-c", "from llm_ide.cli import app; app()", "run", "--environment", "docker"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "--repo" in result.stderr  # usage error, no traceback
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from llm_ide.cli import app; app()",
            "run",
            "--environment",
            "docker",
            "--image",
            BASE_IMAGE,
            "--repo",
            str(project),
            "--task-file",
            str(DEMO_DIR / "task.md"),
            "--model",
            f"scripted:{DEMO_DIR / 'script.yaml'}",
            "--config",
            str(tmp_path / "no-tools.yaml"),
            "--output",
            str(tmp_path / "out"),
            "--thread-id",
            "docker-demo",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    traj = json.loads((tmp_path / "out" / "docker-demo.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted"
    assert "OK" in traj["operations"][3]["observation"] and "Ran 4 tests" in traj["operations"][3]["observation"]
    assert "+    return (ordered[middle - 1] + ordered[middle]) / 2" in traj["info"]["submission"]
    assert git(project, "status", "--porcelain") == ""  # the host copy is untouched: the patch is the result
    assert containers("llm-ide.run-id=docker-demo") == []
