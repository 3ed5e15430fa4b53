"""A thread of llm-ide that starts the sandboxed commands while abstract sockets listen on the host, holding Landlock's
scope of them (Linux 6.12 and later): no abstract socket made outside a command answers it. A Landlock domain is a
thread's, inherited by what it starts: the agent's other threads keep theirs (environments/sockets.py decides when)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import cache

from llm_ide.environments.processes import kill_group
from llm_ide.errors import EnvironmentFailure

CREATE_RULESET, RESTRICT_SELF, NO_NEW_PRIVS = 444, 446, 38  # Landlock's system calls; prctl's option
Popen = subprocess.Popen[bytes]


class Spawner:
    """A thread of this process that first runs `prepare` on itself, then starts the processes it is given for the
    whole life of the process (a death signal set in a child fires when the thread that started it ends)."""

    def __init__(self, prepare: Callable[[], None], name: str) -> None:
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
def scoped_spawner(pid: int) -> Spawner:
    """This process's scoped thread (per process id: a forked child has none of its parent's threads)."""
    return Spawner(scope_abstract_sockets, "llm-ide-scoped")


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
