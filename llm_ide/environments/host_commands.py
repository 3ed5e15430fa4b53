"""How the local environment runs a command on the host and reads and writes the repository's files: what one step
of a run does to it. Its start (the settings read, its folders, the views its commands get), what it lets them reach
as the run goes on and its end are LocalEnvironment's (environments/local.py), which holds what this reads."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import time
from collections.abc import Collection
from pathlib import Path

from llm_ide.environments.base import CommandResult, OutsideRepository
from llm_ide.environments.confinement import Confinement
from llm_ide.environments.holding import RunNamespace, namespace_tools
from llm_ide.environments.output import OnOutput, OutputCap, append_note, drain, pump_output, render
from llm_ide.environments.processes import (
    Launch,
    Leftovers,
    StartMarker,
    keyring_spawner,
    kill_group,
    start_with_parent,
)
from llm_ide.environments.sandbox import VANISHED, Sandbox, absent, forget_listings, host_sockets, resolve_inside
from llm_ide.environments.scope import abstract_guard
from llm_ide.environments.snapshots import FileSnapshot, LatestReads
from llm_ide.environments.views import UNHOOKED
from llm_ide.errors import RepositoryLost
from llm_ide.secrets import redact

START_TRIES = 8  # starts of one command whose sandbox could not be set up (a host socket it masks vanished meanwhile)


def signal_returncode(returncode: int) -> int:
    """Killed by signal N → 128 + N, as a shell reports it (and as docker exec does)."""
    return 128 - returncode if returncode < 0 else returncode


class HostCommands:
    """A local environment's commands, each run with `bash -c` in the repository on the host (in bubblewrap when
    `bwrap` is set, its view of the host built for each command), and the repository's files read and written. The
    attributes listed are what LocalEnvironment's start decides (local.py)."""

    repo: Path
    command_timeout: float
    output_max_bytes: int
    messages: dict[str, str]
    env: dict[str, str]
    network: bool
    bwrap: str | None
    mounts: dict[str, Path]
    workdir: str  # (absolute paths in actions are relative to it)
    confinement: Confinement
    head: tuple[str, ...]  # what every bubblewrap line starts with (bwrap.argv_head)
    home: str | None  # the sandboxed commands' $HOME
    writable: list[Path]
    readable: list[Path]
    hidden: list[Path]
    homes: set[Path]
    secluded: list[Path]
    containment: str  # how their processes are held: bwrap, unshare or subreaper (holding.containment)
    leftovers: Leftovers
    _git: tuple[int, int] | None
    _redirects: list[Path]
    _reads: LatestReads
    _namespace: RunNamespace | None
    _groups: set[int]  # the commands' process groups (subreaper: killed with the run)

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
        """The file as it is now (its latest read again while its stat says it is unchanged: snapshots.LatestReads)."""
        target = None if absent(os.path.join(self.repo, path)) else resolve_inside(self.repo, path)  # (a cheap miss)
        return None if target is None else self._reads.read(target)

    def write_file(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

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
