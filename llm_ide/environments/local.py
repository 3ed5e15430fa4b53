from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import time
import uuid
import weakref
from collections.abc import Collection
from pathlib import Path
from typing import Any

from llm_ide.credentials import scrubbed_environ
from llm_ide.environments.base import Capabilities, CommandResult, EnvironmentFailure, FileSnapshot, OutsideRepository
from llm_ide.environments.bwrap import argv_head, sandbox_path
from llm_ide.environments.confinement import Confinement, repository_owner
from llm_ide.environments.holding import RunNamespace, containment, kill_adopted, namespace_tools
from llm_ide.environments.limits import Limits
from llm_ide.environments.output import OnOutput, OutputCap, append_note, default_messages, drain, pump_output, render
from llm_ide.environments.processes import (
    TOKEN,
    Launch,
    Leftovers,
    StartMarker,
    keyring_spawner,
    kill_group,
    start_with_parent,
)
from llm_ide.environments.sandbox import VANISHED, Sandbox, absent, resolve_inside
from llm_ide.environments.scope import abstract_guard
from llm_ide.environments.scratch import made_folder, owned_tempdir, remove_folders
from llm_ide.environments.sockets import forget_listings, host_sockets
from llm_ide.environments.views import UNHOOKED, found_views, mount_points, redirects
from llm_ide.errors import RepositoryLost
from llm_ide.secrets import redact
from llm_ide.settings import EnvironmentSettings

READS = 64 << 20  # bytes of the files whose latest read is kept, the least recently read out first
START_TRIES = 8  # starts of one command whose sandbox could not be set up (a host socket it masks vanished meanwhile)


def signal_returncode(returncode: int) -> int:
    """Killed by signal N → 128 + N, as a shell reports it (and as docker exec does)."""
    return 128 - returncode if returncode < 0 else returncode


