"""How a local run holds its commands' processes without bubblewrap: in a PID namespace of its own, made with
`unshare` and held for the whole run (they end with the run); without one, this process becomes a child subreaper
(prctl PR_SET_CHILD_SUBREAPER), and the commands' orphans it adopts are killed when the run ends
(`kill_adopted`)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
from functools import cache
from pathlib import Path

from llm_ide.environments.processes import LIBC, start_with_parent
from llm_ide.environments.scratch import carries
from llm_ide.errors import warn_once

log = logging.getLogger("llm_ide.environment")

PR_SET_CHILD_SUBREAPER = 36
MAX_SWEEPS = 100  # rounds of killing adopted processes (each round kills the parents of the next one's orphans)
# the namespace's init: it reaps (orphans are re-parented to it; bash reaps them while it waits for its reader) and
# ends, taking every process left in the namespace with it, when its stdin (a pipe only llm-ide holds open) ends: when
# the run closes it, or when llm-ide dies however it dies, even before any death signal was set up. A reader a command
# kills (`kill -9 -1` in the namespace) is started again.
WATCH = "exec 3<&0 0</dev/null; while :; do read -r _ <&3 & wait $!; [ $? = 1 ] && exit 0; done"
HOLD = ["bash", "-c", WATCH, "llm-ide-init"]


class RunNamespace:
    """A PID namespace held open for a run (`unshare`, with its own /proc): its init lives until `close`, or until
    this process dies however it dies (its stdin, a pipe only this process holds, closes; the death signal of unshare,
    whose --kill-child kills the init, too), and the kernel then kills every process left in it. Commands enter it
    with nsenter; processes they leave behind (setsid, double forks) stay until the run ends, as on the host."""

    def __init__(self, tools: tuple[tuple[str, ...], tuple[str, ...]], env: dict[str, str]) -> None:
        unshare, self.nsenter = tools
        self.holder = start_with_parent(
            [*unshare, *HOLD],
            env=env,
            stdin=subprocess.PIPE,  # the init's lifeline: never written, closed by `close` or by this process's end
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.init = self._find_init()

    def _find_init(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{self.holder.pid}/task").iterdir():
                    if children := (task / "children").read_text().split():
                        return int(children[0])
            if self.holder.poll() is not None:
                break
            time.sleep(0.002)
        self.close()
        raise OSError("the run's PID namespace did not start")

    def argv(self, command: str, cwd: Path) -> list[str]:
        return [*self.nsenter, "--target", str(self.init), f"--wd={cwd}", "bash", "-c", command]

    @property
    def alive(self) -> bool:
        return self.holder.poll() is None

    def close(self) -> None:
        """The init ends (its stdin closed; killed from outside too, which a namespace's init cannot ignore), then
        its holder."""
        if self.holder.stdin is not None:
            with contextlib.suppress(OSError):
                self.holder.stdin.close()
        if self.alive and getattr(self, "init", None):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.init, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.holder.kill()
        self.holder.wait()


@cache
def namespace_tools() -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(unshare, nsenter) argv prefixes that make a run's PID namespace and enter it, when they work here (root, or
    user namespaces allowed); with the namespace's own /proc where that works too."""
    unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
    if unshare is None or nsenter is None:
        return None
    user = () if os.geteuid() == 0 else ("--user", "--map-current-user")
    enter_user = () if os.geteuid() == 0 else ("--user", "--preserve-credentials")
    for proc in (("--mount-proc", "--propagation", "slave"), ()):
        tools = (
            (unshare, *user, "--pid", "--fork", "--kill-child", *proc),
            (nsenter, *enter_user, "--pid", *(("--mount",) if proc else ())),
        )
        try:
            namespace = RunNamespace(tools, dict(os.environ))
        except OSError:
            continue
        try:
            done = subprocess.run(namespace.argv("true", Path("/")), capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        finally:
            namespace.close()
        if done.returncode == 0:
            return tools
    return None


@cache
def become_subreaper() -> bool:
    """This process adopts its descendants' orphans (once; False where prctl is not there)."""
    try:
        return LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except AttributeError:
        return False


def containment(bwrap: str | None) -> str:
    """How a local command's processes are held: bwrap, unshare or subreaper (said once when it is the last)."""
    if bwrap:
        return "bwrap"
    if namespace_tools() is not None:
        return "unshare"
    if become_subreaper():
        warn_once(log, ("subreaper",), SUBREAPER_ONLY)
        return "subreaper"
    return "none"


SUBREAPER_ONLY = (
    "no PID namespace available (bwrap and unshare do not work here): a command's background processes are "
    "adopted and killed when it ends, except those that clear their environment"
)


def adopted_children() -> list[int]:
    """The children of every thread of this process."""
    pids = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(pid) for pid in (task / "children").read_text().split()]
    return pids


def in_groups(pid: int, groups: set[int]) -> bool:
    try:
        return os.getpgid(pid) in groups
    except ProcessLookupError:
        return False


def kill_adopted(token: str, groups: set[int]) -> int:
    """Kills (and reaps) this process's children that carry `token` or belong to one of `groups` (a command's process
    group: one that cleared its environment), round after round as their own orphans come back to it; the number
    killed."""
    killed = 0
    for _ in range(MAX_SWEEPS):
        found = [pid for pid in adopted_children() if carries(pid, token) or in_groups(pid, groups)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in found:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        killed += len(found)
    return killed
