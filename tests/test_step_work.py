"""The step's own work made cheaper without changing what it decides: the host-socket scan's hidden folders compared
as strings, the known secrets found once per change, the ledger's characters counted once per turn."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_ide.environments.sockets import host_sockets, within


@pytest.mark.parametrize(
    "path, folder",
    [
        ("/tmp/h/a.sock", "/tmp/h"),
        ("/tmp/h", "/tmp/h"),
        ("/tmp/hx/a.sock", "/tmp/h"),
        ("/tmp/h2", "/tmp/h/"),
        ("/tmp/h/x/y", "/"),
        ("/", "/"),
        ("/tmp", "/tmp/h"),
        ("/run/user/0/bus", "/run/user/0"),
        ("/run/user/01/bus", "/run/user/0"),
    ],
)
def test_within_is_paths_is_relative_to(path: str, folder: str) -> None:
    assert within(path, folder) == Path(path).is_relative_to(folder)


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Listening Unix sockets in a hidden folder, in a folder whose name starts with the hidden one's, and elsewhere."""
    servers, paths = [], {}
    for name in ("hidden/a.sock", "hidden-not/b.sock", "hiddenx/c.sock", "open/d.sock"):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        servers.append(server)
        paths[name.split("/")[1]] = os.path.realpath(path)
    yield paths
    for server in servers:
        server.close()


def test_a_scan_leaves_out_the_hidden_folders_sockets_and_no_other(tmp_path: Path, listening: dict[str, str]) -> None:
    hidden = [Path(os.path.realpath(tmp_path / "hidden"))]
    found, _ = host_sockets({}, hidden, [listening["d.sock"]], (os.getuid(), {os.getgid()}))
    assert [listening[name] in found for name in ("a.sock", "b.sock", "c.sock", "d.sock")] == [
        False,
        True,
        True,
        False,
    ]
