"""The working tree around each replayed command: the tracked files (those of the base commit) that differ from it,
taken before every step and at the end; what a command changed is the difference of the two states around it. git
looks at it through a git directory of ours beside the checkout (the base commit's objects, an index): the
checkout's own `.git`, which the commands write, has no say (its hooks, fsmonitor command and filters never run)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from llm_ide.actions import read_only
from llm_ide.environments.views import UNHOOKED

OWN = ("--ignore-submodules=dirty",)  # git never runs in a submodule (under a config a command may have written)
State = dict[str, bytes | None]  # path → content (None: deleted), for the tracked files that differ from the base


@dataclass(frozen=True)
class FileChange:
    path: str
    old: str  # "" when the file did not exist before (restored by the command)
    new: str  # "" when the command deleted it


def git_out(repo: Path, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> bytes:
    environ = {**os.environ, **UNHOOKED, **(env or {})}
    return subprocess.run(["git", *args], cwd=repo, env=environ, input=input, capture_output=True, check=True).stdout


class TreeWatch:
    def __init__(self, repo: Path, base: str) -> None:
        self.repo = repo
        self.base = base
        self.tracked = set(git_out(repo, "ls-tree", "-r", "-z", "--name-only", base).decode().split("\0")) - {""}
        own = repo.parent / f"{repo.name}.watch.git"  # outside the checkout: read-only to the commands
        self.env = {"GIT_DIR": str(own), "GIT_INDEX_FILE": str(own / "index"), "GIT_WORK_TREE": str(repo)}
        objects = git_out(repo, "rev-list", "--objects", "--no-walk", base)
        pack = git_out(repo, "pack-objects", "--window=0", "--stdout", input=objects)
        git_out(repo, "init", "-q", "--bare", "--template=", str(own))
        git_out(repo, "index-pack", "--stdin", env=self.env, input=pack)
        git_out(repo, "read-tree", base, env=self.env)
        git_out(repo, "update-index", "-q", "--refresh", env=self.env)
        self.states: list[State] = []
        self._blobs: dict[str, bytes] = {}

    def take(self, *_: object) -> None:
        names = git_out(self.repo, "diff", "--name-only", "-z", "--no-renames", *OWN, self.base, "--", env=self.env)
        state: State = {}
        for name in names.decode("utf-8", "surrogateescape").split("\0"):
            if name in self.tracked:
                path = self.repo / name
                state[name] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        self.states.append(state)

    def base_content(self, path: str) -> bytes:
        if path not in self._blobs:
            self._blobs[path] = git_out(self.repo, "show", f"{self.base}:{path}", env=self.env)
        return self._blobs[path]

    def content(self, state: State, path: str) -> bytes | None:
        return state[path] if path in state else self.base_content(path)

    def changes(self, step: int) -> list[FileChange]:
        """What the command of `step` (1-based) changed in tracked files; none when the states are missing."""
        if step >= len(self.states):
            return []
        before, after = self.states[step - 1], self.states[step]
        changed = []
        for path in sorted(set(before) | set(after)):
            old, new = self.content(before, path), self.content(after, path)
            if old != new:
                changed.append(FileChange(path, text(old), text(new)))
        return changed

    def final_diff(self) -> str:
        """The tracked files' diff against the base, as git prints it."""
        diff = git_out(self.repo, "diff", "--no-renames", "--no-ext-diff", *OWN, self.base, "--", env=self.env)
        return diff.decode("utf-8", "replace")


def text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


def tracked_sections(diff: str, tracked: set[str]) -> dict[str, str]:
    """A `git diff` as path → its section, for the tracked files only (new files left out), `index` lines dropped:
    two diffs of the same tracked changes compare equal whatever made them (`git diff --cached`, `git diff BASE`)."""
    sections: dict[str, str] = {}
    for part in re.split(r"^(?=diff --git )", diff, flags=re.M):
        header = re.match(r"diff --git a/(.+?) b/(.+)\n", part)
        if header is None or header.group(1) not in tracked or re.search(r"^new file mode", part, re.M):
            continue
        lines = [line for line in part.rstrip("\n").split("\n") if not line.startswith("index ")]
        sections[header.group(1)] = "\n".join(lines)
    return sections


def environment_changes(
    submission: str, tracked: set[str], commands: list[str], edited: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The submission's sections (path → section) of tracked files that no command of the trajectory could have
    written (none that is not read-only names the file or its name) nor an action edited (`edited`: the names of the
    files an edit or create action wrote): the original's environment had changed them before its first step
    (SWE-bench pins a dependency in setup.py, tox.ini or pyproject.toml), so its commands saw them changed, and the
    replay puts them so before its first step."""
    writers = "\n".join(command for command in commands if not read_only(command))
    return {
        path: section
        for path, section in tracked_sections(submission, tracked).items()
        if (name := path.rsplit("/", 1)[-1]) not in edited
        and not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", writers)
    }
