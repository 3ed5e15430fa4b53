"""How a local command is started and ended: `start_with_parent` spawns it (dying with llm-ide, in the run's
cgroup), from a `Spawner`'s thread when sandboxed (each command in a new, empty session keyring, which it inherits:
neither the keys in llm-ide's, a Kerberos ticket or a token a tool keeps in the kernel's keyring, nor those another
command added, another run's in the Python API's or Studio's process, are its to read), a `StartMarker` tells a
command that started from one whose sandbox never did, `kill_group` ends it.

Every process a local run starts ends with it. In a PID namespace the kernel kills every process left in it once
its init exits: bubblewrap gives each command its own (they end with the command); without bwrap the run holds one of
its own, or adopts the commands' orphans (holding.py): those carrying the environment's token are killed when the
run ends (holding.kill_adopted).

What a run killed outright (SIGKILL) may leave — its command's processes, its temp folders — is recorded in the run's
output folder (`<run id>.leftovers.json`) and reaped by the next start of the same run (scratch.py)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import mmap
import os
import platform
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

from llm_ide.errors import EnvironmentFailure
from llm_ide.fileio import atomic_write, removed_if_can

TOKEN = "LLM_IDE_RUN_TOKEN"  # in every command's environment: which run a process belongs to
PR_SET_PDEATHSIG = 1
# after the death signal is set: a command whose parent (llm-ide) died before that does not start; then it joins the
# run's cgroup (the N files after the parent's PID), so that all it starts is counted there
JOIN = 'n=$2; shift 2; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
GUARD = ["bash", "-c", '[ "$PPID" = "$1" ] || exit 137; ' + JOIN, "llm-ide-guard"]
# `setpriv --pdeathsig` sets the death signal and execs the command: unlike a preexec_fn it keeps subprocess's fast
# vfork path (about 10 ms less per command) and is safe with threads.
SETPRIV = shutil.which("setpriv")
LIBC = ctypes.CDLL(None, use_errno=True)
# keyctl's system call, by machine and pointer size (a 32-bit process on a 64-bit kernel makes the 32-bit ABI's calls:
# 219 is mincore there; x86_64's is i386's or x32's, unknown), and its operation that gives a new session keyring
KEYCTL = {("x86_64", 8): 250, ("aarch64", 8): 219, ("riscv64", 8): 219, ("s390x", 8): 280, ("i686", 4): 288}
KEYCTL |= {("armv7l", 4): 311, ("aarch64", 4): 311}
JOIN_SESSION_KEYRING = 1
Popen = subprocess.Popen[bytes]


def die_with_parent(parent: int, cgroup: tuple[str, ...] = ()) -> None:
    """Runs in the child before exec when setpriv is missing: a command must not outlive an agent that was killed
    (even with SIGKILL). The death signal reaches the shell (or the program it execs), not its own children; a parent
    already gone when it is set would never send it: then the command does not start. Then it joins `cgroup`."""
    with contextlib.suppress(AttributeError):
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(137)
    try:
        for procs in cgroup:
            Path(procs).write_text(str(os.getpid()))
    except OSError:
        os._exit(125)


Starter = Callable[[Callable[[], subprocess.Popen[bytes]]], subprocess.Popen[bytes]]  # e.g. Spawner.start
Launch = tuple[list[str], Starter | None]  # a command's argv and what starts it (None: the calling thread)


class Spawner:
    """A thread that runs `prepare` on itself, then starts the processes it is given, each in a new, empty session
    keyring, for the whole life of the process (a child's death signal fires when the thread that started it ends)."""

    def __init__(self, name: str, prepare: Callable[[], None] = lambda: None) -> None:
        self.calls: queue.SimpleQueue[tuple[Callable[[], Popen], Future[Popen]]] = queue.SimpleQueue()
        ready: Future[None] = Future()
        threading.Thread(target=self._serve, args=(prepare, ready), name=name, daemon=True).start()
        ready.result()

    def _serve(self, prepare: Callable[[], None], ready: Future[None]) -> None:
        try:
            prepare()
        except BaseException as error:  # noqa: BLE001 (told to the caller)
            ready.set_exception(error)
            return
        ready.set_result(None)
        while True:
            start, started = self.calls.get()
            try:
                own_session_keyring()  # a new one for each command
                started.set_result(start())
            except BaseException as error:  # noqa: BLE001 (told to the caller)
                started.set_exception(error)

    def start(self, start: Callable[[], Popen]) -> Popen:
        """`start()` run on the thread; interrupted meanwhile, what it started ends before the interruption goes on."""
        started: Future[Popen] = Future()
        self.calls.put((start, started))
        try:
            return started.result()
        except BaseException:
            with contextlib.suppress(Exception):
                process = started.result()
                kill_group(process.pid)
                process.wait()
            raise


@cache
def keyring_spawner(pid: int) -> Spawner:
    """This process's thread that starts the commands (per process id: a forked child has none of its parent's)."""
    return Spawner("llm-ide-commands")


def own_session_keyring() -> None:
    """The calling thread, and all it starts from now on, given a new, empty session keyring (where the kernel lets no
    process use keyctl, a seccomp filter's doing, the commands cannot either)."""
    if (number := KEYCTL.get((platform.machine(), ctypes.sizeof(ctypes.c_void_p)))) is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, JOIN_SESSION_KEYRING, None) < 0:
        error = ctypes.get_errno()
        if error not in (errno.ENOSYS, errno.EPERM, errno.EACCES):
            raise EnvironmentFailure(f"no session keyring of their own for the commands: {os.strerror(error)}")


def start_with_parent(
    argv: list[str], cgroup: list[str] | None = None, by: Starter | None = None, **options: Any
) -> subprocess.Popen[bytes]:
    """`argv` started in a session of its own, killed when this process dies (`setpriv --pdeathsig`, then a check
    that this process was still its parent then; die_with_parent when setpriv is missing), in the cgroup whose
    `cgroup.procs` files `cgroup` lists; `by` the starter given (the process inherits what its thread holds)."""
    cgroup = cgroup or []
    if SETPRIV:
        argv = [SETPRIV, "--pdeathsig", "KILL", *GUARD, str(os.getpid()), str(len(cgroup)), *cgroup, *argv]
    else:
        options["preexec_fn"] = partial(die_with_parent, os.getpid(), tuple(cgroup))
    start = partial(subprocess.Popen, argv, **options)
    return start() if by is None else by(start)


class StartMarker(contextlib.AbstractContextManager["StartMarker"]):
    """A pipe the command's shell writes one byte to before anything else (and closes: nothing it starts holds it).
    Without that byte the command never started: the sandbox's set-up failed (a socket it was to mask vanished
    meanwhile), and running it again repeats nothing. Used with `with`: its ends are closed whatever happens."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        self.open = {self.read, self.write}
        os.set_inheritable(self.write, True)

    def __exit__(self, *exc: object) -> None:
        while self.open:
            os.close(self.open.pop())

    def prefix(self) -> str:
        return f"printf . >&{self.write}; exec {self.write}>&-; "

    def passed(self) -> tuple[int, ...]:
        return (self.write,)

    def spawned(self) -> None:
        self.open.discard(self.write)
        os.close(self.write)

    def started(self) -> bool:
        os.set_blocking(self.read, False)
        try:
            return os.read(self.read, 1) == b"."
        except BlockingIOError:  # nothing yet, and a process of the command still holds it open: it started
            return True


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


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
        removed_if_can(self.path)  # (its folder lost, replaced or read-only: the record is a convenience)
