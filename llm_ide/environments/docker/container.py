"""A run's container: created from an image, the repository copied in, commands through one shell session."""

from __future__ import annotations

import contextlib
import logging
import posixpath
import re
import shlex
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from llm_ide.environments.base import Capabilities, CommandResult, EnvironmentFailure, FileSnapshot, OutsideRepository
from llm_ide.environments.docker.archive import read_tar, single_file_tar, tar_directory
from llm_ide.environments.docker.cleanup import (
    _LIVE,
    ENGINE_ERRORS,
    KEEPER,
    Creation,
    connect,
    install_cleanup_handlers,
    one_line,
    owner_labels,
    remove_container,
    start_watchdog,
    sweep_left,
    watchdog_alive,
)
from llm_ide.environments.docker.hardening import ROOT, Limits, hand_over, refuse_unwritable
from llm_ide.environments.docker.images import DEFAULT_NETWORK, ensure_image, network_mode
from llm_ide.environments.docker.redirects import removal
from llm_ide.environments.docker.session import Collector, Session, Sink
from llm_ide.environments.docker.shell import GONE, OUTSIDE, OWN_GIT, in_workdir, inside_check
from llm_ide.environments.output import OnOutput, OutputCap, append_note, default_messages, render
from llm_ide.environments.tools_cache import docker_tools_cache
from llm_ide.errors import RepositoryLost
from llm_ide.kills import interrupts_held
from llm_ide.secrets import redact
from llm_ide.settings import EnvironmentSettings

log = logging.getLogger("llm_ide.environment")
PRIVATE_ROOT = "/var/lib/llm-ide"
LINK_DIR = "/usr/local/bin"  # where the tools link their commands (tools/plan.py): the commands' user's too
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
KILL_GRACE = 5.0  # seconds past a command's timeout before the client kills its process group itself
TOOLS_ROOT = "/tools"
TOOLS_CACHE_MOUNT = "/opt/llm-ide-tools"