class LocalEnvironment:
    """Runs commands with `bash -c` in the repository on the host, which the agent edits in place; inside bubblewrap
    (`sandbox: bwrap`) when it is installed. Every process the commands start ends with the run (with bwrap: with
    its command), see environments/processes.py; `leftovers` is where the run's record of them is kept. `mount_at`
    (bwrap only): the commands see the repository at this path instead of its own (e.g. /testbed, as in the SWE-bench
    images), and it is the workdir that absolute paths in actions are relative to."""

    kind = "local"
    capabilities = Capabilities(ephemeral=False, image=False, tools_mount=True, system_path=False)

    @classmethod
    def from_config(
        cls,
        settings: EnvironmentSettings,
        *,
        repo: Path | None,
        tools_dir: Path | None = None,
        leftovers: Path | None = None,
        output_dir: Path | None = None,
        **_: Any,
    ) -> LocalEnvironment:
        """Commands run in `repo` on the host (`leftovers`: the run's record of its processes and temp folders;
        `output_dir`: the run's own folder, which its commands never see)."""
        if repo is None:
            raise EnvironmentFailure("the local environment needs a repository (--repo PATH)")
        return cls(
            repo,
            env=settings.env,
            command_timeout=settings.command_timeout,
            output_max_bytes=settings.output_max_bytes,
            tools_dir=tools_dir,
            messages=settings.messages.model_dump(),
            sandbox=settings.sandbox,
            network=settings.network != "none",
            writable=settings.writable,
            readable=settings.readable,
            leftovers=leftovers,
            mount_at=settings.mount_at,
            sockets=settings.sockets,
            limits=Limits.of(settings.limits),
            secluded=[output_dir] if output_dir else [],
        )

    def __init__(
        self,
        repo: Path,
        *,
        env: dict[str, str] | None = None,
        command_timeout: float = 120,
        output_max_bytes: int = 1_000_000,
        tools_dir: Path | None = None,
        messages: dict[str, str] | None = None,
        sandbox: str = "bwrap",
        network: bool = True,
        writable: list[str] | None = None,
        readable: list[str] | None = None,
        leftovers: Path | None = None,
        mount_at: str | None = None,
        sockets: list[str] | None = None,
        limits: Limits | None = None,
        secluded: list[Path] | None = None,
    ) -> None:
        self.repo = Path(repo).resolve()
        if not self.repo.is_dir():
            raise EnvironmentFailure(f"repository not found: {repo}")
        self.command_timeout = command_timeout
        self.output_max_bytes = output_max_bytes
        self.messages = {**default_messages(), **(messages or {})}
        self.env = {**scrubbed_environ(), **{key: str(value) for key, value in (env or {}).items()}}
        self.env[TOKEN] = uuid.uuid4().hex
        self.network = network
        self.bwrap = sandbox_path(sandbox)
        self.mounts = mount_points(self.bwrap, mount_at, self.repo)  # (refused: before anything is made)
        self.workdir = next(iter(self.mounts), str(self.repo))  # (absolute paths in actions are relative to it)
        self.confinement = Confinement(self.bwrap, limits or Limits(), repository_owner(self.repo), sockets or [])
        owned: list[str] = []  # its temp folders, each as soon as it is made
        # they go with it, closed or not: dropped, or at the interpreter's exit (a Python API caller's)
        self._remove_folders = weakref.finalize(self, remove_folders, owned, os.getpid())
        try:  # failed or interrupted on the way: what it made goes (its cgroup, its temp folders), its error told
            self._owns_tools = tools_dir is None
            self.tools_root = str(Path(tools_dir).resolve() if tools_dir else Path(owned_tempdir("tools", owned)))
            made_folder(Path(self.tools_root), "the tools folder")
            isolation = self.confinement.isolation  # what every bubblewrap line starts with, decided once
            self.head = argv_head(self.bwrap, isolation, network, list(self.mounts)) if self.bwrap else ()
            self._private: str | None = None
            self.scratch: str | None = owned_tempdir("tmp", owned)  # the commands' $TMPDIR, sandboxed or not
            self.env["TMPDIR"] = self.scratch
            self.home = owned_tempdir("home", owned) if self.bwrap else None  # the sandboxed commands' $HOME
            self.confinement.make_theirs(*(Path(folder) for folder in owned))
            self._views(writable or [], readable, secluded or [])
            self.containment = containment(self.bwrap)
            self._git, self._redirects = git_identity(self.repo), redirects(self.repo)  # (the ones there are kept)
            self.leftovers = Leftovers(leftovers, self.env[TOKEN], owned)
        except BaseException:
            self.confinement.close()
            self._remove_folders()
            raise
        self._reads: dict[Path, FileSnapshot] = {}
        self._kept = 0  # their bytes
        self._namespace: RunNamespace | None = None
        self._groups: set[int] = set()  # the commands' process groups (subreaper: killed with the run)

    def _views(self, writable: list[str], readable: list[str] | None, secluded: list[Path]) -> None:
        """What the sandboxed commands write, read and never see (views.found_views)."""
        shared = [Path(self.tools_root), *([Path(self.scratch)] if self.scratch else [])]  # ours, the commands write
        owner, asked = self.confinement.run_as, (writable, readable)
        found = found_views(self.repo, self.env, shared, asked, secluded, owner, sandboxed=self.bwrap is not None)
        self.writable, self.readable, self.hidden = found.writable, found.readable, found.hidden
        self.homes, self.secluded = found.homes, found.secluded
        self.own_paths, self.notes = found.own_paths, found.notes

    def allow_write(self, path: Path) -> None:
        """Lets the sandboxed commands write `path` too (e.g. a tool cache entry being built)."""
        resolved = Path(path).resolve()
        if resolved not in self.writable:
            self.writable.append(resolved)
            self.confinement.make_theirs(resolved)

    def disallow_write(self, path: Path) -> None:
        """`path` read-only again to the sandboxed commands (a tool cache entry once it is built)."""
        resolved = Path(path).resolve()
        self.writable = [entry for entry in self.writable if entry != resolved]
        self.allow_read(resolved)

    def allow_read(self, path: Path) -> None:
        """Lets the sandboxed commands read `path` too, wherever it is (e.g. a built tool in the user's cache)."""
        resolved = Path(path).resolve()
        if resolved not in self.readable:
            self.readable.append(resolved)

    def _path(self, path: str) -> Path:
        target = resolve_inside(self.repo, path)
        if target is None:
            raise OutsideRepository(path)
        return target

    def inside(self, path: str) -> bool:
        return resolve_inside(self.repo, path) is not None

    def _argv(self, command: str, cwd: Path, unmasked: Collection[str] = ()) -> Launch:
        """The command's argv (its limits set first, on its first line: its line numbers stay) and what starts it."""
        command = self.confinement.prefix + command
        if self.bwrap:
            return self._sandboxed(command, cwd, unmasked)
        if self.containment == "unshare":
            return self._run_namespace().argv(command, cwd), None
        return ["bash", "-c", command], None

    def _sandboxed(self, command: str, cwd: Path, unmasked: Collection[str]) -> Launch:
        """The command in bubblewrap (the host's sockets masked; the isolation, user and limits of the run's
        Confinement), and what starts it: a thread with a keyring of its own, which also holds the scope of abstract
        sockets when some listen on the host (scope.abstract_guard)."""
        if self.mounts:
            cwd = Path(self.workdir, cwd.relative_to(self.repo))
        confined = self.confinement
        hidden = [path for path in self.hidden if path.is_dir()]  # an ssh-agent's folder gone since: not mounted
        sockets, abstract = host_sockets(self.env, [*hidden, *self.secluded], confined.sockets, confined.user)
        homes = {path: Path(self.home) for path in hidden if path in self.homes} if self.home else {}
        views = (self.readable, hidden, self.mounts, self.secluded, sockets, confined.inner, confined.hidden_mode)
        sandbox = Sandbox(self.head, self.writable, *views, homes, frozenset(unmasked))  # (in its fields' order)
        argv = sandbox.argv(["bash", "-c", command], cwd)
        guard = abstract_guard() if abstract and self.network else None
        return argv, guard or keyring_spawner(os.getpid()).start

    def _run_namespace(self) -> RunNamespace:
        """The run's PID namespace, made at the first command (again if it was lost)."""
        if self._namespace is None or not self._namespace.alive:
            tools = namespace_tools()
            assert tools is not None
            self._namespace = RunNamespace(tools, self.env)
        return self._namespace

    def execute(
        self, command: str, timeout: float | None = None, cwd: str | None = None, on_output: OnOutput = None
    ) -> CommandResult:
        timeout = self.command_timeout if timeout is None else timeout
        start = time.monotonic()
        where = self._path(cwd) if cwd else self.repo
        unmasked: set[str] = set()  # masked sockets that were gone when bwrap mounted over them
        for tries_left in reversed(range(START_TRIES)):  # a sandbox that never started the command: again
            with StartMarker() if self.bwrap else contextlib.nullcontext() as marker:  # (its pipe closed however)
                launch = self._argv((marker.prefix() if marker else "") + command, where, unmasked)
                returncode, timed_out, cap = self._run(launch, where, start + timeout, marker, on_output)
                if marker is None or marker.started() or not tries_left:
                    break
            forget_listings()
            unmasked |= set(VANISHED.findall(cap.text()))
        for redirect in filter(Path.is_file, self._redirects):
            redirect.unlink()  # a command's: git would read the config and hooks of the folder it names
        if self._git is not None and git_identity(self.repo) != self._git:  # our work in place: the user's history
            self._git = None  # said once
            raise RepositoryLost(
                f"the repository's .git ({self.repo / '.git'}) was deleted or replaced by a command of the run: "
                "the patch kept is the run's last worktree snapshot"
            )
        output = redact(cap.text(self.messages["elided"]))
        if timed_out:
            output = append_note(output, render(self.messages["timed_out"], timeout=f"{round(timeout, 1):g}"))
        return CommandResult(output, returncode, time.monotonic() - start, timed_out, cap.truncated)

    def _run(
        self, launch: Launch, where: Path, deadline: float, marker: StartMarker | None, on_output: OnOutput
    ) -> tuple[int, bool, OutputCap]:
        """The command (`launch`) run until it ends or `deadline`: its exit status, whether it timed out, its output."""
        process = start_with_parent(
            launch[0],
            by=launch[1],
            cwd=where,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cgroup=self.confinement.procs,
            pass_fds=marker.passed() if marker else (),
        )
        assert process.stdout is not None
        cap = OutputCap(self.output_max_bytes, on_output)
        fd = process.stdout.fileno()
        try:  # (from the start: a Ctrl-C or SIGTERM while it is being recorded must not leave it running)
            if marker:
                marker.spawned()
            self.leftovers.command_started(process.pid)
            if self.containment == "subreaper":
                self._groups.add(process.pid)
            timed_out = pump_output(fd, cap, process, deadline)
            if not timed_out:  # the output ended (closed, or sent elsewhere): the command still has its deadline
                timed_out = wait_until(process, deadline)
            if timed_out:
                kill_group(process.pid)
                drain(fd, cap, 0.5)
            returncode = signal_returncode(process.wait())
        finally:
            if process.poll() is None:  # interrupted (Ctrl-C) while the command ran: do not leave it behind
                kill_group(process.pid)
                process.wait()
            process.stdout.close()
            self.leftovers.command_ended()
        return returncode, timed_out, cap

    def read_files(self, paths: list[str]) -> dict[str, FileSnapshot | None]:
        return {path: self._snapshot(path) for path in paths}

    def _snapshot(self, path: str) -> FileSnapshot | None:
        """The file as it is now: its latest read again while its stat says it is unchanged (READS bytes kept)."""
        target = None if absent(os.path.join(self.repo, path)) else resolve_inside(self.repo, path)  # (a cheap miss)
        if target is None:
            return None
        known = self._reads.pop(target, None)
        self._kept -= len(known.data) if known else 0
        snapshot = known.again(target) if known else FileSnapshot.read(target)
        if snapshot is not None and snapshot.settled:
            self._reads[target], self._kept = snapshot, self._kept + len(snapshot.data)  # (the most recent last)
            while self._kept > READS:
                self._kept -= len(self._reads.pop(next(iter(self._reads))).data)
        return snapshot

    def write_file(self, path: str, data: bytes) -> None:
        self.put_private(str(self._path(path)), data)

    def copy_in(self, source: Path, destination: str) -> None:
        """Our own copies (the tools): the destination is trusted, e.g. the tools folder outside the repository."""
        target = self.repo / destination
        if Path(source).is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)

    def run_trusted(self, command: str, timeout: float) -> tuple[int, bytes]:
        """Our own commands (patch extraction), outside the sandbox: stdout, and stderr too when they fail."""
        if not os.access(self.repo, os.X_OK):  # a command removed, moved or locked it (`rm -rf "$PWD"`, `chmod 0 .`)
            raise RepositoryLost.away(f"the repository ({self.repo})")
        try:
            done = subprocess.run(
                ["bash", "-c", command], cwd=self.repo, env=self.env | UNHOOKED, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return 124, b"timed out"
        return done.returncode, done.stdout + (done.stderr if done.returncode else b"")

    def private_dir(self, name: str) -> str:
        """A directory of ours on the host, which the sandboxed commands cannot write (read-only outside the repo)."""
        if self._private is None:
            self._private = owned_tempdir("private")
            self.leftovers.add_folder(self._private)
        return os.path.join(self._private, name)

    def put_private(self, path: str, data: bytes) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)

    def close(self) -> None:
        """Ends every process the run started, then removes its temp folders."""
        if self._namespace is not None:
            self._namespace.close()
            self._namespace = None
        if self.containment == "subreaper":
            kill_adopted(self.env[TOKEN], self._groups)
        self.confinement.close()
        self._remove_folders()
        self._private = self.scratch = self.home = None
        self.leftovers.close()

    def __enter__(self) -> LocalEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def git_identity(repo: Path) -> tuple[int, int] | None:
    """The repository's `.git` (folder, or file of a linked worktree) as (device, inode); None when it has none, or a
    folder without its HEAD (`rm -rf .git` leaves the config and hooks: read-only mount points in the sandbox)."""
    try:
        found = os.lstat(repo / ".git")
    except OSError:
        return None
    emptied = stat.S_ISDIR(found.st_mode) and not os.path.lexists(repo / ".git" / "HEAD")
    return None if emptied else (found.st_dev, found.st_ino)


def wait_until(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Waits for `process` until `deadline`; True when it is still running then."""
    try:
        process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return True
    return False
