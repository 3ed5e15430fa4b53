"""A `commondir` a command writes into the container's git directory (or a submodule's) is removed when the command
ends, as in a local run (environments/views.py): git would read the config, hooks and refs of the folder it names, and
the base commit, gone from there, would end the run as if `.git` had been replaced."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable

# where no `commondir` is yet: the git directory and its submodules' (the folders under .git/modules holding a HEAD)
ABSENT = (
    "{ printf '.git\\0'; find .git/modules -type f -name HEAD -printf '%h\\0' 2>/dev/null; } | "
    'while IFS= read -r -d \'\' d; do [ -e "$d/commondir" ] || [ -L "$d/commondir" ] || printf \'%s\\0\' "$d"; done'
)


def removal(run_trusted: Callable[[str, float], tuple[int, bytes]], workdir: str) -> str:
    """The shell code removing, after each of the agent's commands, the `commondir` files there are not now (the ones
    there are kept): builtins' tests, then `rm` only for one a command wrote (the session evaluates it itself)."""
    returncode, output = run_trusted(ABSENT, 60)
    folders = output.decode(errors="replace").split("\0") if returncode == 0 else [".git"]
    paths = [shlex.quote(posixpath.join(workdir, folder, "commondir")) for folder in folders if folder]
    return (
        f"for __llm_ide_f in {' '.join(paths)}; do "
        'if [ -e "$__llm_ide_f" ] || [ -L "$__llm_ide_f" ]; then timeout -s KILL 60 rm -f -- "$__llm_ide_f"; fi; done'
    )
