"""What a benchmarked agent writes: write syscalls into its output folder (strace) and the folder's size."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

WRITE = re.compile(r"^(\d+)\s+([\d.]+) (?:<\.\.\. \w+ resumed>|\w+\(\d+<([^>]*)>)(.*?)(?:= (-?\d+).*)?$")


def folder_bytes(folder: Path) -> int:
    """The size of the files in `folder` now; a file the agent renames or removes meanwhile (an atomic write's
    temporary file) counts as gone."""
    total = 0
    for path in folder.rglob("*") if folder.exists() else ():
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def strace_prefix(log: Path) -> list[str]:
    if shutil.which("strace") is None:
        return []
    calls = "write,pwrite64,writev,pwritev,pwritev2"
    return ["strace", "-f", "-qq", "--seccomp-bpf", "-ttt", "-y", "-s", "0", "-e", f"trace={calls}",
            "-e", "signal=none", "-o", str(log), "--"]  # fmt: skip


def writes_into(log: Path, folder: Path) -> list[tuple[float, int, str]]:
    """(time, bytes, file) of every write syscall into `folder` (an unfinished call completes on its `resumed` line);
    a temporary file counts for the file it replaces."""
    pending: dict[str, str] = {}
    found = []
    prefix = str(folder.resolve()) + "/"
    for line in log.read_text(errors="replace").splitlines():
        match = WRITE.match(line)
        if match is None:
            continue
        pid, when, path, _, result = match.groups()
        if path is None:
            path = pending.pop(pid, "")
        elif result is None:
            pending[pid] = path
            continue
        if result is not None and int(result) > 0 and path.startswith(prefix):
            name = re.sub(r"^\.(.+)\.\w+\.tmp$", r"\1", path[len(prefix) :])
            found.append((float(when), int(result), name))
    return found
