"""The step's own work made cheaper without changing what it decides: the host-socket scan's hidden folders compared
as strings, the known secrets found once per change, the ledger's characters counted once per turn."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from llm_ide.conversation import Shown, params_text, params_texts
from llm_ide.environments.processes import Leftovers
from llm_ide.environments.sandbox import host_sockets, real_path, resolve_inside, within
from llm_ide.secrets import known_secrets, redact, register
from llm_ide.state.operations import OperationNode
from llm_ide.variant import Memo


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


def test_the_ledger_writes_each_actions_text_once_and_again_when_it_changed() -> None:
    nodes = [
        OperationNode(id=1, parent_id=None, action_type="bash", action_params={"command": "ls -la"}),
        OperationNode(id=2, parent_id=1, action_type="edit", action_params={"path": "a.py", "old": "<x>", "new": "y"}),
        OperationNode(id=3, parent_id=2, action_type="view", action_params={"path": "b.py", "start_line": 3}),
    ]
    memo = Memo()
    written = [params_text(node) for node in nodes]
    assert params_texts(memo, nodes) == written == params_texts(memo, nodes)
    changed = [nodes[0], replace(nodes[1], action_params={"path": "a.py", "old": "x", "new": "yy"}), nodes[2]]
    assert params_texts(memo, changed) == [written[0], params_text(changed[1]), written[2]]
    assert params_texts(memo, [replace(nodes[2], action_type="bash")]) == [
        params_text(replace(nodes[2], action_type="bash"))
    ]
    nodes[0].action_params["command"] = "ls"  # changed in place: its text is written again
    assert params_texts(memo, nodes[:1]) == ["ls"] == [params_text(nodes[0])]
    nested = OperationNode(id=4, parent_id=3, action_type="view", action_params={"path": "c.py", "lines": [1, 2]})
    assert params_texts(memo, [nested]) == [params_text(nested)]
    nested.action_params["lines"].append(3)  # changed deep inside: seen too
    assert params_texts(memo, [nested]) == [params_text(nested)] == ['{"path": "c.py", "lines": [1, 2, 3]}']


def test_the_known_secrets_follow_the_environment_and_the_registered_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found once per change: a secret variable set, one registered, one removed are each seen at the next output."""
    before = known_secrets()
    assert known_secrets() == before and redact("plain text") == "plain text"
    monkeypatch.setenv("K38B_SERVICE_TOKEN", "tok-8c1f0e57a9")
    assert "tok-8c1f0e57a9" in known_secrets() and redact("a tok-8c1f0e57a9 b") == "a *** b"
    register(["registered-5e0b2d"])
    assert redact("registered-5e0b2d and tok-8c1f0e57a9") == "*** and ***"
    monkeypatch.delenv("K38B_SERVICE_TOKEN")
    assert "tok-8c1f0e57a9" not in known_secrets() and redact("a tok-8c1f0e57a9") == "a tok-8c1f0e57a9"
    ties = ["zz-secret-0001", "aa-secret-0001", "mm-secret-0001"]  # one length: the order is still the same each time
    assert known_secrets(*ties) == sorted({*known_secrets(), *ties}, key=lambda value: (-len(value), value))
    assert [value for value in known_secrets(*ties) if value in ties] == sorted(ties)


