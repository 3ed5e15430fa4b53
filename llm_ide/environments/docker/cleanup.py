"""Labels that mark our containers, what keeps one alive while its process lives (PID 1 and the watchdog), the registry
of the live ones, their removal on every exit path, and sweeping."""

from __future__ import annotations

import atexit
import contextlib
import getpass
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import docker
import docker.errors

from llm_ide.environments.base import EnvironmentFailure
from llm_ide.environments.scratch import owner_tag, tag_gone
from llm_ide.errors import install_signal_policy

# PID 1 of the container: it reaps orphans and outlives whatever the agent does inside (`kill -9 -1` spares it, a
# namespace's init ignores the signals it has no handler for, and it ignores the usual ones), so the container and
# the run's edits survive an agent that kills everything it sees; only SIGUSR2 (the watchdog's) ends it.
KEEPER = [
    "sh",
    "-c",
    "trap '' HUP INT QUIT TERM USR1 PIPE ALRM; trap 'exit 0' USR2; while :; do sleep 2147483647 & wait $!; done",
    "llm-ide-init",
]
# The watchdog: a second exec whose stdin stays open as long as the client holds it. When the client goes away, even
# by SIGKILL, the engine closes that stdin, the read returns and the container stops; docker then removes it. A new
# one starts after every lost session (the agent's commands may have killed it).
WATCHDOG = ["sh", "-c", "read -r _; kill -USR2 1", "llm-ide-watchdog"]


def start_watchdog(api: Any, container_id: str) -> Any:
    """The watchdog of a container started with KEEPER: the stream to hold while the container should live."""
    return api.exec_start(api.exec_create(container_id, WATCHDOG, stdin=True)["Id"], socket=True)


def watchdog_alive(watchdog: Any) -> bool:
    """Whether a watchdog's stream is still open (it shows nothing until it ends)."""
    sock = getattr(watchdog, "_sock", watchdog)
    try:
        return not select.select([sock], [], [], 0)[0]
    except (OSError, ValueError):
        return False


class Closable(Protocol):
    def close(self) -> None: ...


ENGINE_ERRORS = (docker.errors.DockerException, OSError)  # the engine's answer, or its connection lost (requests')
LABEL = "llm-ide"
RUN_ID_LABEL = "llm-ide.run-id"
PID_LABEL = "llm-ide.pid"
HOST_LABEL = "llm-ide.host"
USER_LABEL = "llm-ide.user"
OWNER_LABEL = "llm-ide.owner"  # the making process as `<PID namespace>.<PID>.<start time>`: a reused PID told apart


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def connect(timeout: float = 60) -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except docker.errors.DockerException as error:
        raise EnvironmentFailure(
            f"the Docker engine is not reachable ({one_line(error)}); start it (e.g. scripts/start_docker.sh)"
        ) from None
    return client


_LIVE: dict[str, Closable] = {}  # the containers this process holds, removed at exit: a process-wide resource
_OWNER_PID = os.getpid()
_installed = False


def close_all() -> None:
    """Removes every container this process still holds (atexit, SIGTERM/SIGHUP)."""
    if os.getpid() != _OWNER_PID:
        return
    for environment in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            environment.close()


def install_cleanup_handlers() -> None:
    """atexit removes live containers; SIGTERM/SIGHUP follow the signal policy (llm_ide.errors.Terminated)."""
    global _installed, _OWNER_PID
    if _installed and os.getpid() == _OWNER_PID:
        return
    _installed, _OWNER_PID = True, os.getpid()
    atexit.register(close_all)
    install_signal_policy()


class Creation:
    """A container's create request in a thread of its own: a Ctrl-C stops our waiting for it, not the request, whose
    answer (the engine may make the container after we gave up) close() can still wait for and remove."""

    def __init__(self, create: Callable[[], Any]) -> None:
        self._create, self._done, self._made, self._error = create, threading.Event(), None, None
        threading.Thread(target=self._run, name="llm-ide-create", daemon=True).start()

    def _run(self) -> None:
        try:
            self._made = self._create()
        except BaseException as error:  # (told to the waiting caller)
            self._error = error
        finally:
            self._done.set()

    def result(self) -> Any:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._made

    def made(self, timeout: float) -> str | None:
        """The id of the container made, once the engine answers within `timeout` (None: none made, or no answer)."""
        self._done.wait(timeout)
        return getattr(self._made, "id", None)


