"""The worktree put back as a snapshot of it has it (`put_back`: a resumed run's at its start, an attempt's patch
applied): before an operation a kill cut runs again (`run_once`, llm_ide/nodes/execute_tool.py), as the last
completed step left it. What its files held then, the cut operation's partial changes or the user's own made since
the kill, is written to the run's folder first: putting the worktree back never loses them."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from itertools import count
from pathlib import Path

from llm_ide.environments.base import Environment
from llm_ide.fileio import atomic_write
from llm_ide.secrets import redact
from llm_ide.settings import CoreSettings, PatchSettings
from llm_ide.workspace.patch import BaseTree, PatchError, keep_base, split_z

log = logging.getLogger("llm_ide.run")
said = logging.getLogger("llm_ide.environment")  # its warnings are shown on the console as they happen


def moved_notes(env: Environment, base: str) -> list[str]:
    """A resumed run's checkout whose HEAD is neither the run's base commit nor a commit after it (another branch
    checked out, a reset since the run stopped): the patch is still the working tree against the base, so what the
    commit checked out changes is in it."""
    if env.run_trusted(f"git merge-base --is-ancestor {base} HEAD", 60)[0] == 0:
        return []
    head = env.run_trusted("git rev-parse --short=12 HEAD", 60)[1].decode(errors="replace").strip() or "none"
    return [
        f"warning: HEAD ({head}) is no longer the run's base commit {base[:12]} or a commit after it: the patch is "
        f"the working tree against {base[:12]}, so it holds what the checkout changes from it; check out "
        f"{base[:12]} (or a branch holding it) to go on where the run stopped"
    ]


def restorer(env: Environment, base: str, settings: CoreSettings, kept: Path | None = None) -> Callable[[str], bool]:
    """Puts the worktree back as a snapshot has it; False when it cannot (the caller then tells the agent). With
    `keep` (by default) and `kept`, what the worktree held, when it differs from the snapshot, is saved first
    (`<kept>.put-back-<n>.patch`: the worktree's diff against the base commit)."""

    def restore(snapshot: str, keep: bool = True) -> bool:
        tree = keep_base(env, base)
        try:
            held = tree.extract(settings.patch) if keep and kept is not None else ""
            if held and redact(held) != snapshot:
                path = next(path for n in count(1) if not (path := Path(f"{kept}.put-back-{n}.patch")).exists())
                atomic_write(path, held)
                said.warning(
                    "the worktree is put back as the last completed step left it, to run the operation a kill cut "
                    "again; what its files held (that operation's changes, or changes made since) is saved in %s",
                    path,
                )
            put_back(tree, snapshot, settings.patch)
        except (PatchError, OSError) as error:
            log.warning("the worktree could not be put back before running a command again: %s", error)
            return False
        return True

    return restore


def put_back(tree: BaseTree, patch: str, settings: PatchSettings) -> int:
    """The working tree put back as the snapshot `patch` (an `extract` of it) has it: each file the patch covers
    that differs now is written back, or removed when the snapshot has none; nothing else is touched (ignored,
    binary and oversized files stay as they are). The number of files put back; PatchError when the patch does
    not apply to the base (e.g. a secret masked in its context lines)."""
    now = tree.staged(settings, "write-tree").decode().strip()
    diff, listing, git = f"{tree.git_dir}/restore.diff", f"{tree.git_dir}/restore-paths", tree.git("restore")
    tree.env.put_private(diff, patch.encode("utf-8"))
    apply = f"{git} apply --cached --whitespace=nowarn {shlex.quote(diff)} && " if patch.strip() else ""
    wanted = tree.run_git(f"read-tree {shlex.quote(tree.base)} && {apply}{git} write-tree", "restore").decode().strip()
    changes = split_z(tree.run_git(f"diff-tree -r -z --no-renames --name-status {now} {wanted}"))
    put = [path for status, path in zip(changes[::2], changes[1::2], strict=True) if status != "D"]
    gone = [path for status, path in zip(changes[::2], changes[1::2], strict=True) if status == "D"]
    for paths, run in ((put, f"{git} checkout-index -f -z --stdin"), (gone, "xargs -0 rm -f --")):
        if paths:
            tree.env.put_private(listing, b"".join(path.encode() + b"\0" for path in paths))
            tree.script(f"{run} < {shlex.quote(listing)}", "cannot restore the worktree")
    return len(put) + len(gone)


def pristine(tree: BaseTree, settings: PatchSettings) -> bool:
    """Whether the working tree is the base commit's (a fresh checkout)."""
    trees = tree.staged(settings, f"rev-parse {shlex.quote(tree.base)}^{{tree}} && {tree.git()} write-tree")
    return len(set(trees.decode().split())) == 1  # the base's tree, the worktree's
