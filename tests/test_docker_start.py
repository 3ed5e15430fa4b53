"""A docker environment that fails or is interrupted as it starts its container removes it there and then, not at the
interpreter's exit (in Studio, the server's): the Docker API reached through a relay on loopback that interrupts
this process (SIGINT, a Ctrl-C) or drops the connection when a given request goes through."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, base_image_client, containers_of, remove_containers

from llm_ide.config import load_config
from llm_ide.environments import make_environment

pytestmark = pytest.mark.docker

ENGINE = "/var/run/docker.sock"


class Relay:
    """A Unix socket that passes the Docker API on to the engine; the first request whose line holds `marker`
    is passed on and this process sent SIGINT (`act` "interrupt"), or its connection closed unsent ("drop")."""

    def __init__(self, path: Path, marker: bytes, act: str) -> None:
        self.marker, self.act, self.fired = marker, act, False
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
                threading.Thread(target=self.pass_on, args=(client, engine, True), daemon=True).start()
                threading.Thread(target=self.pass_on, args=(engine, client, False), daemon=True).start()

    def pass_on(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                fire = requests and not self.fired and self.marker in data.split(b"\r\n", 1)[0]
                self.fired |= fire
                if fire and self.act == "drop":
                    break
                target.sendall(data)
                if fire:
                    os.kill(os.getpid(), signal.SIGINT)
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def run_id() -> Iterator[str]:
    client = base_image_client()
    run_id = f"test-start-{os.urandom(5).hex()}"
    yield run_id
    remove_containers(client, run_id)


@pytest.mark.parametrize(
    ("marker", "act", "error"),
    [
        (b"/start ", "interrupt", KeyboardInterrupt),
        (b"/start ", "drop", OSError),  # (requests' ConnectionError, no DockerException),
    ],
    ids=["interrupted", "dropped"],
)
def test_a_container_start_interrupted_or_failed_removes_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str, marker: bytes, act: str, error: type
) -> None:
    """Ctrl-C while the engine starts the container, or the connection lost then: the container is gone when the
    error reaches the caller."""
    client = base_image_client()
    relay = Relay(tmp_path / "docker.sock", marker, act)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
    config = load_config("default", environment={"type": "docker", "image": BASE_IMAGE, "tools": []}).environment
    with pytest.raises(error):
        make_environment(config, None, run_id, None, None)
    assert relay.fired
    assert containers_of(client, run_id) == []
