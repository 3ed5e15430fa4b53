"""What a new run says of its baseline: the base commit, and the repository's changes that are not in it."""

from __future__ import annotations

from llm_ide.environments.base import Environment


def baseline_notes(env: Environment, base: str) -> list[str]:
    """What a new run takes as its baseline, and a warning when the repository has changes that are not in it (they
    would be part of the patch, which is the working tree against the base commit)."""
    note = f"baseline: commit {base[:12]} (HEAD); the patch is the working tree's change against it"
    returncode, output = env.run_trusted("git status --porcelain -unormal --ignore-submodules=dirty", 60)
    paths = [line[3:] for line in output.decode(errors="replace").splitlines() if line[3:]] if returncode == 0 else []
    if not paths:
        return [note]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return [
        note,
        f"warning: the repository has uncommitted changes ({shown}): they are not in the baseline, so the patch "
        "will hold them too; commit or stash them first for a patch of the run's own change",
    ]
