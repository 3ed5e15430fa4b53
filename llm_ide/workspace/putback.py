"""The worktree put back as the last completed step left it before an operation a kill cut runs again
(llm_ide/recovery.py). What its files held then, the cut operation's partial changes or the user's own made since the
kill, is written to the run's folder first: putting the worktree back never loses them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import count
from pathlib import Path

from llm_ide.environments.base import Environment
from llm_ide.fileio import atomic_write
from llm_ide.secrets import redact
from llm_ide.settings import CoreSettings
from llm_ide.workspace.patch import PatchError, keep_base

log = logging.getLogger("llm_ide.run")
said = logging.getLogger("llm_ide.environment")  # its warnings are shown on the console as they happen


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
            tree.restore(snapshot, settings.patch)
        except (PatchError, OSError) as error:
            log.warning("the worktree could not be put back before running a command again: %s", error)
            return False
        return True

    return restore