def remove_container(client: docker.DockerClient, container_id: str, wait: float = 30.0) -> bool:
    """Force-removes a container; when docker is already removing it (auto_remove), waits until it is gone.
    Returns False when it was already gone."""
    try:
        client.api.remove_container(container_id, force=True)
        return True
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: removal already in progress
            raise
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return True
        time.sleep(0.05)
    raise EnvironmentFailure(f"container {container_id[:12]} is still being removed after {wait:.0f} s")


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no $USER: the uid still tells users apart
        return str(os.getuid())


def owner_labels(run_id: str) -> dict[str, str]:
    return {
        LABEL: "1",
        RUN_ID_LABEL: run_id,
        PID_LABEL: str(os.getpid()),
        HOST_LABEL: socket.gethostname(),
        USER_LABEL: current_user(),
        OWNER_LABEL: owner_tag(),
    }


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that made a container still runs (on this host; other hosts count as alive, as do other
    PID namespaces' processes: a container made before the owner label by its PID alone)."""
    if labels.get(HOST_LABEL) != socket.gethostname():
        return labels.get(HOST_LABEL) is not None
    if OWNER_LABEL in labels:
        return not tag_gone(labels[OWNER_LABEL])
    try:
        os.kill(int(labels.get(PID_LABEL, "")), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LeftContainer:
    name: str
    run_id: str
    status: str

    def __str__(self) -> str:
        return f"{self.name} (run {self.run_id}, {self.status})"


@dataclass
class Sweep:
    removed: list[LeftContainer]
    kept_live: list[LeftContainer]


def cleanup_containers(
    client: docker.DockerClient | None = None,
    *,
    include_live: bool = False,
    run_id: str | None = None,
    dry_run: bool = False,
    labelled: tuple[str, ...] = (),
) -> Sweep:
    """Removes the llm-ide containers that this user created on this host and whose run is over (its process is
    gone), or all of this user's with `include_live`; only those of `run_id`, and with the `labelled` labels, when
    given. Another user's containers, or another host's on a shared engine, are never touched. `dry_run`: only says
    what would go."""
    client = client or connect()
    owner = [LABEL, f"{USER_LABEL}={current_user()}", f"{HOST_LABEL}={socket.gethostname()}", *labelled]
    filters: dict[str, Any] = {"label": owner + ([f"{RUN_ID_LABEL}={run_id}"] if run_id else [])}
    sweep = Sweep([], [])
    for container in client.containers.list(all=True, ignore_removed=True, filters=filters):
        left = LeftContainer(container.name, container.labels.get(RUN_ID_LABEL, "?"), container.status)
        if not include_live and owner_alive(container.labels):
            sweep.kept_live.append(left)
        elif dry_run or remove_container(client, container.id):
            sweep.removed.append(left)
    return sweep


def sweep_left(client: docker.DockerClient, run_id: str) -> str:
    """What killed runs left, removed as a run starts: its own containers whose process is gone (a run resumed), and
    every run's whose owner label says its process is gone (one killed as the engine made it, or before its watchdog
    started: none removes it). A container without that label (an older llm-ide's) is left to `llm-ide cleanup`: its
    PID alone may be another PID namespace's process. A line saying what went ('' when nothing did)."""
    removed = (
        cleanup_containers(client, run_id=run_id).removed + cleanup_containers(client, labelled=(OWNER_LABEL,)).removed
    )
    names = list(dict.fromkeys(str(left) for left in removed))
    if not names:
        return ""
    return f"removed {len(names)} container{'s' * (len(names) != 1)} that killed runs left: {', '.join(names)}"
