"""No host Unix socket answers a sandboxed command unless `environment.sockets` lists it: a socket is a door out of any
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
from pathlib import Path

from llm_ide.environments.sandbox import real_path

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
