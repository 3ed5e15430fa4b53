"""The run's cgroup (environments/limits.py says when there is one): made with the local environment in each hierarchy
that has the pids or the memory controller, its limits set, joined by every command, removed (what is left in it killed)
when the run closes; and whether one can be made here at all (the cgroups killed runs left removed on the way)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from functools import cache
from pathlib import Path

from llm_ide.environments.limits import Limits
from llm_ide.environments.scratch import owned_name, owner_gone

CGROUP_ROOT = Path("/sys/fs/cgroup")


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
    """The run's cgroup (one per controller hierarchy), made with the local environment and removed when the run
    closes; `procs`: the files a command's first process writes its PID to, so that all it starts is counted."""

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
        except BaseException:  # (an interruption part-way too: what was made goes)
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
