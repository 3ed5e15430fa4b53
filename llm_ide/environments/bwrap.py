"""Whether bubblewrap can sandbox the local commands here, asked once at a run's set-up (and by the preflight): bwrap
installed and working (it may lack the right to create namespaces, e.g. in a container), the isolation that works
(probed once), and a run without it said once; and what every command's bubblewrap line starts with (`argv_head`),
decided once per run."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

from llm_ide.environments.sandbox import Sandbox
from llm_ide.environments.views import hidden_paths
from llm_ide.errors import warn_once

log = logging.getLogger("llm_ide.environment")

# what takes every privilege from a command: all capabilities dropped, in a user namespace of its own where they work
# (then nothing it does counts as root's towards the host; no further one can be made in it: bwrap 0.8), else in the
# host's (a container that forbids them)
ISOLATIONS = (
    ("--unshare-user", "--disable-userns", "--cap-drop", "ALL"),
    ("--unshare-user", "--cap-drop", "ALL"),
    ("--cap-drop", "ALL"),
)

# the kernel's settings and triggers: files root may write without any capability (the owner's bits), read-only
KERNEL_FILES = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")


def sandbox_path(setting: str) -> str | None:
    """bwrap for `environment.sandbox: bwrap` when it works here; None otherwise, said once (`none` too)."""
    if setting == "none":
        warn_unsandboxed("environment.sandbox is none", "environment.sandbox: bwrap")
    return bwrap_path() if setting == "bwrap" else None


def bwrap_path() -> str | None:
    """bwrap when it is installed and works here (it may lack the right to create namespaces, e.g. in a container);
    otherwise None, said once."""
    if problem := bwrap_problem():
        warn_unsandboxed(problem)
        return None
    return shutil.which("bwrap")


def bwrap_problem() -> str | None:
    """Why bwrap cannot sandbox the commands here (not installed, or not working); None when it can. Says nothing."""
    found = shutil.which("bwrap")
    if found is None:
        return "bubblewrap (bwrap) is not installed"
    problem = _probe(found)
    return f"bubblewrap (bwrap) does not work here ({problem})" if isinstance(problem, str) else None


def isolation(bwrap: str) -> tuple[str, ...]:
    """The first of ISOLATIONS that works here (bwrap_problem says when none does)."""
    found = _probe(bwrap)
    return found if isinstance(found, tuple) else ISOLATIONS[-1]


@cache
def _probe(bwrap: str) -> tuple[str, ...] | str:
    """The isolation options that work here, or why none does."""
    problem = ""
    for options in ISOLATIONS:
        sandbox = Sandbox(argv_head(bwrap, options, True, []), writable=[], hidden=hidden_paths())
        argv = sandbox.argv(["true"], Path("/"))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode == 0:
            return options
        problem = problem or " ".join(done.stderr.split())[:200] or f"exit status {done.returncode}"
    return problem


def argv_head(bwrap: str, isolation: tuple[str, ...], network: bool, mounts: list[str]) -> tuple[str, ...]:
    """What every command's bubblewrap line starts with, decided once per run: its own PID, IPC and UTS namespaces
    and session, `isolation` (ISOLATIONS), no network but its own unless `network`, `/` read-only (rebuilt when a
    mount point in `mounts` is missing), its own /dev and /proc, the kernel's settings read-only."""
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session", *isolation]
    if not network:
        argv.append("--unshare-net")
    argv += [*root_binds(mounts), "--dev", "/dev", "--proc", "/proc"]
    for path in KERNEL_FILES:
        argv += ["--ro-bind-try", path, path]
    return tuple(argv)


def root_binds(targets: list[str]) -> list[str]:
    """`/` read-only. A mount point missing on the host (e.g. /testbed) cannot be made in it: then the root is rebuilt
    from its entries (read-only binds, symlinks kept as symlinks), where bwrap can make it."""
    if all(Path(target).exists() for target in targets):
        return ["--ro-bind", "/", "/"]
    argv = []
    for entry in sorted(Path("/").iterdir()):
        if entry.name in ("dev", "proc") or str(entry) in targets:
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.exists():
            argv += ["--ro-bind", str(entry), str(entry)]
    return argv


def warn_unsandboxed(problem: str, remedy: str = "install the bubblewrap package, or allow user namespaces") -> None:
    message = (
        f"{problem}: local commands run unsandboxed, with access to the whole machine and the agent's "
        f"environment ({remedy}, to contain them)"
    )
    warn_once(log, ("unsandboxed",), message)
