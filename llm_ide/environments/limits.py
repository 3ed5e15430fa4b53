"""What a local command may use (`environment.limits`): processes, file size, memory and CPU time. A command that
goes past one fails (a fork bomb's forks, a disk filler's write, an allocation, a busy loop) as a command fails, and
the run goes on.

Where a cgroup can be made (root, a writable cgroup file system: v1 or v2), the run's commands join one of the run's
own before they start: its `pids.max` caps their processes and threads together, and its memory limit their memory
together (the kernel ends the greediest when they pass it). Elsewhere each process of a command gets rlimits
instead: RLIMIT_NPROC (not for root, whom the kernel exempts) and RLIMIT_DATA. File size (RLIMIT_FSIZE) and CPU time
(RLIMIT_CPU, seconds of each process) are rlimits everywhere. Inside bubblewrap no command can raise them again (it
holds no capability); without it, a command as root could."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from llm_ide.environments.scratch import owned_name, owner_gone
from llm_ide.errors import warn_once

log = logging.getLogger("llm_ide.environment")

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_GRACE = 5  # seconds of CPU between SIGXCPU and SIGKILL


@dataclass(frozen=True)
class Limits:
    processes: int | None = None
    file_size: int | None = None  # bytes
    memory: int | None = None  # bytes
    cpu_seconds: int | None = None

    @classmethod
    def of(cls, settings: Any) -> Limits:
        """From `environment.limits`."""
        return cls(
            settings.processes,
            None if settings.file_size is None else int(settings.file_size),
            None if settings.memory is None else int(settings.memory),
            settings.cpu_seconds,
        )


def ulimit_line(limits: Limits, cgroup: bool, as_root: bool) -> str:
    """What a command's shell runs first: its rlimits set (soft and hard: a command without capabilities cannot raise
    them), on the command's first line ('' when there is none to set). `cgroup`: processes and memory are the
    cgroup's. CPU time: SIGXCPU ("CPU time limit exceeded") at the limit, SIGKILL a few seconds later if a process
    ignores it."""
    options, soft = [], ""
    cpu = limits.cpu_seconds
    for flag, resource_id, value, scale in (
        ("-f", resource.RLIMIT_FSIZE, limits.file_size and -(-limits.file_size // 1024), 1024),  # 1024-byte blocks
        ("-t", resource.RLIMIT_CPU, cpu and cpu + CPU_GRACE, 1),
        ("-d", resource.RLIMIT_DATA, None if cgroup else limits.memory and limits.memory // 1024, 1024),  # kbytes
        ("-u", resource.RLIMIT_NPROC, None if cgroup or as_root else limits.processes, 1),
    ):
        if value:
            hard = resource.getrlimit(resource_id)[1]
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard // scale)  # never above what this process may set: that would fail
            options += [flag, str(value)]
            if flag == "-t":
                soft = f" && ulimit -S -t {min(cpu, value)}"
    return f"ulimit {' '.join(options)}{soft} || exit 126; " if options else ""


def controller_dirs() -> dict[str, Path]:
    """Where this process's cgroup is, per controller we use (pids, memory), in the hierarchy that has it."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else []:
            if name in ("pids", "memory") and (CGROUP_ROOT / name / "cgroup.procs").exists():
                found[name] = CGROUP_ROOT / name / path.lstrip("/")
        if not controllers and (CGROUP_ROOT / "cgroup.controllers").exists():  # the unified (v2) hierarchy
            own = CGROUP_ROOT / path.lstrip("/")
            parent = own if own == CGROUP_ROOT else own.parent  # v2: no processes beside child cgroups
            available = (parent / "cgroup.controllers").read_text().split() if parent.is_dir() else []
            for name in ("pids", "memory"):
                if name in available and name not in found:
                    found[name] = parent
    return found


class Cgroup:
    """The run's cgroup (one per controller hierarchy), made at the first command and removed when the run closes;
    `procs`: the files a command's first process writes its PID to, so that all it starts is counted."""

    def __init__(self, limits: Limits) -> None:
        self.dirs: list[Path] = []
        name = owned_name("cgroup") + uuid.uuid4().hex[:8]
        wanted = {"pids": limits.processes, "memory": limits.memory}
        parents = {kind: parent for kind, parent in controller_dirs().items() if wanted[kind]}
        try:
            for kind, parent in parents.items():
                folder = parent / name
                if folder not in self.dirs:
                    folder.mkdir()
                    self.dirs.append(folder)
                    enable(parent, [k for k, p in parents.items() if p == parent])
                set_limit(folder, kind, wanted[kind] or 0)
        except OSError:
            self.close()
            raise
        self.kinds = set(parents)

    @property
    def procs(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.dirs]

    def close(self) -> None:
        for folder in self.dirs:
            remove_cgroup(folder)
        self.dirs = []


def enable(parent: Path, kinds: list[str]) -> None:
    """v2: the controllers enabled for the parent's children (v1 has them everywhere)."""
    control = parent / "cgroup.subtree_control"
    if control.exists():
        missing = [kind for kind in kinds if kind not in control.read_text().split()]
        if missing:
            control.write_text(" ".join(f"+{kind}" for kind in missing))


def set_limit(folder: Path, kind: str, value: int) -> None:
    if kind == "pids":
        (folder / "pids.max").write_text(str(value))
        return
    for name in ("memory.max", "memory.limit_in_bytes"):  # v2, v1
        if (folder / name).exists():
            (folder / name).write_text(str(value))
    with contextlib.suppress(OSError):  # swap counted too, where it is accounted
        for name, swap in (("memory.swap.max", "0"), ("memory.memsw.limit_in_bytes", str(value))):
            if (folder / name).exists():
                (folder / name).write_text(swap)


def remove_cgroup(folder: Path) -> None:
    """Kills what is left in it, then removes it (a cgroup goes once it is empty)."""
    for _ in range(50):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            with contextlib.suppress(OSError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.02)


@cache
def cgroups_usable() -> bool:
    """Whether a cgroup of ours can be made and joined here (root and a writable cgroup file system); the cgroups
    that killed runs left are removed on the way."""
    if os.geteuid() != 0:
        return False
    for parent in set(controller_dirs().values()):
        with contextlib.suppress(OSError):
            for entry in parent.iterdir():
                if entry.is_dir() and owner_gone(entry.name):
                    remove_cgroup(entry)
    try:
        Cgroup(Limits(processes=1 << 20, memory=1 << 40)).close()
    except OSError:
        return False
    return bool(controller_dirs())


def warn_unenforced(what: str) -> None:
    warn_once(log, ("unenforced", what), f"environment.limits.{what} cannot be enforced here: {UNENFORCED[what]}")


UNENFORCED = {
    "processes": "llm-ide runs as root without a writable cgroup file system, and the kernel exempts root from "
    "RLIMIT_NPROC (a command's processes are still ended with it)",
}
