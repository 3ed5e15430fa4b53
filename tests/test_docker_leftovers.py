"""No container outlives its run, however the run ends as the engine makes it: a second Ctrl-C while the first waits for
the create's answer still removes what the engine made; a SIGKILL then leaves it `Created` (no watchdog yet), and the
next docker run, whichever run it is, removes it and says so in one line, as it does a running one killed before its
watchdog started."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_script import act, write_script
from conftest import BASE_IMAGE, base_image_client, containers_of, make_git_repo, remove_containers
from in_process import invoke
from test_docker_start import Relay

from llm_ide.environments.docker import owner_labels

pytestmark = pytest.mark.docker


@pytest.fixture
def run_id() -> Iterator[str]:
    run_id = f"test-left-{os.urandom(5).hex()}"
    yield run_id
    for each in (run_id, f"{run_id}-next"):
        remove_containers(base_image_client(), each)


def run_args(tmp_path: Path, run_id: str) -> list[str]:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "c.yaml").write_text(f"environment: {{tools: [], type: docker, image: '{BASE_IMAGE}'}}\n")
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    return [*args, "--output", str(tmp_path / "out"), "--thread-id", run_id]


def alone(run_id: str) -> dict[str, str]:
    """The environment of a run whose containers no other test's docker run sweeps meanwhile: a user name of its own
    (the user label a sweep keeps to; getpass reads LOGNAME first)."""
    return {**os.environ, "LOGNAME": f"llm-ide-{run_id}"}


def child(tmp_path: Path, relay: Relay, args: list[str]) -> subprocess.Popen[str]:
    environ = {**alone(args[args.index("--thread-id") + 1]), "DOCKER_HOST": f"unix://{relay.path}"}
    command = [sys.executable, "-m", "llm_ide", *args]
    process = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    relay.pid = process.pid
    return process


def test_a_second_ctrl_c_as_the_first_waits_for_the_create_still_removes_the_container(
    tmp_path: Path, run_id: str
) -> None:
    """Ctrl-C while the engine makes the container, and again as the run waits for the engine's answer to remove what
    it made: that wait was cut short and the container stayed, `Created`, after the run had exited; now the wait
    goes on (the second Ctrl-C comes after it) and nothing of the run is left."""
    relay = Relay(tmp_path / "docker.sock", b"/containers/create", "twice")
    with child(tmp_path, relay, run_args(tmp_path, run_id)) as process:
        try:
            output, _ = process.communicate(timeout=120)
        finally:
            process.kill()
    assert relay.fired and relay.removed.is_set() and relay.answered.is_set(), output
    assert process.returncode == 130 and "interrupted" in output and "Traceback" not in output, output
    assert containers_of(base_image_client(), run_id) == []


def test_the_next_docker_run_removes_what_a_run_killed_as_the_engine_made_its_container_left(
    tmp_path: Path, run_id: str
) -> None:
    """SIGKILL as the engine answers the create: the container is `Created`, never started, so no watchdog removes
    it; only the same run's next start did. Any next docker run removes it now, and says so in one line."""
    client = base_image_client()
    relay = Relay(tmp_path / "docker.sock", b"/containers/create", "kept")
    with child(tmp_path, relay, run_args(tmp_path / "killed", run_id)) as process:
        try:
            assert relay.answered.wait(120), "the create never reached the engine"
            process.kill()
        finally:
            process.kill()
    assert process.wait() == -signal.SIGKILL
    [left] = containers_of(client, run_id)
    assert left.status == "created" and left.labels["llm-ide.pid"] == str(process.pid)
    done = invoke(*run_args(tmp_path / "next", f"{run_id}-next"), env=alone(run_id))
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if f"{left.name} (run {run_id}, created)" in line]
    assert len(said) == 1 and re.fullmatch(r"… removed \d+ containers? that killed runs left: .+", said[0]), said
    assert containers_of(client, run_id) == [] and containers_of(client, f"{run_id}-next") == []


def test_the_next_docker_run_removes_a_running_container_whose_owner_label_says_its_process_is_gone(
    tmp_path: Path, run_id: str
) -> None:
    """A run killed after its container started and before its watchdog did leaves it running, with no one to stop
    it. Its owner label (PID namespace, PID, start time) says its maker is gone, so the next docker run removes it; a
    running container whose maker still runs stays."""
    made = "import json; from llm_ide.environments.docker import owner_labels; print(json.dumps(owner_labels('{}')))"
    made = subprocess.run([sys.executable, "-c", made.format(run_id)], capture_output=True, env=alone(run_id))
    gone, client = json.loads(made.stdout), base_image_client()
    left = client.containers.run(BASE_IMAGE, ["sleep", "infinity"], labels=gone, detach=True)
    mine = owner_labels(run_id) | {"llm-ide.user": gone["llm-ide.user"]}
    live = client.containers.run(BASE_IMAGE, ["sleep", "infinity"], labels=mine, detach=True)
    done = invoke(*run_args(tmp_path / "next", f"{run_id}-next"), env=alone(run_id))
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if "that killed runs left" in line]
    assert len(said) == 1 and f"{left.name} (run {run_id}, running)" in said[0] and live.name not in said[0], said
    assert [container.name for container in containers_of(client, run_id)] == [live.name]