def test_the_leftovers_record_follows_each_command_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    record = tmp_path / "run.leftovers.json"
    leftovers = Leftovers(record, "token-1")
    child = subprocess.Popen(["sleep", "30"])
    try:
        leftovers.command_started(child.pid)
        started = json.loads(record.read_text())
        assert (started["token"], started["command"]["pid"], started["folders"]) == ("token-1", child.pid, [])
        leftovers.add_folder("/tmp/llm-ide-x")
        assert json.loads(record.read_text())["folders"] == ["/tmp/llm-ide-x"]
        leftovers.command_ended()
        assert json.loads(record.read_text())["command"] is None
        assert [path.name for path in tmp_path.iterdir()] == [record.name]
        for added in ([], ["/tmp/llm-ide-" + "y" * 5000]):  # in place, then (a record past a page) renamed over
            leftovers.folders += added
            for pid in (child.pid, None):
                inode = record.stat().st_ino
                if pid is None:
                    leftovers.command_ended()
                else:
                    leftovers.command_started(pid)
                written = json.loads(record.read_text())  # whole each time
                command = written.pop("command")
                assert written == {"token": "token-1", "owner": list(leftovers.owner), "folders": leftovers.folders}
                assert (command and command["pid"]) == pid and (record.stat().st_ino == inode) == (not added)
        assert [path.name for path in tmp_path.iterdir()] == [record.name]
    finally:
        child.kill()
        child.wait()
    leftovers.close()
    assert not record.exists()


def test_resolve_inside_follows_symlinks_and_keeps_to_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "repo", tmp_path / "repo-other"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (root / "pkg" / "a.py").write_text("x\n")
    (root / "in").symlink_to(root / "pkg")
    (root / "out").symlink_to(outside)
    (root / "up").symlink_to("..")
    paths = ["pkg/a.py", "in/a.py", "out/b.py", "up/repo/pkg", "../repo-other/b.py", "", ".", "pkg/../..", str(root)]
    paths += [str(outside / "b.py"), "/etc/passwd", "pkg//a.py", "missing/x.py"]
    expected = [
        root / "pkg/a.py",
        root / "pkg/a.py",
        None,
        root / "pkg",
        None,
        root,
        root,
        None,
        root,
        None,
        None,
        root / "pkg/a.py",
        root / "missing/x.py",
    ]
    assert [resolve_inside(root, path) for path in paths] == expected


def test_real_path_is_realpath_for_files_folders_links_and_names_not_there(tmp_path: Path) -> None:
    root, outside = tmp_path / "repo", tmp_path / "other"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (root / "pkg" / "a.py").write_text("x\n")
    os.mkfifo(root / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "s.sock"))
    links = {"in": root / "pkg", "out": outside, "up": Path(".."), "dangling": outside / "gone", "loop": Path("loop")}
    for name, target in links.items():
        (root / name).symlink_to(target)
    names = ["pkg/a.py", "pkg", "pkg/", "in/a.py", "out", "out/b.py", "up/repo/pkg/a.py", "dangling", "dangling/x"]
    names += ["loop", "loop/x", "missing", "missing/more/x.py", "pkg/missing/..", "pkg/a.py/x", "pipe", "s.sock"]
    names += ["pkg//a.py", "pkg/./a.py", "in/../in/a.py", "self.tk.call", "e.g", ".", ".."]
    paths = [str(root / name) for name in names] + ["/", "relative/x", "/proc/self/fd/0", "/nonexistent/x"]
    assert [real_path(path) for path in paths] == [os.path.realpath(path) for path in paths]
    server.close()


def test_the_rows_an_epoch_showed_are_kept_from_outcome_to_outcome_and_follow_a_branch_switch() -> None:
    def rows(*numbers: int) -> str:
        return "\n".join(f"{n:>6}\tline {n}" for n in numbers)

    snapshot = f"## Code context\n{rows(1, 2)}\ntext"
    first = OperationNode(id=1, parent_id=None, observation=f"ran\n{rows(3)}")
    second = OperationNode(id=2, parent_id=1, observation=rows(4, 5))
    sibling = OperationNode(id=3, parent_id=1, observation=rows(6))
    shown = Shown(snapshot, 0)

    def fresh(nodes: list[OperationNode]) -> set[str]:
        return {row for text in [snapshot, *(n.observation for n in nodes)] for row in text.split("\n") if "\t" in row}

    for chain in ([], [first], [first, second], [first], [first, sibling], [first, replace(sibling, observation="")]):
        assert shown.through(chain) == fresh(chain)
    assert shown.outputs == [(1, first.observation), (3, "")]
