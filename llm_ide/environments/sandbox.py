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


def bwrap_argv(bwrap: str, *, writable: list[Path], cwd: Path, network: bool, command: list[str]) -> list[str]:
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in writable:
        if path.exists():  # bwrap refuses to bind a missing path (and would fail every command)
            argv += ["--bind", str(path), str(path)]
    return [*argv, "--chdir", str(cwd), *command]
