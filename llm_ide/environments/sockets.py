"""No host Unix socket answers a sandboxed command unless `environment.sockets` lists it: a socket is a door out of any
read-only view (Docker's, containerd's or podman's is root on the host; ssh-agent's signs as the user; D-Bus and X11
drive the desktop), and `connect()` ignores read-only binds.

Found before each command: the listening sockets of the host's network namespace (/proc/net/unix), those in the
folders where services and agents put them (/run, /var/run, the temp folders, a few levels down), and those the
environment names (SSH_AUTH_SOCK, DOCKER_HOST, CONTAINER_HOST, D-Bus addresses). Each that the command could see is
masked by /dev/null (a connection is refused). Abstract sockets (a name, no file: X11's, some D-Bus buses, old
containerd shims) are kept from a command that shares the host's network by a Landlock scope (Linux 6.12 and later);
with `environment.network: none` it has a network namespace of its own, where they do not exist."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import stat
import sys
import tempfile
from functools import cache
from pathlib import Path

log = logging.getLogger("llm_ide.environment")

# where services and agents put their sockets, and how many levels down (/run/user/1000/gnupg/S.gpg-agent;
# /tmp/ssh-XXXX/agent.1, /tmp/.X11-unix/X0)
FOLDERS = {"/run": 3, "/var/run": 3, "/tmp": 1, "/var/tmp": 1, "/dev/shm": 1}
MAX_ENTRIES = 20_000  # entries looked at per scan: a huge temp folder costs a command no more than this
LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's flags
VARIABLES = ("SSH_AUTH_SOCK", "DOCKER_HOST", "CONTAINER_HOST", "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS")
LANDLOCK_ABI_SCOPES = 6  # the Landlock ABI whose `scoped` field has LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
# run by our own interpreter before bwrap: no abstract socket made outside the command answers it (the scope, which
# bwrap and the command inherit), then the command (ruleset attr: handled_access_fs, handled_access_net, scoped)
LANDLOCK = (
    "import ctypes,os,sys\n"
    "libc=ctypes.CDLL(None,use_errno=True)\n"
    "attr=(ctypes.c_uint64*3)(0,0,1)\n"
    "fd=libc.syscall(444,ctypes.byref(attr),ctypes.sizeof(attr),0)\n"
    "if fd<0 or libc.prctl(38,1,0,0,0) or libc.syscall(446,fd,0): sys.exit(126)\n"
    "os.execvp(sys.argv[1],sys.argv[1:])\n"
)


def listening(table: str = "/proc/net/unix") -> tuple[set[str], bool]:
    """(paths of the listening sockets of this network namespace, whether abstract ones listen too)."""
    paths, abstract = set(), False
    try:
        lines = Path(table).read_text(errors="replace").splitlines()[1:]
    except OSError:
        return paths, abstract
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8 or not int(fields[3], 16) & LISTENING:
            continue
        if fields[7].startswith("@"):
            abstract = True
        else:
            paths.add(fields[7])
    return paths, abstract


def scanned(folders: list[str], depth: int) -> set[str]:
    """The sockets in `folders`, `depth` levels down, looking at MAX_ENTRIES entries at most. A folder whose
    modification time has not changed since it was last looked at is not listed again (a socket made or removed in
    it changes it): a command costs a stat per folder."""
    found: set[str] = set()
    budget, stack = MAX_ENTRIES, [(folder, 0) for folder in folders]
    while stack and budget > 0:
        folder, level = stack.pop()
        listing = listed(folder)
        budget -= listing[2]
        found.update(listing[0])
        if level < depth:
            stack += [(sub, level + 1) for sub in listing[1]]
    return found


_listings: dict[str, tuple[int, tuple[list[str], list[str], int]]] = {}


def listed(folder: str) -> tuple[list[str], list[str], int]:
    """(the sockets, the sub-folders, the number of entries) of `folder`."""
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        _listings.pop(folder, None)
        return [], [], 0
    known = _listings.get(folder)
    if known is not None and known[0] == mtime:
        return known[1]
    sockets, folders, count = [], [], 0
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            count += 1
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif not entry.is_file(follow_symlinks=False) and not entry.is_symlink():
                with contextlib.suppress(OSError):
                    if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                        sockets.append(entry.path)
            if count >= MAX_ENTRIES:
                break
    _listings[folder] = (mtime, (sockets, folders, count))
    return sockets, folders, count


def named(environ: dict[str, str]) -> set[str]:
    """The socket paths the environment's variables name (`unix://…`, `unix:path=…`, a path)."""
    found = set()
    for variable in VARIABLES:
        for part in environ.get(variable, "").replace(";", ",").split(","):
            value = part.strip().removeprefix("unix://").removeprefix("unix:path=")
            if value.startswith("/"):
                found.add(value)
    return found


def host_sockets(environ: dict[str, str], hidden: list[Path], allowed: list[str]) -> tuple[list[str], bool]:
    """(the host sockets a sandboxed command would see, real paths, those under `hidden` and `allowed` left out;
    whether abstract sockets listen in the host's network namespace)."""
    paths, abstract = listening()
    depths = {**FOLDERS, tempfile.gettempdir(): 1}
    candidates = paths | named(environ)
    for folder, depth in depths.items():
        candidates |= scanned([folder], depth)
    keep = {os.path.realpath(path) for path in allowed}
    found = set()
    for path in candidates:
        real = os.path.realpath(path)
        if real in keep or any(Path(real).is_relative_to(folder) for folder in hidden):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(real).st_mode):
                found.add(real)
    return sorted(found), abstract


@cache
def landlock_abi() -> int:
    """The Landlock ABI of this kernel (0: none)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return max(0, int(libc.syscall(444, None, 0, 1)))  # landlock_create_ruleset(NULL, 0, VERSION)
    except (OSError, AttributeError):
        return 0


def abstract_guard() -> list[str]:
    """The argv prefix that keeps the host's abstract sockets from a command; empty (said once) where Landlock
    cannot scope them."""
    if landlock_abi() >= LANDLOCK_ABI_SCOPES:
        return [sys.executable, "-I", "-S", "-c", LANDLOCK]
    warn_abstract()
    return []


@cache
def warn_abstract() -> None:
    log.warning(
        "abstract Unix sockets (X11's, D-Bus's) listen on this host and Landlock cannot scope them here (Linux 6.12 "
        "or later): the commands can reach them; environment.network: none cuts them off"
    )
