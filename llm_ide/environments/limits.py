"""What a local command may use (`environment.limits`): processes, file size, memory and CPU time. A command that
goes past one fails (a fork bomb's forks, a disk filler's write, an allocation, a busy loop) as a command fails, and
the run goes on.

Where a cgroup can be made (root, a writable cgroup file system: v1 or v2), the run's commands join one of the run's own
(environments/cgroups.py) before they start: its `pids.max` caps their processes and threads together, and its memory
limit their memory together (the kernel ends the greediest when they pass it). Elsewhere each process of a command gets
rlimits instead: RLIMIT_NPROC (not for root, whom the kernel exempts) and RLIMIT_DATA. File size (RLIMIT_FSIZE) and CPU
time (RLIMIT_CPU, seconds of each process) are rlimits everywhere. Inside bubblewrap no command can raise them again (it
holds no capability); without it, a command as root could."""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from typing import Any

from llm_ide.errors import warn_once

log = logging.getLogger("llm_ide.environment")

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


def warn_unenforced(what: str) -> None:
    warn_once(log, ("unenforced", what), f"environment.limits.{what} cannot be enforced here: {UNENFORCED[what]}")


UNENFORCED = {
    "processes": "llm-ide runs as root without a writable cgroup file system, and the kernel exempts root from "
    "RLIMIT_NPROC (a command's processes are still ended with it)",
}
