"""A docker environment that fails or is interrupted as it starts its container removes it there and then, not at the
interpreter's exit (in Studio, the server's): the Docker API reached through a relay on loopback that interrupts
this process (SIGINT, a Ctrl-C) or drops the connection when a given request goes through. An engine lost later, as
the run edits a file, ends it `environment_error` too."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_script import act, write_script
from conftest import BASE_IMAGE, base_image_client, containers_of, make_git_repo, remove_containers, wait_for
from in_process import invoke

from llm_ide.config import load_config
from llm_ide.environments import make_environment
from llm_ide.errors import EnvironmentFailure

pytestmark = pytest.mark.docker

ENGINE = "/var/run/docker.sock"


class Relay:
    """A Unix socket that passes the Docker API on to the engine; the first request whose line holds `marker`
    is passed on and this process sent SIGINT (`act` "interrupt"), or its connection closed unsent ("drop"), or
    that and every connection closed, later ones refused, as of an engine gone ("gone"), or passed on and the main
    thread sent SIGINT once the engine answered it, the answer held ("answered": Ctrl-C when the engine has done it
    and the client does not know yet), or as that with `answered` set instead ("held": another process interrupted),
    or held back, the main thread sent SIGINT, and passed on once the engine has answered a removal ("in-flight":
    Ctrl-C before the engine made the container, which it then makes), or that with a second SIGINT as the removal
    is answered ("twice": Ctrl-C again while the first waits for the create's answer), or passed on and its answer
    never passed back, the connection held ("kept": the client waits for ever); `skip`: that many such requests go
    first. `pid`: the process SIGINT goes to (a child `llm-ide run`), else this one's main thread."""

    def __init__(self, path: Path, marker: bytes, act: str, skip: int = 0) -> None:
        self.path, self.marker, self.act, self.fired, self.skip = path, marker, act, False, skip
        self.pid: int | None = None
        self.connections: list[socket.socket] = []
        self.answering: socket.socket | None = None  # the engine's end whose answer interrupts ("answered")
        self.main, self.answered = threading.main_thread().ident, threading.Event()
        self.removing: socket.socket | None = None  # the engine's end whose answer to a removal lets the held go
        self.removed = threading.Event()
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.server.accept()
                engine = socket.socket(socket.AF_UNIX)
                engine.connect(ENGINE)
                self.connections += [client, engine]
                threading.Thread(target=self.pass_on, args=(client, engine, True), daemon=True).start()
                threading.Thread(target=self.pass_on, args=(engine, client, False), daemon=True).start()

    def pass_on(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                if source is self.removing:
                    self.removed.set()
                if requests and self.fired and data.startswith(b"DELETE "):  # (not a sweep's, before: another run's)
                    self.removing = target
                if source is self.answering:
                    if self.act == "answered":
                        signal.pthread_kill(self.main, signal.SIGINT)  # (the main thread's recv interrupted: no race)
                    self.answered.set()
                    if self.act == "kept":
                        continue
                    if self.act not in {"in-flight", "twice"}:
                        return
                fire = requests and not self.fired and self.marker in data.split(b"\r\n", 1)[0]
                if fire and self.skip:
                    fire, self.skip = False, self.skip - 1
                self.fired |= fire
                if fire and self.act == "gone":
                    self.server.close()
                    self.path.unlink()
                    for end in self.connections:
                        with contextlib.suppress(OSError):
                            end.shutdown(socket.SHUT_RDWR)
                if fire and self.act in {"drop", "gone"}:
                    break
                held = fire and self.act in {"answered", "held", "in-flight", "twice", "kept"}
                self.answering = target if held else self.answering
                if fire and self.act in {"in-flight", "twice"}:
                    self.interrupt()
                    self.removed.wait()
                    if self.act == "twice":
                        self.interrupt()
                target.sendall(data)
                if fire and self.act == "interrupt":
                    os.kill(os.getpid(), signal.SIGINT)
        if target is self.answering and self.act in {"in-flight", "twice"}:  # the client let go: the engine answers
            self.answered.wait()
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def interrupt(self) -> None:
        if self.pid is None:
            signal.pthread_kill(self.main, signal.SIGINT)
        else:
            os.kill(self.pid, signal.SIGINT)


@pytest.fixture
def run_id() -> Iterator[str]:
    client = base_image_client()
    run_id = f"test-start-{os.urandom(5).hex()}"
    yield run_id
    remove_containers(client, run_id)


@pytest.mark.parametrize(
    ("marker", "act", "skip", "error"),
    [
        (b"/start ", "interrupt", 0, KeyboardInterrupt),
        (b"/containers/create", "answered", 0, KeyboardInterrupt),
        (b"/start ", "answered", 0, KeyboardInterrupt),
        (b"/start ", "drop", 0, EnvironmentFailure),  # (requests' ConnectionError, an OSError, no DockerException)
        (b"/containers/create", "drop", 0, EnvironmentFailure),
        (b"/containers/create", "gone", 0, EnvironmentFailure),
        (b"/exec", "gone", 2, EnvironmentFailure),  # (past the watchdog's: the container goes with its connection)
    ],
    ids=[
        "interrupted",
        "created-interrupted",
        "started-interrupted",
        "dropped",
        "create-dropped",
        "create-gone",
        "gone-once-started",
    ],
)
def test_a_container_start_interrupted_or_failed_removes_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str, marker: bytes, act: str, skip: int, error: type
) -> None:
    """Ctrl-C while the engine starts the container, or the connection lost then, or the engine gone: the container
    is gone when the error reaches the caller, a lost engine an EnvironmentFailure in one line."""
    client = base_image_client()
    relay = Relay(tmp_path / "docker.sock", marker, act, skip)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
    config = load_config("default", environment={"type": "docker", "image": BASE_IMAGE, "tools": []}).environment
    with pytest.raises(error) as raised:
        make_environment(config, None, run_id, None, None)
    assert relay.fired and "\n" not in str(raised.value)
    wait_for(lambda: containers_of(client, run_id) == [], 30, "the container's removal")


def test_an_engine_lost_as_the_container_is_created_ends_the_run_in_one_line(tmp_path: Path) -> None:
    """`llm-ide run` whose engine goes away as it creates the container: the run ended `error` with requests'
    `ConnectionError: ('Connection aborted.', …)`; now `environment_error`, one line, exit code 2 as for an engine
    not reachable at all."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    relay = Relay(tmp_path / "docker.sock", b"/containers/create", "gone")
    (tmp_path / "c.yaml").write_text(f"environment: {{tools: [], type: docker, image: '{BASE_IMAGE}'}}\n")
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model]
    args += ["--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "e"]
    done = invoke(*args, env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"})
    assert relay.fired, done.stdout + done.stderr
    assert done.returncode == 2 and "environment_error after 0 model calls" in done.stdout, done.stdout + done.stderr
    assert done.stderr.startswith("could not start a container from") and done.stderr.count("\n") == 1, done.stderr
    info = json.loads((tmp_path / "out" / "e.traj.json").read_text())["info"]
    assert info["exit_status"] == "environment_error" and "\n" not in info["error"]


@pytest.mark.parametrize("marker", [b"/containers/create", b"/start "], ids=["create", "start"])
def test_ctrl_c_to_the_cli_as_the_engine_makes_the_container_leaves_none(
    tmp_path: Path, run_id: str, marker: bytes
) -> None:
    """SIGINT to `llm-ide run` once the engine has created (or started) the container, before the answer reaches
    it: the run ends interrupted, and once the process has exited no container of its run is left (a create's was,
    `Created`: the environment knew no id to remove)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    relay = Relay(tmp_path / "docker.sock", marker, "held")
    (tmp_path / "c.yaml").write_text(f"environment: {{tools: [], type: docker, image: '{BASE_IMAGE}'}}\n")
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    args += ["--output", str(tmp_path / "out"), "--thread-id", run_id]
    environ = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"}
    command = [sys.executable, "-m", "llm_ide", *args]
    with subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        try:
            assert relay.answered.wait(120), "the request never reached the engine"
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=120)
        finally:
            process.kill()
    assert process.returncode == 130 and "interrupted" in output and "Traceback" not in output, output
    assert containers_of(base_image_client(), run_id) == []


