"""The worktree snapshot after each command (workspace/patch.py) in one call into the environment while the files it
leaves out (artefacts, binary and oversized files) stay the same ones: each extraction equals a fresh one (a base kept
anew, no state carried), whatever the left-out files become."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import git, make_git_repo

from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.workspace.patch import BaseTree
from llm_ide.workspace.putback import pristine, put_back


class CountingEnvironment(LocalEnvironment):
    """A local environment that counts our own commands (each one a process started from llm-ide) and the git
    processes they start (git's trace of each start)."""

    calls = 0

    def __init__(self, repo: Path, **options: Any) -> None:
        super().__init__(repo, **options)
        self.trace = repo.parent / "git.trace"
        self.env["GIT_TRACE2"] = str(self.trace)

    def run_trusted(self, command: str, timeout: float) -> tuple[int, bytes]:
        self.calls += 1
        return super().run_trusted(command, timeout)

    def gits(self) -> int:
        return self.trace.read_text().count(" start ") if self.trace.exists() else 0


def write(repo: Path, path: str, data: bytes | None) -> None:
    target = repo / path
    if data is None:
        target.unlink()
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


# (files written or removed, our commands the extraction takes, the files its patch holds)
STEPS = [
    ({"a.py": b"x = 2\n", "__pycache__/a.cpython-311.pyc": b"\x00\x01"}, 2, ["a.py"]),
    ({"b.py": b"y = 1\n"}, 1, ["a.py", "b.py"]),
    ({"__pycache__/a.cpython-311.pyc": b"\x00\x02"}, 1, ["a.py", "b.py"]),
    ({"__pycache__/a.cpython-311.pyc": None, "image.png": b"\x89PNG\x00"}, 2, ["a.py", "b.py"]),
    ({"image.png": b"now text\n"}, 2, ["a.py", "b.py", "image.png"]),
    ({}, 1, ["a.py", "b.py", "image.png"]),
    ({"huge.txt": b"z" * 600_000, "data.bin": b"\x00\x01"}, 2, ["a.py", "b.py", "image.png"]),
    ({"huge.txt": b"z\n"}, 2, ["a.py", "b.py", "huge.txt", "image.png"]),
    ({"data.bin": b"text again\n", "build/x.o": b"\x7fELF"}, 2, ["a.py", "b.py", "data.bin", "huge.txt", "image.png"]),
    ({":odd name.py": b"z = 1\n"}, 1, [":odd name.py", "a.py", "b.py", "data.bin", "huge.txt", "image.png"]),
]


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_each_snapshot_equals_a_fresh_one_in_one_call_while_the_left_out_files_stay(
    tmp_path: Path, sandbox: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", "data.bin": "old\n"})
    base, settings = git(repo, "rev-parse", "HEAD").strip(), load_config("default").patch
    env = CountingEnvironment(repo, tools_dir=tmp_path / "tools", sandbox=sandbox)
    tree = BaseTree(env, base)
    try:
        for changes, calls, files in STEPS:
            for path, data in changes.items():
                write(repo, path, data)
            before, gits = env.calls, env.gits()
            patch, gits = tree.extract(settings, check=True), env.gits() - gits
            assert (env.calls - before, patch) == (calls, BaseTree(env, base).extract(settings))
            if calls == 1:  # the repository's check, add, 1 diff (no gitlinks listed: no gitlink was ever staged):
                assert gits == 3 + 2 * bool(tree.excluded)  # its records and patch; or the left-out reset, a 2nd diff
            assert sorted(line.split(" b/")[1] for line in patch.splitlines() if line.startswith("diff --git")) == files
        assert pristine(tree, settings) is False and put_back(tree, "", settings) == 6
        assert pristine(tree, settings) and tree.extract(settings) == ""
    finally:
        env.close()


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_a_snapshot_whose_base_is_gone_installs_it_again_and_leaves_out_the_same_files(
    tmp_path: Path, sandbox: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    base, settings = git(repo, "rev-parse", "HEAD").strip(), load_config("default").patch
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools", sandbox=sandbox)
    tree = BaseTree(env, base)
    try:
        write(repo, "a.py", b"x = 2\n")
        write(repo, "__pycache__/a.cpython-311.pyc", b"\x00\x01")
        first = tree.extract(settings)
        assert tree.excluded == {"__pycache__/a.cpython-311.pyc"} and Path(tree.git_dir).is_dir()
        shutil.rmtree(tree.git_dir)
        assert (tree.extract(settings), tree.extract(settings)) == (first, first)
        for pack in Path(tree.git_dir).glob("objects/pack/*"):  # damaged: the base's objects gone, the index kept
            pack.unlink()
        assert (tree.extract(settings), tree.extract(settings)) == (first, first)
        assert first == BaseTree(env, base).extract(settings) and first.startswith("diff --git a/a.py b/a.py")
    finally:
        env.close()


def test_a_left_out_list_longer_than_one_argument_may_be_leaves_the_snapshots_whole(tmp_path: Path) -> None:
    """Over 128 KiB of left-out paths (a build's binaries the repository does not ignore): the list goes to our
    directory as a file; written into the staging's script, it made bash's argument too long (a traceback)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    base, settings = git(repo, "rev-parse", "HEAD").strip(), load_config("default").patch
    folder = repo / ("binaries-" + "b" * 100)
    folder.mkdir()
    for number in range(600):
        (folder / f"{number}-{'c' * 220}.bin").write_bytes(b"\x00")
    (repo / "a.py").write_text("x = 2\n")
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools", sandbox="none")
    try:
        tree = BaseTree(env, base)
        assert tree.extract(settings).startswith("diff --git a/a.py b/a.py") and len(tree.excluded) == 600
    finally:
        env.close()
