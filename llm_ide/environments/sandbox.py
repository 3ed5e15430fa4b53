"""The local sandbox: bubblewrap around every command (own PID namespace and /proc, the repository, the tools and a
scratch directory ($TMPDIR) writable, the rest of the file system read-only, network optional). No command keeps a
privilege, root's included: every capability is dropped (in a user namespace of its own where they work here), so mount,
umount, remount, nsenter and unshare are refused, and the kernel's settings in /proc are read-only. The user's home
directory is the run's own folder in it (empty at the start, kept from command to command: what `pip install --user`
puts there, the next command imports; gone with the run), the runtime directory (keyrings, agent sockets) and
ssh-agent's sockets are empty, and every host Unix socket it could see answers no connection (below): a command reads no
credential, key or token kept there; what it needs from them (a toolchain in ~/.pyenv, the user's Python environment) is
listed in `environment.readable` or found (environments/pythons.py), and the repository, the tools and the scratch
directory show through wherever they are. The run's own files (its output folder) never show.

No host Unix socket answers a sandboxed command unless `environment.sockets` lists it: a socket is a door out of any
read-only view (Docker's, containerd's or podman's is root on the host; ssh-agent's signs as the user; D-Bus and X11
drive the desktop; tmux's runs commands), and `connect()` ignores read-only binds.

Found before each command: the listening sockets of the host's network namespace (/proc/net/unix), those in the
folders where services and agents put them (/run, /var/run a few levels down; the temp folders' top level and their
agents' and servers' folders), and those the environment names (SSH_AUTH_SOCK, DOCKER_HOST, CONTAINER_HOST, D-Bus
addresses). Each that the command could see is masked by /dev/null (a connection is refused). Abstract sockets (a
name, no file: X11's, some D-Bus buses, old containerd shims) are kept from a command that shares the host's network
by a Landlock scope (Linux 6.12 and later: environments/scope.py); with `environment.network: none` it has a network
namespace of its own, where they do not exist."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# bwrap's word for a path to mount over that was gone (a socket masked at the scan) and cannot be made in the root
VANISHED = re.compile(r"^bwrap: Can't create file at (.+): [^:\n]+$", re.MULTILINE)
# where services put their sockets, and how many levels down (/run/docker.sock, /run/containerd/containerd.sock,
# /run/user/1000/podman/podman.sock); in the temp folders, the top level and the folders agents and servers make
# (/tmp/ssh-XXXX/agent.1, /tmp/.X11-unix/X0, /tmp/tmux-0/default): not every test's folder at every command
FOLDERS = {"/run": 3, "/var/run": 3, "/dev/shm": 1}
TEMP_FOLDERS = ("/tmp", "/var/tmp")
SOCKET_FOLDER = re.compile(r"\.X11-unix|\.ICE-unix|\.font-unix|ssh-|tmux-|screen|vscode|pulse-|gpg|dbus|keyring")
MAX_ENTRIES = 20_000  # entries looked at per scan: a huge temp folder costs a command no more than this
TICK_NS = 100_000_000  # a folder changed this recently is listed again at the next command (10 clock ticks at least)
LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's flags
VARIABLES = ("SSH_AUTH_SOCK", "DOCKER_HOST", "CONTAINER_HOST", "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS")


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


def listening(table: str = "/proc/net/unix") -> tuple[set[str], bool]:
    """(paths of the listening sockets of this network namespace, whether abstract ones listen too)."""
    try:
        lines = Path(table).read_text(errors="replace").splitlines()[1:]
    except OSError:
        lines = []
    names = [fields[7] for line in lines if len(fields := line.split(None, 7)) == 8 and int(fields[3], 16) & LISTENING]
    return {name for name in names if not name.startswith("@")}, any(name.startswith("@") for name in names)


def scanned(folders: list[str], depth: int, hidden: list[Path], agents_only: bool = False) -> set[str]:
    """The sockets in `folders`, `depth` levels down (below the first, only in agents' and servers' folders when
    `agents_only`; never in `hidden` ones), looking at MAX_ENTRIES entries at most. A folder whose change time has not
    changed since it was last looked at is not listed again (a socket made or removed in it changes it): a command
    costs a stat per folder."""
    found: set[str] = set()
    skipped = {str(folder) for folder in hidden}
    budget, stack = MAX_ENTRIES, [(folder, 0) for folder in folders]
    while stack and budget > 0:
        folder, level = stack.pop()
        sockets, subfolders, agents, count = listed(folder)
        budget -= count
        found.update(sockets)
        if level < depth:
            stack += [(sub, level + 1) for sub in (agents if agents_only else subfolders) if sub not in skipped]
    return found


Listing = tuple[list[str], list[str], list[str], int]
_listings: dict[str, tuple[tuple[int, int, int], Listing]] = {}


def forget_listings() -> None:
    """The next scan lists every folder again (a folder's time may not show a change made within its resolution)."""
    _listings.clear()


def listed(folder: str) -> Listing:
    """(the sockets, the sub-folders, those of agents and servers, the number of entries) of `folder`."""
    now = time.time_ns()
    try:
        found = os.stat(folder)
    except OSError:
        _listings.pop(folder, None)
        return [], [], [], 0
    key = (found.st_dev, found.st_ino, found.st_ctime_ns)  # any entry made, removed or renamed changes its ctime
    if (known := _listings.get(folder)) is not None and known[0] == key:
        return known[1]
    sockets, folders, agents, count = [], [], [], 0
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            count += 1
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
                if SOCKET_FOLDER.match(entry.name):
                    agents.append(entry.path)
            elif not entry.is_file(follow_symlinks=False) and not entry.is_symlink():
                with contextlib.suppress(OSError):
                    if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                        sockets.append(entry.path)
            if count >= MAX_ENTRIES:
                break
    if now - found.st_ctime_ns > TICK_NS:  # changed within a clock tick of now: a change to come could keep its ctime
        _listings[folder] = (key, (sockets, folders, agents, count))
    return sockets, folders, agents, count


def named(environ: dict[str, str]) -> set[str]:
    """The socket paths the environment's variables name (`unix://…`, `unix:path=…`, a path)."""
    parts = [part for variable in VARIABLES for part in environ.get(variable, "").replace(";", ",").split(",")]
    values = (part.strip().removeprefix("unix://").removeprefix("unix:path=") for part in parts)
    return {value for value in values if value.startswith("/")}


def host_sockets(
    environ: dict[str, str], hidden: list[Path], allowed: list[str], user: tuple[int, set[int]]
) -> tuple[list[str], bool]:
    """(the host sockets a sandboxed command would see, real paths: those under `hidden`, `allowed` and those in a
    folder the command's `user` (uid, gids) may not search are left out, as it cannot connect to them and bwrap could
    not mask them; whether abstract sockets listen in the host's network namespace)."""
    paths, abstract = listening()
    # each folder scanned once, at its real path (/var/run is /run), to its greatest depth; a socket a scan finds (no
    # symlink, in a folder reached through none) is at its real path already
    tops = {real_path(folder): depth for folder, depth in sorted(FOLDERS.items(), key=lambda item: item[1])}
    candidates = {real_path(path) for path in paths | named(environ)}.union(
        *(scanned([folder], depth, hidden) for folder, depth in tops.items()),
        scanned(sorted({real_path(path) for path in (*TEMP_FOLDERS, tempfile.gettempdir())}), 1, hidden, True),
    )
    keep = {real_path(os.path.expanduser(path)) for path in allowed}  # `~`: the home
    found, searchable, folders = set(), Searchable(*user), {str(folder) for folder in hidden}
    inside = tuple(folder.rstrip("/") + "/" for folder in folders)  # (sandbox.within of them all, in one call)
    for real in candidates:
        if real in keep or real in folders or real.startswith(inside):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(real).st_mode) and searchable(os.path.dirname(real)):
                found.add(real)
    return sorted(found), abstract


class Searchable:
    """Whether a user holding no capability may search a folder and every folder above it (the permission bits of
    its owner, its group, or others), remembered per folder."""

    def __init__(self, uid: int, gids: set[int]) -> None:
        self.uid, self.gids = uid, gids
        self.known: dict[str, bool] = {}

    def __call__(self, folder: str) -> bool:
        if folder not in self.known:
            parent = os.path.dirname(folder)
            self.known[folder] = (parent == folder or self(parent)) and self.searchable(folder)
        return self.known[folder]

    def searchable(self, folder: str) -> bool:
        try:
            found = os.stat(folder)
        except OSError:
            return False
        if found.st_uid == self.uid:
            return bool(found.st_mode & stat.S_IXUSR)
        return bool(found.st_mode & (stat.S_IXGRP if found.st_gid in self.gids else stat.S_IXOTH))
