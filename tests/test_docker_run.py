from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import BASE_IMAGE, git, require_docker
from in_process import invoke

from llm_ide.cli.demo import DEMO_DIR


def own_id(name: str) -> str:
    """A run id no other session on this docker engine uses: its containers are counted by it."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def containers(label: str) -> list[str]:
    result = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True, check=True
    )
    return result.stdout.split()


@pytest.mark.docker
@pytest.mark.slow
def test_run_in_docker_fixes_the_demo_bug_and_leaves_nothing_behind(tmp_path: Path) -> None:
    require_docker()
    thread = own_id("docker-demo")
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
    assert (result.returncode, result.stderr) == (2, "error: give exactly one of --task TEXT or --task-file FILE\n")
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
            thread,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    traj = json.loads((tmp_path / "out" / f"{thread}.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted"
    assert "OK" in traj["operations"][3]["observation"] and "Ran 4 tests" in traj["operations"][3]["observation"]
    assert "+    return (ordered[middle - 1] + ordered[middle]) / 2" in traj["info"]["submission"]
    assert git(project, "status", "--porcelain") == ""  # the host copy is untouched: the patch is the result
    assert containers(f"llm-ide.run-id={thread}") == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_resumed_docker_run_gets_its_changes_back_in_a_fresh_container(tmp_path: Path) -> None:
    require_docker()
    from conftest import make_git_repo

    from llm_ide.config import load_config
    from llm_ide.run.single import run_task

    run_id = own_id("resume-docker")
    repo = make_git_repo(tmp_path / "repo", {"app.py": "VALUE = 1\n"})
    config = load_config("default", environment={"tools": []})
    first = [
        act("Change it.", "edit", path="app.py", old="VALUE = 1\n", new="VALUE = 2\n"),
        reflect(False, "changed"),
        act("Add a file.", "create", path="notes.txt", content="kept\n"),
    ]
    script = tmp_path / "script.yaml"

    def run(responses: list[str]):
        return run_task(
            "change VALUE",
            model=write_script(script, responses),
            settings=config,
            output_dir=tmp_path / "out",
            run_id=run_id,
            repo=repo,
            environment="docker",
            image=BASE_IMAGE,
        )

    stopped = run(first)
    assert stopped.exit_status == "model_error"  # the script ran out: a resumable end
    assert "+VALUE = 2" in stopped.submission and "+kept" in stopped.submission
    check = act("Check.", "bash", command="cat app.py notes.txt")
    resumed = run([*first, reflect(False, "created"), check, reflect(False, "both there"), act("Done.", "submit")])
    traj = json.loads(resumed.trajectory_path.read_text())
    assert resumed.exit_status == "submitted"
    assert [o["action_type"] for o in traj["operations"]] == ["edit", "create", "bash", "submit"]
    assert traj["operations"][2]["observation"] == "VALUE = 2\nkept"
    assert "+VALUE = 2" in resumed.submission and "+kept" in resumed.submission
    assert git(repo, "status", "--porcelain") == ""
    assert containers(f"llm-ide.run-id={run_id}") == []


@pytest.mark.docker
@pytest.mark.parametrize(
    ("sabotage", "thread"), [("cd / && rm -rf /testbed", "gone-rm"), ("cd / && mv /testbed /moved", "gone-mv")]
)  # a thread id each: its containers are counted by it while the other case's may still run (xdist)
def test_a_command_removing_the_containers_workdir_ends_the_run_environment_error(
    tmp_path: Path, sabotage: str, thread: str
) -> None:
    """A command deleted or moved the container's workdir: reading the files its output named crashed the run (`error`,
    tarfile's `ReadError: truncated header`: the session's cd failed before tar ran). Now the run ends
    `environment_error` as a local one whose repository goes does, in one line, with the last worktree snapshot."""
    require_docker()
    thread = own_id(thread)
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.py").write_text("x = 1\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    steps = [act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"), reflect(False, "Edited.")]
    steps += [act("Break it[1](a.py:1).", "bash", command=f"cat a.py; {sabotage}"), reflect(False, "Broke.")]
    steps.append(act("Done.", "submit"))
    (tmp_path / "c.yaml").write_text(f"environment: {{tools: [], type: docker, image: '{BASE_IMAGE}'}}\n")
    args = ["run", "--repo", str(project), "--task", "t", "--model", write_script(tmp_path / "s.yaml", steps)]
    done = invoke(*args, "--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", thread)
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "environment_error after" in done.stdout
    assert "the container's workdir (/testbed) was deleted, moved away or made unreadable by a command" in done.stderr
    info = json.loads((tmp_path / "out" / f"{thread}.traj.json").read_text())["info"]
    assert info["exit_status"] == "environment_error" and "-x = 1\n+x = 2\n" in info["submission"]
    assert containers(f"llm-ide.run-id={thread}") == []
