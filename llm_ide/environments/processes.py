"""Every process a local run starts ends with it. In a PID namespace the kernel kills every process left in it once
its init exits: bubblewrap gives each command its own (they end with the command); without bwrap a namespace made
with `unshare` is held for the whole run (they end with the run). Without either, this process becomes a child
subreaper (prctl PR_SET_CHILD_SUBREAPER): the commands' orphans (setsid, double forks) are re-parented to it instead
of to PID 1, and those carrying the environment's token are killed when the run ends.

What a run killed outright (SIGKILL) may leave — its command's processes, its temp folders — is recorded in the run's
output folder (`<run id>.leftovers.json`) and reaped by the next start of the same run (scratch.py)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import mmap
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

from llm_ide.errors import warn_once
from llm_ide.fileio import atomic_write

log = logging.getLogger("llm_ide.environment")

TOKEN = "LLM_IDE_RUN_TOKEN"  # in every command's environment: which run a process belongs to
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
# the namespace's init: it reaps (orphans are re-parented to it; bash reaps them while it waits for its reader) and
# ends, taking every process left in the namespace with it, when its stdin (a pipe only llm-ide holds open) ends: when
# the run closes it, or when llm-ide dies however it dies, even before any death signal was set up. A reader a command
# kills (`kill -9 -1` in the namespace) is started again.
WATCH = "exec 3<&0 0</dev/null; while :; do read -r _ <&3 & wait $!; [ $? = 1 ] && exit 0; done"
HOLD = ["bash", "-c", WATCH, "llm-ide-init"]
# after the death signal is set: a command whose parent (llm-ide) died before that does not start; then it joins the
# run's cgroup (the N files after the parent's PID), so that all it starts is counted there
JOIN = 'n=$2; shift 2; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
GUARD = ["bash", "-c", '[ "$PPID" = "$1" ] || exit 137; ' + JOIN, "llm-ide-guard"]
MAX_SWEEPS = 100  # rounds of killing adopted processes (each round kills the parents of the next one's orphans)
# `setpriv --pdeathsig` sets the death signal and execs the command: unlike a preexec_fn it keeps subprocess's fast
# vfork path (about 10 ms less per command) and is safe with threads.
SETPRIV = shutil.which("setpriv")
_LIBC = ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent: int, cgroup: tuple[str, ...] = ()) -> None:
    """Runs in the child before exec when setpriv is missing: a command must not outlive an agent that was killed
    (even with SIGKILL). The death signal reaches the shell (or the program it execs), not its own children; a parent
    already gone when it is set would never send it: then the command does not start. Then it joins `cgroup`."""
    with contextlib.suppress(AttributeError):
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(137)
    try:
        for procs in cgroup:
            Path(procs).write_text(str(os.getpid()))
    except OSError:
        os._exit(125)


def start_with_parent(argv: list[str], cgroup: list[str] | None = None, **options: Any) -> subprocess.Popen[bytes]:
    """`argv` started in a session of its own, killed when this process dies (`setpriv --pdeathsig`, then a check
    that this process was still its parent then; die_with_parent when setpriv is missing), in the cgroup whose
    `cgroup.procs` files `cgroup` lists."""
    cgroup = cgroup or []
    if SETPRIV:
        guard = [*GUARD, str(os.getpid()), str(len(cgroup)), *cgroup]
        return subprocess.Popen([SETPRIV, "--pdeathsig", "KILL", *guard, *argv], **options)
    return subprocess.Popen(argv, preexec_fn=partial(die_with_parent, os.getpid(), tuple(cgroup)), **options)


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
        return _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
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


def carries(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{TOKEN}={token}".encode() in environ.split(b"\0")


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


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused PID apart), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


@dataclass
class Leftovers:
    """The record of what one local environment holds on the host, kept up to date in the run's output folder while
    it runs and removed when it closes: its token, its owner, its temp folders, the command under way."""

    path: Path | None
    token: str
    folders: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.owner = (os.getpid(), start_time(os.getpid()))
        self._synced: list[str] | None = None  # the folders the record on disk was synced with
        self._open: tuple[int, int] | None = None  # (descriptor, size) of the record as last synced
        self.save(None)

    def save(self, command: dict[str, object] | None) -> None:
        """Written whole or not at all: synced (a new file renamed over it) when its temp folders changed; the
        command under way (twice a command) in place, in one write within its first page, padded to the size it had
        (a killed process's write is whole and the page cache outlives it; no machine crash leaves the processes it
        names)."""
        if self.path is None:
            return
        record = {"token": self.token, "owner": list(self.owner), "folders": self.folders, "command": command}
        text = json.dumps(record) + "\n"  # (ASCII: as many bytes as characters)
        with contextlib.suppress(OSError):  # a full disk or a lost folder: the record is a convenience
            if self._open and self.folders == self._synced and max(len(text), self._open[1]) <= mmap.PAGESIZE:
                os.pwrite(self._open[0], text.ljust(self._open[1]).encode(), 0)
                self._open = (self._open[0], max(len(text), self._open[1]))
                return
            self.close_record()
            atomic_write(self.path, text, sync=self.folders != self._synced)
            self._synced, self._open = list(self.folders), (os.open(self.path, os.O_WRONLY | os.O_CLOEXEC), len(text))

    def close_record(self) -> None:
        if self._open:
            os.close(self._open[0])
            self._open = None

    def add_folder(self, folder: str) -> None:
        self.folders.append(folder)
        self.save(None)

    def command_started(self, pid: int) -> None:
        namespace = ""
        with contextlib.suppress(OSError):
            namespace = os.readlink(f"/proc/{pid}/ns/pid")
        self.save({"pid": pid, "start": start_time(pid), "pgid": pid, "pid_namespace": namespace})

    def command_ended(self) -> None:
        self.save(None)

    def close(self) -> None:
        self.close_record()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
