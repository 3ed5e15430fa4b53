"""The local sandbox: bubblewrap around every command (own PID namespace and /proc, the repository, the tools and a
scratch directory ($TMPDIR) writable, the rest of the file system read-only, network optional)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

log = logging.getLogger("llm_ide.environment")
_warned = False


def bwrap_path() -> str | None:
    """bwrap when it is installed and works here (it may lack the right to create namespaces, e.g. in a container);
    otherwise None, said once."""
    found = shutil.which("bwrap")
    if found is None:
        warn_once("bubblewrap (bwrap) is not installed")
        return None
    problem = _probe(found)
    if problem:
        warn_once(f"bubblewrap (bwrap) does not work here ({problem})")
        return None
    return found


@cache
def _probe(bwrap: str) -> str:
    argv = bwrap_argv(bwrap, writable=[], cwd=Path("/"), network=True, command=["true"])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    return "" if done.returncode == 0 else " ".join(done.stderr.split())[:200] or f"exit status {done.returncode}"


def warn_once(problem: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            f"{problem}: local commands run unsandboxed, with access to the whole machine and the agent's "
            "environment (install the bubblewrap package, or allow user namespaces, to contain them)"
        )


def resolve_inside(root: Path, path: str) -> Path | None:
    """`path` (relative to `root`, or absolute) with every symlink resolved, or None when it leads outside `root`."""
    target = Path(os.path.realpath(root / path))
    return target if target == root or target.is_relative_to(root) else None


def bwrap_argv(
    bwrap: str,
    *,
    writable: list[Path],
    cwd: Path,
    network: bool,
    command: list[str],
    mounts: dict[str, Path] | None = None,
) -> list[str]:
    """`mounts`: more writable folders, each shown at another path (e.g. a checkout at /testbed)."""
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
    if not network:
        argv.append("--unshare-net")
    argv += [*root_binds(list(mounts or {})), "--dev", "/dev", "--proc", "/proc"]
    for path in writable:
        if path.exists():  # bwrap refuses to bind a missing path (and would fail every command)
            argv += ["--bind", str(path), str(path)]
    for target, source in (mounts or {}).items():
        argv += ["--bind", str(source), target]
    return [*argv, "--chdir", str(cwd), *command]


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


def check_mount_point(target: str) -> str:
    """A path where bwrap can show a folder: absolute, and existing or not under an existing top-level entry (bwrap
    cannot make a folder in the read-only root's existing entries)."""
    path = Path(target)
    top = Path("/", *path.parts[1:2])
    if not path.is_absolute() or path == top.parent or (not path.exists() and path != top and top.exists()):
        raise ValueError(f"{target}: a mount point must be an absolute path that exists or whose top folder does not")
    return str(path)
