"""The local sandbox: bubblewrap around every command (own PID namespace and /proc, the repository, the tools and a
scratch directory ($TMPDIR) writable, the rest of the file system read-only, network optional). No command keeps a
privilege, root's included: every capability is dropped (in a user namespace of its own where they work here), so
mount, umount, remount, nsenter and unshare are refused, and the kernel's settings in /proc are read-only. The user's
home directory is the run's own folder in it (empty at the start, kept from command to command: what `pip install
--user` puts there, the next command imports; gone with the run), the runtime directory (keyrings, agent sockets) and
ssh-agent's sockets are empty, and every host Unix socket it could see answers no connection
(environments/sockets.py): a command reads no credential, key or token kept there; what it needs from them (a
toolchain in ~/.pyenv, the user's Python environment) is listed in `environment.readable` or found
(environments/pythons.py), and the repository, the tools and the scratch directory show through wherever they are.
The run's own files (its output folder) never show."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# bwrap's word for a path to mount over that was gone (a socket masked at the scan) and cannot be made in the root
VANISHED = re.compile(r"^bwrap: Can't create file at (.+): [^:\n]+$", re.MULTILINE)


def resolve_inside(root: Path, path: str) -> Path | None:
    """`path` (relative to `root`, or absolute) with every symlink resolved, or None when it leads outside `root`
    (compared as strings: a step asks it of every file its code context shows)."""
    folder = str(root)
    target = real_path(os.path.join(folder, path))
    return Path(target) if within(target, folder) else None


def real_path(path: str) -> str:
    """`os.path.realpath(path)`, from the kernel (the name of a descriptor opened on it: three system calls, where
    realpath makes one per component, in Python); for a name not there (not even a symlink), its folder's and the
    name; realpath's own answer for the rest (a descriptor of no file's name, a file deleted meanwhile)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        head, tail = os.path.split(path)
        if tail in ("", ".", "..") or not head or os.path.lexists(path):
            return os.path.realpath(path)
        return os.path.join(real_path(head), tail)
    except OSError:
        return os.path.realpath(path)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = ""
    finally:
        os.close(fd)
    return real if real.startswith("/") and not real.endswith(" (deleted)") else os.path.realpath(path)


def absent(path: str) -> bool:
    """Whether no file is where `real_path(path)` leads, known without it: no entry `path` (not even a dangling
    symlink) in a folder that is there (real_path names that folder's, which has none)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return os.path.isdir(os.path.dirname(path))
    except OSError:
        pass
    return False


def within(path: str, folder: str) -> bool:
    """`Path(path).is_relative_to(folder)` for normalised absolute paths, without making Path objects (a command's
    scan asks it of every candidate socket and hidden folder)."""
    return path == folder or path.startswith(folder if folder.endswith("/") else folder + "/")


@dataclass(frozen=True)
class Sandbox:
    """One bubblewrap command line per command: `head` (bwrap.argv_head: decided once per run, `/` read-only and the
    isolation), then `hidden` empty (a tmpfs each), `readable` shown read-only and `writable` writable wherever they
    are (inside a hidden folder too); `mounts`: more writable folders, each shown at another path (e.g. a checkout at
    /testbed); `secluded`: our own folders (the run's output), empty wherever they are, even inside the repository;
    `sockets`: host Unix sockets that answer nothing in it. A deeper path is set up after the shallower one it lies
    in. `inner`: what runs the command (the limits, the user it runs as). Built whole, for one command."""

    head: tuple[str, ...]
    writable: list[Path]
    readable: list[Path] = field(default_factory=list)
    hidden: list[Path] = field(default_factory=list)
    mounts: dict[str, Path] = field(default_factory=dict)
    secluded: list[Path] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)
    inner: list[str] = field(default_factory=list)
    hidden_mode: str | None = None  # the hidden folders' mode (bwrap's tmpfs: 0755, the sandbox's user's)
    homes: dict[Path, Path] = field(default_factory=dict)  # hidden folders shown as the run's own (not a new tmpfs)
    unmasked: frozenset[str] = frozenset()  # where a socket masked before was gone when bwrap mounted over it

    def argv(self, command: list[str], cwd: Path) -> list[str]:
        argv = list(self.head)
        for _, operation in sorted(self.views(), key=lambda view: len(Path(view[0]).parts)):
            argv += operation
        return [*argv, "--chdir", str(cwd), *self.inner, *command]

    def views(self) -> list[tuple[str, list[str]]]:
        """(where, bwrap options) of every folder shown, hidden or masked, in the order they apply at one depth."""
        views = [(str(path), self.hiding(path)) for path in self.hidden]
        for option, paths in (("--ro-bind", self.readable), ("--bind", self.writable)):
            # bwrap refuses to bind a missing path (and would fail every command); a mount shows it at its place too
            views += [(at, [option, str(path), at]) for path in paths if path.exists() for at in self.shown_at(path)]
        views += [(target, ["--bind", str(source), target]) for target, source in self.mounts.items()]
        views += [(where, ["--tmpfs", where]) for path in self.secluded for where in self.shown_at(path)]
        masks = [where for socket in self.sockets for where in self.shown_at(Path(socket))]
        return views + [(where, ["--ro-bind", "/dev/null", where]) for where in masks if where not in self.unmasked]

    def hiding(self, path: Path) -> list[str]:
        """A hidden folder: a home shown as the run's own (what a command leaves there the next one finds), any other
        a new tmpfs."""
        if path in self.homes:
            return ["--bind", str(self.homes[path]), str(path)]
        return [*(["--perms", self.hidden_mode] if self.hidden_mode else []), "--tmpfs", str(path)]

    def shown_at(self, path: Path) -> list[str]:
        """Where the commands see host path `path`: at itself, and inside each mount that shows it elsewhere."""
        found = [str(path)]
        for target, source in self.mounts.items():
            if path.is_relative_to(source):
                found.append(str(Path(target, path.relative_to(source))))
        return found
