"""Docker runs killed at exact moments: every completed step's change is in the resumed container, none is lost."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import BASE_IMAGE, base_image_client, make_git_repo
from durability_support import finish, llm_ide

STEPS = [
    act("Change it.", "edit", path="app.py", old="VALUE = 1\n", new="VALUE = 2\n"),
    reflect(False, "changed"),
    act("Add a file.", "create", path="notes.txt", content="kept\n"),
    reflect(False, "created"),
    act("Check.", "bash", command="cat app.py notes.txt"),
    reflect(False, "both there"),
    act("Done.", "submit"),
]


def containers(run_id: str) -> list[str]:
    result = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=llm-ide.run-id={run_id}"], capture_output=True, text=True
    )
    return result.stdout.split()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(
    "failpoint",
    [
        "execute.done=1",  # the edit is made, its worktree snapshot not taken
        "execute.done=2",  # the same for the create
        "checkpoint.writes=3",  # the edit's step saved its writes (snapshot included), not its checkpoint row
        "checkpoint.writes=5",  # the same for the create (the writes of the nodes that call nothing are held)
    ],
)
def test_killed_docker_run_keeps_every_completed_change(tmp_path: Path, failpoint: str) -> None:
    base_image_client()
    repo = make_git_repo(tmp_path / "repo", {"app.py": "VALUE = 1\n"})
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    run_id = f"durable-{failpoint.replace('=', '-').replace('.', '-')}-{tmp_path.name[-8:]}"
    args = ["run", "--repo", str(repo), "--task", "change VALUE", "--model", write_script(tmp_path / "s.yaml", STEPS)]
    args += ["--thread-id", run_id, "--output", str(tmp_path / "out"), "--config", str(tmp_path / "no-tools.yaml")]
    args += ["--environment", "docker", "--image", BASE_IMAGE]
    code, output = finish(llm_ide(args, tmp_path, failpoint))
    assert code == -signal.SIGKILL, output
    code, output = finish(llm_ide(args, tmp_path))
    assert code == 0, output
    traj = json.loads((tmp_path / "out" / f"{run_id}.traj.json").read_text())
    assert [o["action_type"] for o in traj["operations"]] == ["edit", "create", "bash", "submit"]
    assert traj["operations"][2]["observation"] == "VALUE = 2\nkept"
    assert "+VALUE = 2" in traj["info"]["submission"] and "+kept" in traj["info"]["submission"]
    wait_until_gone(run_id)


KILL_ALL = [
    act("Change it.", "edit", path="app.py", old="VALUE = 1\n", new="VALUE = 2\n"),
    reflect(False, "changed"),
    act("Clean up every process.", "bash", command="kill -9 -1; kill 1; kill -9 1; echo survived"),
    reflect(False, "cleaned"),
    act("Check.", "bash", command="cat app.py"),
    reflect(False, "still there"),
    act("Done.", "submit"),
]


def killing_run(tmp_path: Path, name: str) -> tuple[list[str], str]:
    base_image_client()
    repo = make_git_repo(tmp_path / "repo", {"app.py": "VALUE = 1\n"})
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    run_id = f"{name}-{tmp_path.name[-8:]}"
    model = write_script(tmp_path / "s.yaml", KILL_ALL)
    args = ["run", "--repo", str(repo), "--task", "change VALUE", "--model", model, "--thread-id", run_id]
    args += ["--output", str(tmp_path / "out"), "--config", str(tmp_path / "no-tools.yaml")]
    return [*args, "--environment", "docker", "--image", BASE_IMAGE], run_id


def assert_kept_the_edit(tmp_path: Path, run_id: str) -> list[dict]:
    traj = json.loads((tmp_path / "out" / f"{run_id}.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted", traj["info"].get("error")
    ran = traj["operations"][2]["observation"].split("\n[The run was stopped")[0]  # (a note follows when run again)
    assert ran.splitlines()[-1] == "VALUE = 2"
    assert "-VALUE = 1\n+VALUE = 2" in traj["info"]["submission"]
    return traj["operations"]


@pytest.mark.docker
def test_the_agent_killing_its_own_container_loses_nothing(tmp_path: Path) -> None:
    """`kill -9 -1; kill 1` inside the container: its PID 1 survives (and with it the edit); the shell session and
    the watchdog are started again; the run goes on, its patch whole, and no container is left."""
    args, run_id = killing_run(tmp_path, "killall")
    code, output = finish(llm_ide(args, tmp_path))
    assert code == 0, output
    operations = assert_kept_the_edit(tmp_path, run_id)
    assert operations[1]["observation"].startswith("survived\n[the shell session in the container ended")
    assert containers(run_id) == []


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("failpoint", ["execute.begun=3", "execute.done=3"])
def test_a_killed_run_after_the_agent_killed_everything_leaves_no_container(tmp_path: Path, failpoint: str) -> None:
    """llm-ide SIGKILLed at the command after the agent's `kill -9 -1`: before it ran (the watchdog the agent killed
    not started again yet: the container stays until the run's next start removes it) or after (the new watchdog
    removes it). The rerun finishes the run with its edit."""
    args, run_id = killing_run(tmp_path, failpoint.replace("=", "-").replace(".", "-"))
    code, output = finish(llm_ide(args, tmp_path, failpoint))
    assert code == -signal.SIGKILL, output
    if failpoint.startswith("execute.begun"):
        assert containers(run_id), "no watchdog: the container outlives the killed run"
    else:
        wait_until_gone(run_id)
    code, output = finish(llm_ide(args, tmp_path))
    assert code == 0, output
    assert_kept_the_edit(tmp_path, run_id)
    assert containers(run_id) == []


def wait_until_gone(run_id: str) -> None:
    deadline = time.monotonic() + 60  # the engine removes it once the watchdog's stdin closes
    while containers(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers(run_id) == []
