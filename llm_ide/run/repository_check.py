"""The repository a run is given, checked before it starts: the work tree of a git repository with a commit, its own
top folder (a failure is a PreflightError of one line, in the words of the door used: `option`)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from llm_ide.errors import PreflightError


def check_not_in_git_dir(repo: Path, option: str = "--repo") -> None:
    """A folder inside a git directory (`.git`, `.git/hooks`) is refused with the work tree to give, never with the
    advice to make a repository in there."""
    asked = ["git", "-C", str(repo), "rev-parse", "--absolute-git-dir"]
    git_dir = subprocess.run(asked, capture_output=True, text=True).stdout.strip()
    if git_dir:
        tree = f"{option} {Path(git_dir).parent}" if Path(git_dir).name == ".git" else "the folder of its work tree"
        raise PreflightError(f"{repo} is inside the git directory {git_dir}, not a work tree: give {tree}")


def check_repository(repo: Path, option: str = "--repo") -> None:
    """The patch is the working tree's change against a commit: a folder that is not there, not a git repository, or
    a repository without a commit is refused (nothing is run in it or written to it)."""
    if repo.exists() and not repo.is_dir():
        raise PreflightError(f"{repo} is a file, not a repository: give the folder of a git repository")
    if not repo.is_dir():
        raise PreflightError(f"repository not found: {repo}")
    quoted = shlex.quote(str(repo))
    asked = ["git", "-C", str(repo), "rev-parse", "--show-toplevel", "--verify", "-q", "HEAD"]
    found = subprocess.run(asked, capture_output=True, text=True)  # in a work tree: its top, then HEAD's commit if any
    if "dubious ownership" in found.stderr:  # git's safe.directory: root (or another user) on this one's repository
        raise PreflightError(
            f"git refuses {repo}: it is another user's repository (git's dubious ownership); if you trust it: "
            f"git config --global --add safe.directory {shlex.quote(str(repo.resolve()))}"
        )
    if not found.stdout:
        check_not_in_git_dir(repo, option)
        raise PreflightError(
            f"{repo} is not a git repository: the run's patch is the change against a commit; make one first: "
            f"git -C {quoted} init && git -C {quoted} add -A && git -C {quoted} commit -m base"
        )
    if found.returncode != 0:
        raise PreflightError(
            f"{repo} has no commit yet: the run's patch is the change against one; make it first: "
            f"git -C {quoted} add -A && git -C {quoted} commit -m base"
        )
    top = Path(found.stdout.splitlines()[0])
    if top.resolve() != repo.resolve():
        raise PreflightError(
            f"{repo} is a folder inside the git repository {top}: give the repository's own folder (the run's patch is "
            "the change of the whole repository against its commit)"
        )