def test_an_engine_lost_during_a_run_ends_it_environment_error_with_its_trajectory(tmp_path: Path, run_id: str) -> None:
    """The engine gone as an edit copies the file into the container: the run ended `error` with requests'
    ConnectionError, and the container's removal at its end raised again, so neither its trajectory nor its patch
    was written. Now the edit's failure ends it `environment_error`, the removal that cannot happen is a warning
    (the watchdog's connection closed, the engine removes the container), and the outcome is saved."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    relay = Relay(tmp_path / "docker.sock", b"/archive?path=%2Ftmp ", "gone")  # (write_file's staging copy)
    (tmp_path / "c.yaml").write_text(f"environment: {{tools: [], type: docker, image: '{BASE_IMAGE}'}}\n")
    model = write_script(tmp_path / "s.yaml", [act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2")])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "c.yaml")]
    args += ["--output", str(tmp_path / "out"), "--thread-id", run_id]
    done = invoke(*args, env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'docker.sock'}"})
    assert relay.fired
    assert done.returncode == 1 and "environment_error after 1 model call" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    trajectory = json.loads((tmp_path / "out" / f"{run_id}.traj.json").read_text())
    assert trajectory["info"]["exit_status"] == "environment_error" and "\n" not in trajectory["info"]["error"]
    assert trajectory["info"]["error"].startswith("copying into the container failed")  # its first cause, then the rest
    assert "Environment failure: copying into the container failed" in trajectory["operations"][0]["observation"]
    wait_for(lambda: containers_of(base_image_client(), run_id) == [], 30, "the container's removal")


def test_ctrl_c_before_the_engine_makes_the_container_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str
) -> None:
    """Ctrl-C while the create request is with the engine, which makes the container only after our removal by name
    found nothing: it stayed, `Created`, once the interrupt reached the caller; now the create's answer is waited for
    and its container removed."""
    client = base_image_client()
    relay = Relay(tmp_path / "docker.sock", b"/containers/create", "in-flight")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
    config = load_config("default", environment={"type": "docker", "image": BASE_IMAGE, "tools": []}).environment
    with pytest.raises(KeyboardInterrupt):
        make_environment(config, None, run_id, None, None)
    assert relay.removed.is_set() and relay.answered.wait(60), "the engine never answered the create"
    assert containers_of(client, run_id) == []
