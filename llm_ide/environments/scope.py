"""The threads of llm-ide that start the sandboxed commands. Each joins a new, empty session keyring before every
command, which it inherits: neither the keys in llm-ide's (a Kerberos ticket, a token a tool keeps in the kernel's
keyring) nor those another command added (another run's, in the Python API's or Studio's process) are its to read.
While abstract sockets listen on the host, another one also holds Landlock's scope of them (Linux 6.12 and later):
no abstract socket made outside a command answers it. Keyrings and Landlock domains are a thread's, inherited by what
it starts: the agent's other threads keep theirs (environments/sockets.py decides when)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import queue
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import cache

from llm_ide.environments.processes import kill_group
from llm_ide.errors import EnvironmentFailure

CREATE_RULESET, RESTRICT_SELF, NO_NEW_PRIVS = 444, 446, 38  # Landlock's system calls; prctl's option
# keyctl's system call, by machine and pointer size (a 32-bit process on a 64-bit kernel makes the 32-bit ABI's calls:
# 219 is mincore there; x86_64's is i386's or x32's, unknown), and its operation that gives a new session keyring
KEYCTL = {("x86_64", 8): 250, ("aarch64", 8): 219, ("riscv64", 8): 219, ("s390x", 8): 280, ("i686", 4): 288}
KEYCTL |= {("armv7l", 4): 311, ("aarch64", 4): 311}
JOIN_SESSION_KEYRING = 1
Popen = subprocess.Popen[bytes]


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


@cache
def scoped_spawner(pid: int) -> Spawner:
    """This process's thread that starts the commands in the scope of abstract sockets."""
    return Spawner("llm-ide-scoped", scope_abstract_sockets)


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


def scope_abstract_sockets() -> None:
    """The calling thread, and all it starts from now on, kept from abstract sockets made outside them (ruleset attr:
    handled_access_fs, handled_access_net, scoped)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint64 * 3)(0, 0, 1)
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    try:
        if ruleset < 0 or libc.prctl(NO_NEW_PRIVS, 1, 0, 0, 0) or libc.syscall(RESTRICT_SELF, ruleset, 0):
            error = ctypes.get_errno()
            raise EnvironmentFailure(f"Landlock cannot scope the host's abstract sockets here: {os.strerror(error)}")
    finally:
        if ruleset >= 0:
            os.close(ruleset)
