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
from test_durability import finish, llm_ide

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
        "checkpoint.writes=5",  # the edit's step saved its writes (snapshot included), not its checkpoint row
        "checkpoint.writes=11",  # the same for the create
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
    deadline = time.monotonic() + 60  # the killed run's container goes once the engine sees its stdin close
    while containers(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers(run_id) == []