class DockerEnvironment:
    """One container per run from `image` (else `environment.image`); `repo`, when given, is copied (`.git` included)
    into the container's workdir, else the image holds it there. Commands go through one shell session attached with
    the exec API."""

    kind = "docker"
    capabilities = Capabilities(ephemeral=True, image=True, tools_mount=False, system_path=True)

    def __init__(
        self,
        image: str,
        *,
        run_id: str,
        workdir: str = "/testbed",
        env: dict[str, str] | None = None,
        conda_env: str | None = None,
        network: str | None = DEFAULT_NETWORK,
        limits: Limits | None = None,
        command_timeout: float = 120,
        output_max_bytes: int = 1_000_000,
        pull: str = "missing",
        messages: dict[str, str] | None = None,
        repo: Path | None = None,
        tools_cache: Path | None = None,
        secluded: list[Path] | None = None,
    ) -> None:
        self.image, self.run_id, self.workdir = image, run_id, workdir
        self.own_paths, self.notes = list[str](), list[str]()  # the repository's copy never holds the run's own
        self.tools_root = TOOLS_ROOT
        # the per-user tool cache's built trees, mounted read-only (llm_ide/tools/cache.py links tools from there)
        self.tools_cache_mount = (str(tools_cache), TOOLS_CACHE_MOUNT) if tools_cache else None
        self.conda_env = conda_env
        self.command_timeout = command_timeout
        self.output_max_bytes = output_max_bytes
        self.messages = {**default_messages(), **(messages or {})}
        self.kill_grace = KILL_GRACE
        self._lock = threading.RLock()
        self._session: Session | None = None
        self._watchdogs: list[Any] = []  # more than one only while a replaced one may still be alive
        self.container_id: str | None = None
        self._creation: Creation | None = None  # a create request not answered yet
        self.client = connect()
        if repo is not None and not Path(repo).is_dir():
            raise EnvironmentFailure(f"repository not found: {repo}")
        limits = limits or Limits.bundled()
        try:  # failed or interrupted from the container's start on: it goes there and then
            ensure_image(self.client, image, pull)
            self._start_container(env or {}, network, limits)
            self.user = limits.commands_user(self.client, image)
            folders = [TOOLS_ROOT, PRIVATE_ROOT, workdir, LINK_DIR]
            self.owner = hand_over(self.client.api, str(self.container_id), self.user, folders)
            self._session = self._open_session()
            if repo is not None:  # the run's own folder, when it is inside the repository, stays out
                self.copy_in(Path(repo).resolve(), workdir, [path.resolve() for path in secluded or []])
            else:
                refuse_unwritable(self.client.api, str(self.container_id), self.user, workdir)
            self._redirects = removal(self.run_trusted, workdir)
        except BaseException as error:
            try:
                self.close()
            finally:  # the engine failing, or its connection lost (requests' errors are OSErrors): one line
                if isinstance(error, ENGINE_ERRORS):
                    raise EnvironmentFailure(f"could not start a container from {image}: {one_line(error)}") from None
            raise

    @classmethod
    def from_config(
        cls, settings: EnvironmentSettings, *, repo: Path | None, run_id: str, image: str | None = None, **options: Any
    ) -> DockerEnvironment:
        image = image or settings.image
        if not image:
            raise EnvironmentFailure("the docker environment needs an image (--image IMAGE or environment.image)")
        same = ("workdir", "env", "conda_env", "network", "command_timeout", "pull")
        return cls(
            image,
            run_id=run_id,
            **{name: getattr(settings, name) for name in same},
            limits=Limits.of(settings),
            output_max_bytes=settings.output_max_bytes,
            messages=settings.messages.model_dump(),
            repo=repo,
            tools_cache=docker_tools_cache() if settings.tools else None,
            secluded=[options["output_dir"]] if options.get("output_dir") else [],
        )

    def _start_container(self, env: dict[str, str], network: str | None, limits: Limits) -> None:
        options = limits.create_options(self.client)
        if network:
            options["network_mode"] = network = network_mode(self.client, network)
        volumes: dict[str, dict[str, str]] = {}
        if network != "none" and CA_BUNDLE.is_file():
            volumes[str(CA_BUNDLE)] = {"bind": str(CA_BUNDLE), "mode": "ro"}
        if self.tools_cache_mount:
            volumes[self.tools_cache_mount[0]] = {"bind": TOOLS_CACHE_MOUNT, "mode": "ro"}
        if volumes:
            options["volumes"] = volumes
        name = f"llm-ide-{re.sub(r'[^a-zA-Z0-9_.-]', '-', self.run_id)[:60]}-{uuid.uuid4().hex[:8]}"
        install_cleanup_handlers()
        with contextlib.suppress(*ENGINE_ERRORS):  # what killed runs left (this one's own, a run killed at its create)
            if swept := sweep_left(self.client, self.run_id):
                self.notes.append(swept)
        self.container_id, _LIVE[name] = name, self  # (its id once known: a create interrupted by then goes by name)
        with interrupts_held():  # (a Ctrl-C as the request leaves comes once close() knows to wait for its answer)
            self._creation = Creation(
                lambda: self.client.containers.create(
                    self.image,
                    entrypoint=KEEPER,
                    command=[],
                    name=name,
                    labels=owner_labels(self.run_id),
                    environment={key: str(value) for key, value in env.items()},
                    working_dir=self.workdir,
                    auto_remove=True,
                    detach=True,
                    **options,
                )
            )
        container, self._creation = self._creation.result(), None
        self.container_id, _LIVE[container.id] = container.id, _LIVE.pop(name)
        container.start()  # (failed: closed and told by __init__)
        self._start_watchdog()

    def _start_watchdog(self) -> None:
        assert self.container_id is not None
        self._watchdogs.append(start_watchdog(self.client.api, self.container_id))

    def _renew_watchdog(self) -> None:
        """After a lost session (every process killed?) a new watchdog starts; the old one's end may reach its stream
        later, and closing a live one would end the container, so only the dead are let go."""
        for watchdog in [w for w in self._watchdogs if not watchdog_alive(w)]:
            self._watchdogs.remove(watchdog)
            with contextlib.suppress(Exception):
                watchdog.close()
        try:
            self._start_watchdog()
        except ENGINE_ERRORS as error:
            raise EnvironmentFailure(f"container {str(self.container_id)[:12]} is gone: {one_line(error)}") from None

    def _open_session(self) -> Session:
        assert self.container_id is not None
        try:
            return Session(self.client.api, self.container_id, self.conda_env, "/", self.user)
        except ENGINE_ERRORS as error:
            raise EnvironmentFailure(f"container {self.container_id[:12]} is not usable: {one_line(error)}") from None

    def _session_ready(self) -> Session:
        if self.container_id is None:
            raise EnvironmentFailure("the docker environment is closed")
        old = self._session
        if old is not None and (old.stale or not old.alive):
            self._session = None
            if old.alive:
                self._kill(old, server=True)
            old.close()
        if self._session is None:
            if old is not None or not any(watchdog_alive(w) for w in self._watchdogs):
                self._renew_watchdog()
            self._session = self._open_session()
        return self._session

    def _resolve(self, path: str | None) -> str:
        return posixpath.join(self.workdir, path) if path else self.workdir

    def run(
        self, command: str, sink: Sink, timeout: float, cwd: str | None = None, after: str = ""
    ) -> tuple[int, bool, bool]:
        """Runs `command`, streaming its output into `sink`, then `after` (silent, in the same round trip). Returns
        (returncode, timed_out, session_lost)."""
        if "\0" in command or (cwd and "\0" in cwd):
            raise ValueError("embedded null byte")  # as subprocess says; it would also break the session's framing
        with self._lock:
            session = self._session_ready()
            start = time.monotonic()  # before the send: the container's own timer starts after it, never before
            try:
                session.send(repr(float(timeout)), self._resolve(cwd), command, after)
            except OSError:  # the session went away between commands: nothing ran, so a fresh one may run it
                session.stale = True
                session, start = self._session_ready(), time.monotonic()
                session.send(repr(float(timeout)), self._resolve(cwd), command, after)
            try:
                status = session.wait_token(sink, start + timeout + self.kill_grace)
                if status is None and session.alive:  # the in-container timeout did not fire: kill the group here
                    self._kill(session, server=False)
                    status = session.wait_token(sink, time.monotonic() + self.kill_grace)
            except BaseException:
                session.stale = True
                raise
            elapsed = time.monotonic() - start
            if status is None:
                session.stale = True
                return 137, elapsed >= timeout, True
            returncode = int(status)
            return returncode, returncode == 137 and elapsed >= timeout, False

    def _kill(self, session: Session, server: bool) -> None:
        """Kills the running command's process group (and the session's shell) with a separate exec."""
        assert self.container_id is not None
        script = f'kill -KILL -- -"$(<{session.pidfile})"'  # builtins only, as the commands' user: nothing they planted
        if server:
            script += f'; kill -KILL "$(<{session.pidfile}.session)"'
        with contextlib.suppress(*ENGINE_ERRORS):
            argv = ["bash", "-c", script + " 2>/dev/null"]
            exec_id = self.client.api.exec_create(self.container_id, argv, user=self.user or ROOT)["Id"]
            self.client.api.exec_start(exec_id)

    def execute(
        self, command: str, timeout: float | None = None, cwd: str | None = None, on_output: OnOutput = None
    ) -> CommandResult:
        timeout = self.command_timeout if timeout is None else timeout
        start = time.monotonic()
        cap = OutputCap(self.output_max_bytes, on_output)
        returncode, timed_out, lost = self.run(command, cap, timeout, cwd, after=self._redirects)
        output = redact(cap.text(self.messages["elided"]))  # environment.env may hold secrets
        if timed_out:
            output = append_note(output, render(self.messages["timed_out"], timeout=f"{round(timeout, 1):g}"))
        elif lost:
            output = append_note(output, render(self.messages["session_lost"]))
        return CommandResult(output, returncode, time.monotonic() - start, timed_out, cap.truncated)

    def inside(self, path: str) -> bool:
        sink = Collector()
        return self.run(f"{inside_check(self.workdir)}inside {shlex.quote(path)}", sink, self.command_timeout)[0] == 0

    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        snapshots: dict[str, FileSnapshot | None] = dict.fromkeys(paths)
        if not paths:
            return snapshots
        command = (
            f"{in_workdir(self.workdir)}{inside_check(self.workdir)}"
            f"for p in {' '.join(shlex.quote(path) for path in paths)}; do "
            'inside "$p" && printf \'%s\\0\' "$p"; done | '
            "tar -c -h --no-recursion --ignore-failed-read --format=posix -f - --null -T -"
        )
        archive = Collector()
        returncode, _, lost = self.run(command + " 2>/dev/null", archive, self.command_timeout, "/")
        if lost or 1 < returncode != GONE:
            raise EnvironmentFailure(f"reading files from the container failed (tar exit status {returncode})")
        if returncode == GONE:  # no file there to read
            return snapshots
        return snapshots | read_tar(bytes(archive.data), paths)

    def write_file(self, path: str, data: bytes) -> None:
        staging = f".llm-ide-write-{uuid.uuid4().hex}"
        self._put_archive("/tmp", single_file_tar(staging, data, self.owner))
        target = shlex.quote(self._resolve(path))
        script = (
            f"{inside_check(self.workdir)}if ! inside {target}; then rm -f /tmp/{staging}; exit {OUTSIDE}; fi; "
            f'mkdir -p -- "$(dirname -- {target})" && cat -- /tmp/{staging} > {target}; rc=$?; '
            f"rm -f /tmp/{staging}; exit $rc"
        )
        sink = Collector()
        returncode, _, _ = self.run(script, sink, self.command_timeout)
        if returncode == OUTSIDE:
            raise OutsideRepository(path)
        if returncode != 0:
            raise OSError(f"cannot write {path} in the container: {sink.data.decode(errors='replace').strip()}")

    def run_trusted(self, command: str, timeout: float) -> tuple[int, bytes]:
        errors = f"/tmp/.llm-ide-err-{uuid.uuid4().hex}"
        own = " ".join(f"{name}={shlex.quote(value)}" for name, value in OWN_GIT.items())
        script = f"(export {own}; {command}) 2>{errors}; rc=$?; [ $rc = 0 ] || cat {errors}; rm -f {errors}; exit $rc"
        sink = Collector()
        returncode, _, lost = self.run(in_workdir(self.workdir) + script, sink, timeout, "/")
        if lost:
            raise EnvironmentFailure("the container's shell session ended during one of our own commands")
        if returncode == GONE:
            raise RepositoryLost.away(f"the container's workdir ({self.workdir})")
        return returncode, bytes(sink.data)

    def private_dir(self, name: str) -> str:
        """Outside the workdir; the agent's commands may run as root in the container, so the host keeps what
        matters (e.g. the base commit's pack) and puts it back when this copy is damaged."""
        return posixpath.join(PRIVATE_ROOT, self.run_id.replace("/", "-"), name)

    def put_private(self, path: str, data: bytes) -> None:
        folder, name = posixpath.split(path)
        if self.run_trusted(f"mkdir -p -- {shlex.quote(folder)}", self.command_timeout)[0] != 0:
            raise EnvironmentFailure(f"cannot create {folder} in the container")
        self._put_archive(folder, single_file_tar(name, data, self.owner))

    def copy_in(self, source: Path, destination: str, leave_out: list[Path] | None = None) -> None:
        source = Path(source)
        target = self._resolve(destination)
        if not source.is_dir():
            self.put_private(target, source.read_bytes())
            return
        sink = Collector()
        if self.run(f"mkdir -p -- {shlex.quote(target)}", sink, self.command_timeout)[0] != 0:
            raise EnvironmentFailure(f"cannot create {target} in the container: {sink.data.decode(errors='replace')}")
        with tempfile.SpooledTemporaryFile(max_size=64 << 20) as spool:
            tar_directory(source, spool, self.owner, leave_out)
            spool.seek(0)
            self._put_archive(target, spool)

    def _put_archive(self, path: str, data: Any) -> None:
        if self.container_id is None:
            raise EnvironmentFailure("the docker environment is closed")
        try:
            self.client.api.put_archive(self.container_id, path, data)
        except ENGINE_ERRORS as error:
            raise EnvironmentFailure(f"copying into the container failed: {one_line(error)}") from None

    def close(self) -> None:
        """Removes the container (and waits until it is gone), then lets go of the session and the watchdog. A Ctrl-C
        meanwhile (a second one as the first waits for the engine's answer to the create) comes once it is done."""
        with interrupts_held():
            container_id, self.container_id = self.container_id, None
            if container_id is None:
                return
            try:
                remove_container(self.client, container_id)
                if self._creation and (made := self._creation.made(self.client.api.timeout)):  # made as we gave up
                    remove_container(self.client, made)
            except ENGINE_ERRORS as error:  # the engine gone: the run says so; it ends the container with our sockets
                log.info("could not remove container %s (llm-ide cleanup does): %s", container_id, one_line(error))
            finally:
                for connection in (self._session, *self._watchdogs):
                    if connection is not None:
                        with contextlib.suppress(Exception):
                            connection.close()
                _LIVE.pop(container_id, None)
                with contextlib.suppress(Exception):
                    self.client.close()

    def __enter__(self) -> DockerEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
