"""The local sandbox: bubblewrap around every command (own PID namespace and /proc, the repository, the tools and a
scratch directory ($TMPDIR) writable, the rest of the file system read-only, network optional)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger("llm_ide.environment")
_warned = False


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def warn_missing_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "bubblewrap (bwrap) is not installed: local commands run unsandboxed, with access to the whole machine "
            "(install the bubblewrap package to contain them)"
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
        argv += ["--bind", str(path), str(path)]
    return [*argv, "--chdir", str(cwd), *command]
