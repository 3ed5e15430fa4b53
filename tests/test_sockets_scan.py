"""The host-socket scan before each sandboxed command, made cheaper without missing a socket: each folder scanned once
at its real path (a symlinked /var/run or temp folder), the sockets a scan finds taken at their real path as found, a
folder's listing kept only while its (device, inode, change time) stays and it did not change within a clock tick."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_ide.environments.sandbox import host_sockets, listed, listening, named

USER = (os.getuid(), {os.getgid()})


@pytest.fixture
def linked_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The temp folder reached through a symlink, with an agent's folder holding a bound socket (not listening: only
    the scan finds it) and a listening one bound through the symlink (/proc/net/unix names it by the symlink)."""
    real, link = tmp_path / "real", tmp_path / "link"
    (real / "ssh-agent0").mkdir(parents=True)
    link.symlink_to(real)
    monkeypatch.setattr(tempfile, "tempdir", str(link))
    servers = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    servers[0].bind(str(link / "ssh-agent0" / "agent.1"))
    servers[1].bind(str(link / "ssh-agent0" / "listening.sock"))
    servers[1].listen()
    yield {"bound": str(real / "ssh-agent0" / "agent.1"), "listening": str(real / "ssh-agent0" / "listening.sock")}
    for server in servers:
        server.close()


@pytest.mark.parametrize(
    "hidden, allowed, named, expected",
    [
        ([], [], {}, ["bound", "listening"]),
        ([], ["link/ssh-agent0/agent.1"], {}, ["listening"]),
        (["real/ssh-agent0"], [], {}, []),
        ([], [], {"SSH_AUTH_SOCK": "link/ssh-agent0/agent.1"}, ["bound", "listening"]),
        (["real"], [], {"SSH_AUTH_SOCK": "link/ssh-agent0/agent.1"}, []),
    ],
)
def test_each_socket_is_found_once_at_its_real_path(
    tmp_path: Path,
    linked_temp: dict[str, str],
    hidden: list[str],
    allowed: list[str],
    named: dict[str, str],
    expected: list[str],
) -> None:
    environ = {key: str(tmp_path / value) for key, value in named.items()}
    hidden_paths = [tmp_path / path for path in hidden]
    found, _ = host_sockets(environ, hidden_paths, [str(tmp_path / path) for path in allowed], USER)
    assert [path for path in found if path.startswith(str(tmp_path))] == [linked_temp[name] for name in expected]


def test_a_socket_listed_under_the_home_answers(
    tmp_path: Path, linked_temp: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`environment.sockets: [~/…]` was a folder named `~` in the current one (the socket stayed masked): `~` is the
    home, as it is in `readable` and `writable`."""
    monkeypatch.setenv("HOME", str(tmp_path))
    found, _ = host_sockets({}, [], ["~/link/ssh-agent0/agent.1"], USER)
    assert [path for path in found if path.startswith(str(tmp_path))] == [linked_temp["listening"]]


def test_a_socket_made_right_after_a_listing_is_in_the_next_one(tmp_path: Path) -> None:
    """Within the clock tick of the folder's last change (its change time may not move): listed again, every time."""
    servers = []
    try:
        for number in range(50):
            folder = tmp_path / f"f{number}"
            folder.mkdir()
            assert listed(str(folder)) == ([], [], [], 0)
            servers.append(socket.socket(socket.AF_UNIX))
            servers[-1].bind(str(folder / "s.sock"))
            assert listed(str(folder)) == ([str(folder / "s.sock")], [], [], 1)
    finally:
        for server in servers:
            server.close()


def test_a_folder_replaced_by_another_with_the_same_times_is_listed_again(tmp_path: Path) -> None:
    first, second = tmp_path / "ssh-first", tmp_path / "ssh-second"
    first.mkdir()
    (first / "gpg-agent").mkdir()
    assert listed(str(first)) == ([], [str(first / "gpg-agent")], [str(first / "gpg-agent")], 1)
    second.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(second / "agent.1"))
    try:
        times = first.stat()
        os.utime(second, ns=(times.st_atime_ns, times.st_mtime_ns))
        (first / "gpg-agent").rmdir()
        os.utime(first, ns=(times.st_atime_ns, times.st_mtime_ns))
        os.rename(second, first)
        assert first.stat().st_mtime_ns == times.st_mtime_ns
        assert listed(str(first)) == ([str(first / "agent.1")], [], [], 1)
    finally:
        server.close()


TABLE = """Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 11 /run/a.sock
0000000000000000: 00000002 00000000 00000000 0001 01 12 /run/connected.sock
0000000000000000: 00000002 00000000 00010000 0001 01 13 @abstract
0000000000000000: 00000003 00000000 00000000 0001 03 14
0000000000000000: 00000002 00000000 00010000 0001 01 15 /run/with space.sock
"""


@pytest.mark.parametrize(
    "table, expected",
    [
        (TABLE, ({"/run/a.sock", "/run/with space.sock"}, True)),
        (TABLE.replace("@abstract", "/run/b.sock"), ({"/run/a.sock", "/run/b.sock", "/run/with space.sock"}, False)),
        (TABLE.split("\n", 1)[0], (set(), False)),
        (None, (set(), False)),
    ],
)
def test_the_listening_sockets_and_whether_abstract_ones_listen(
    tmp_path: Path, table: str | None, expected: tuple[set[str], bool]
) -> None:
    if table is not None:
        (tmp_path / "unix").write_text(table)
    assert listening(str(tmp_path / "unix")) == expected


def test_the_sockets_the_environment_names() -> None:
    environ = {
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
        "DOCKER_HOST": "unix:///run/user/1000/docker.sock",
        "CONTAINER_HOST": "tcp://127.0.0.1:2375",
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus;unix:abstract=/tmp/dbus-x, unix:path=/run/bus2",
        "HOME": "/root",
    }
    assert named(environ) == {"/tmp/ssh-x/agent.1", "/run/user/1000/docker.sock", "/run/user/1000/bus", "/run/bus2"}
    assert named({}) == set()
