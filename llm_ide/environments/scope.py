"""The Landlock scope of abstract sockets (Linux 6.12 and later): while abstract sockets listen on the host and the
commands share its network, they are started from a thread of their own that holds the scope (a processes.Spawner),
so that no abstract socket made outside a command answers it. A Landlock domain is a thread's, inherited by what it
starts: the agent's other threads keep theirs (environments/sandbox.py finds the sockets; LocalEnvironment decides
when)."""

from __future__ import annotations

import ctypes
import logging
import os
from functools import cache

from llm_ide.environments.processes import Spawner, Starter
from llm_ide.errors import EnvironmentFailure, warn_once

log = logging.getLogger("llm_ide.environment")

CREATE_RULESET, RESTRICT_SELF, NO_NEW_PRIVS = 444, 446, 38  # Landlock's system calls; prctl's option
LANDLOCK_ABI_SCOPES = 6  # the Landlock ABI whose `scoped` field has LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET


@cache
def landlock_abi() -> int:
    """The Landlock ABI of this kernel (0: none)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return max(0, int(libc.syscall(444, None, 0, 1)))  # landlock_create_ruleset(NULL, 0, VERSION)
    except (OSError, AttributeError):
        return 0


def abstract_guard() -> Starter | None:
    """What starts a command so that no abstract socket made outside it answers it: our thread holding Landlock's scope
    (environments/scope.py); None (said once) where Landlock cannot scope them."""
    if landlock_abi() < LANDLOCK_ABI_SCOPES:
        warn_abstract()
        return None
    return scoped_spawner(os.getpid()).start


def warn_abstract() -> None:
    message = (
        "abstract Unix sockets (X11's, D-Bus's) listen on this host and Landlock cannot scope them here (Linux 6.12 "
        "or later): the commands can reach them; environment.network: none cuts them off"
    )
    warn_once(log, ("abstract sockets",), message)


@cache
def scoped_spawner(pid: int) -> Spawner:
    """This process's thread that starts the commands in the scope of abstract sockets."""
    return Spawner("llm-ide-scoped", scope_abstract_sockets)


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
