"""What a local environment's commands run under, decided once at its start and kept as data: the isolation
bubblewrap gives them (environments/bwrap.py probes it), the limits (environments/limits.py, and the run's cgroup:
environments/cgroups.py) and the user they run as. Each command's own part (the host sockets it masks, bubblewrap's
view) is HostCommands._sandboxed's (host_commands.py).

Root on a repository another user owns (a devcontainer's bind mount, `sudo`): a command holding no capability could
not write that user's files, so with bubblewrap it runs as the repository's owner (setpriv, with the two
capabilities that switch needs, gone once it is made), that user's home is hidden as the invoking user's is, and the
folders it writes (scratch, tools) are made theirs. Without bubblewrap it runs as llm-ide does."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from llm_ide.environments.bwrap import ISOLATIONS, isolation
from llm_ide.environments.cgroups import Cgroup, cgroups_usable
from llm_ide.environments.limits import Limits, ulimit_line, warn_unenforced

SWITCH = ("--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")


def repository_owner(repo: Path) -> tuple[int, int] | None:
    """(uid, gid) the commands run as when llm-ide runs as root on a repository another user owns; None otherwise."""
    if os.geteuid() != 0:
        return None
    found = repo.stat()
    return (found.st_uid, found.st_gid) if found.st_uid != 0 else None


@dataclass
class Confinement:
    """What a local environment's commands run under, decided once at its start and kept as data: `isolation`
    (bwrap's options that take the privileges), `inner` (what makes the command the user it runs as), `user` ((uid,
    gids) it runs as), `hidden_mode` (the hidden folders' mode), `prefix` (the limits' ulimit line, on the command's
    first line: its line numbers stay) and `procs` (the cgroup files each command joins)."""

    bwrap: str | None
    limits: Limits
    run_as: tuple[int, int] | None = None
    sockets: list[str] = field(default_factory=list)  # allowed: environment.sockets
    cgroup: Cgroup | None = None

    def __post_init__(self) -> None:
        self.run_as = self.run_as if self.bwrap else None
        self.isolation = (SWITCH if self.run_as else isolation(self.bwrap)) if self.bwrap else ISOLATIONS[-1]
        self._cgroups = cgroups_usable() and bool(self.limits.processes or self.limits.memory)
        as_root = (self.run_as is None and os.geteuid() == 0) or self.run_as == (0, 0)
        if self.limits.processes and as_root and not self._cgroups:
            warn_unenforced("processes")
        self.prefix = ulimit_line(self.limits, self._cgroups, as_root)
        self.procs: list[str] = self._join_files()
        self.inner = self._switch()
        self.user = self._user()
        self.hidden_mode = "1777" if self.run_as else None  # the hidden folders but the homes: the user writes them

    def _switch(self) -> list[str]:
        if self.run_as is None:
            return []
        uid, gid = self.run_as
        return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]

    def _user(self) -> tuple[int, set[int]]:
        """Who the commands run as: (uid, gids)."""
        if self.run_as is not None:
            return self.run_as[0], {self.run_as[1]}
        return os.getuid(), {os.getgid(), *os.getgroups()}

    def make_theirs(self, *paths: Path) -> None:
        """Folders the commands write, made the user's they run as."""
        if self.run_as is not None:
            for path in paths:
                with contextlib.suppress(OSError):
                    os.chown(path, *self.run_as)

    def _join_files(self) -> list[str]:
        """The cgroup.procs files every command joins: the run's cgroup, made with the environment."""
        if not self._cgroups:
            return []
        try:
            self.cgroup = Cgroup(self.limits)
        except OSError:
            self._cgroups = False
            return []
        return self.cgroup.procs

    def close(self) -> None:
        self.procs = []
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None
