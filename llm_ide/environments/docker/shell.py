"""The shell code of our own commands in a container: their git's environment, the workdir check, the path check."""

from __future__ import annotations

import shlex

from llm_ide.environments.views import UNHOOKED

OUTSIDE = 87  # exit status of a script refusing a path outside the workdir
GONE = 85  # ... of one of ours that finds the workdir gone (a command deleted or moved it)
# our own git in the container reads no config the commands write (the container's global and system ones, HOME's for
# a git before 2.32: a filter, an fsmonitor command, diff.external), runs no hook, takes any owner's repository
OWN_GIT = {"GIT_CONFIG_NOSYSTEM": "1"} | dict.fromkeys(("GIT_CONFIG_GLOBAL", "HOME", "XDG_CONFIG_HOME"), "/dev/null")
OWN_GIT |= UNHOOKED | {"GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_2": "safe.directory", "GIT_CONFIG_VALUE_2": "*"}
OWN_GIT["GIT_NO_REPLACE_OBJECTS"] = "1"  # the base commit's objects as they are, whatever replace ref a command wrote


def in_workdir(workdir: str) -> str:
    """Shell code: into the workdir, else exit GONE (run from "/": the session's own cd would fail first)."""
    return f"cd -- {shlex.quote(workdir)} 2>/dev/null || exit {GONE}; "


def inside_check(workdir: str) -> str:
    """Shell code: `inside PATH` succeeds when PATH, symlinks resolved, is inside the workdir."""
    return (
        f'W=$(realpath -m -- {shlex.quote(workdir)}); inside() {{ local r; r=$(realpath -m -- "$1") && '
        'case "$r/" in "$W"/*) return 0;; esac; return 1; }; '
    )
