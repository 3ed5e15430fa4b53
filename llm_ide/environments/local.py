"""The local environment (`environment.type: local`): the agent's commands run on the host, in the repository, which
it edits in place. Its start (the settings read, the sandbox decided, its temp folders made, the views its commands
get), what it lets them reach as the run goes on, our own files and its end; the running of a command and the reads
and writes of the repository's files, what a step does, are HostCommands' (environments/host_commands.py)."""

from __future__ import annotations

import os
import shutil
import uuid
import weakref
from pathlib import Path
from typing import Any

from llm_ide.credentials import scrubbed_environ
from llm_ide.environments.base import Capabilities, EnvironmentFailure
from llm_ide.environments.bwrap import argv_head, sandbox_path
from llm_ide.environments.confinement import Confinement, repository_owner
from llm_ide.environments.holding import containment, kill_adopted
from llm_ide.environments.host_commands import HostCommands, git_identity
from llm_ide.environments.limits import Limits
from llm_ide.environments.output import default_messages
from llm_ide.environments.processes import TOKEN, Leftovers
from llm_ide.environments.scratch import made_folder, owned_tempdir, remove_folders
from llm_ide.environments.snapshots import LatestReads
from llm_ide.environments.views import found_views, mount_points, redirects
from llm_ide.settings import EnvironmentSettings


class LocalEnvironment(HostCommands):
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
        self._reads = LatestReads()
        self._namespace, self._groups = None, set()

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

    def tool_check_context(self) -> dict[str, object]:
        """What a tool's checks passing here depends on besides the tool (llm_ide/tools/checked.py): whether the
        commands are sandboxed, the user and limits they run under, the variables that find programs and modules."""
        uid, gids = self.confinement.user
        found = {name: value for name, value in self.env.items() if name == "PATH" or name.startswith("PYTHON")}
        limits = self.confinement.limits
        return {"sandbox": self.bwrap, "user": [uid, sorted(gids)], "limits": repr(limits), "variables": found}

    def copy_in(self, source: Path, destination: str) -> None:
        """Our own copies (the tools): the destination is trusted, e.g. the tools folder outside the repository."""
        target = self.repo / destination
        if Path(source).is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)

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
