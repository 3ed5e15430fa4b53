"""The replay's own checkout: a fresh clone of a local repository or a git bundle at a branch or a commit. The source
is only read; a source without the branch or the commit is a ReplayError before anything is written."""

from __future__ import annotations

import subprocess
from pathlib import Path

from llm_ide.replay.formats import ReplayError

IDENTITY = ["-c", "user.name=llm-ide replay", "-c", "user.email=replay@llm-ide.invalid"]


def git(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, input=input)


def bundle_heads(bundle: Path) -> dict[str, str]:
    """refs/heads/NAME → commit of a bundle (read without writing anything)."""
    listed = git("bundle", "list-heads", str(bundle))
    if listed.returncode != 0:
        raise ReplayError(f"{bundle}: not a git bundle ({one_line(listed.stderr)})")
    heads = (line.split(" ", 1) for line in listed.stdout.splitlines() if " " in line)
    return {ref.removeprefix("refs/heads/"): sha for sha, ref in heads if ref.startswith("refs/heads/")}


def resolve(source: Path, branch: str | None, commit: str | None, default_branch: str | None) -> str:
    """The commit to check out, checked in `source` before anything is cloned."""
    if not source.exists():
        raise ReplayError(f"repository not found: {source}")
    wanted = branch or (None if commit else default_branch)
    if source.is_file():
        heads = bundle_heads(source)
        if wanted is not None:
            if wanted not in heads:
                raise ReplayError(f"{source}: the bundle has no branch {wanted}")
            return heads[wanted]
        if commit is None:
            if len(heads) != 1:
                raise ReplayError(f"{source}: the bundle has {len(heads)} branches: give --branch or --commit")
            return next(iter(heads.values()))
        return commit  # checked once cloned: a bundle is not a repository to ask
    if git("rev-parse", "--git-dir", cwd=source).returncode != 0:
        raise ReplayError(f"{source}: not a git repository")
    ref = f"refs/heads/{wanted}" if wanted is not None else (commit or "HEAD")
    found = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=source)
    if found.returncode != 0:
        what = f"no branch {wanted}" if wanted is not None else f"no commit {commit or 'HEAD'}"
        raise ReplayError(f"{source}: the repository has {what}")
    return found.stdout.strip()


def checkout(source: Path, into: Path, branch: str | None, commit: str | None, default_branch: str | None) -> str:
    """A fresh checkout of `source` in `into` (which must not exist) at the commit asked for: its full hash. The
    checkout is llm-ide's own (history after the commit is removed by the run, as in SWE-bench checkouts)."""
    wanted = resolve(source, branch, commit, default_branch)
    cloned = git("clone", "-q", "--no-checkout", str(source.resolve()), str(into))
    if cloned.returncode != 0:
        raise ReplayError(f"{source}: cannot clone it ({one_line(cloned.stderr)})")
    done = git("checkout", "-q", "--detach", wanted, cwd=into)
    if done.returncode != 0:
        raise ReplayError(f"{source}: the repository has no commit {wanted}")
    return git("rev-parse", "HEAD", cwd=into).stdout.strip()


def one_line(text: str) -> str:
    return " ".join(text.split())[:300]
