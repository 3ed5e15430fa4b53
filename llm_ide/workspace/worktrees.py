"""`git worktree` in a repository one command at a time in this process: several at once race on .git/worktrees
("fatal: failed to read .git/worktrees/repo/commondir")."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from llm_ide.environments.views import UNHOOKED

WORKTREES = threading.Lock()  # held by every `git worktree` command of this process


def git_worktree(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`git worktree ARGS` in `repo`, after any other of this process's (none of the repository's hooks runs)."""
    with WORKTREES:
        return subprocess.run(
            ["git", "-C", str(repo), "worktree", *args], capture_output=True, text=True, env=os.environ | UNHOOKED
        )
