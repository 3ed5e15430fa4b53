"""Folders and cgroups of llm-ide's own on the host, each named after the process that made it (its PID namespace, its
PID and its start time): whatever start of llm-ide comes next removes those whose maker is gone, a run or a replay
killed outright (SIGKILL) included, without a record to read."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
from functools import lru_cache
from pathlib import Path

from llm_ide.environments.processes import TOKEN, start_time
from llm_ide.errors import EnvironmentFailure

FOLDER_PREFIX = "llm-ide-"
OWNED = re.compile(r"llm-ide-(?P<kind>[a-z]+)-(?P<namespace>\d+)\.(?P<pid>\d+)\.(?P<start>\d+)-")


def owner_tag() -> str:
    """This process, as a name part: `<PID namespace>.<PID>.<start time>`."""
    return tag_of(os.getpid())


def pid_namespace() -> int:
    return int(owner_tag().split(".", 1)[0])


@lru_cache(maxsize=1)
def tag_of(pid: int) -> str:
    """Read once a process (by its PID: a forked child reads its own): names and sweeps ask at every run."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{namespace}.{pid}.{start_time(pid)}"


def owned_name(kind: str) -> str:
    """A name prefix for something of this process's (`llm-ide-<kind>-<owner>-`)."""
    return f"llm-ide-{kind}-{owner_tag()}-"


def owned_tempdir(kind: str, made: list[str] | None = None) -> str:
    """A new temp folder of this process's (mode 0700), removed by a later start once this process is gone; added to
    `made` as soon as it is."""
    folder = tempfile.mkdtemp(prefix=owned_name(kind))
    if made is not None:
        made.append(folder)
    return folder


def made_folder(path: Path, what: str) -> None:
    """`path` made with its parents, or an EnvironmentFailure of one line saying why it cannot be (`what`: whose)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise EnvironmentFailure(f"{what} {path} cannot be made: {error.strerror or error}") from None


def remove_folders(folders: list[str], owner: int) -> None:
    """Removes `folders` in their owner's process only (a forked child that exits normally leaves them)."""
    if os.getpid() == owner:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def owner_gone(name: str) -> bool:
    """Whether `name` is owned (see `owned_name`) by a process of this PID namespace that no longer runs; a name of
    another namespace's process is never judged from here."""
    found = OWNED.match(name)
    return found is not None and tag_gone(f"{found['namespace']}.{found['pid']}.{found['start']}")


def tag_gone(tag: str) -> bool:
    """Whether the process an `owner_tag` names no longer runs (its PID gone or reused); a tag of another PID
    namespace's process, or one that is no tag, is never judged from here."""
    try:
        namespace, pid, start = (int(part) for part in tag.split("."))
    except ValueError:
        return False
    return namespace == pid_namespace() and start_time(pid) != start


def sweep_temp_folders(folder: Path | None = None) -> int:
    """Removes the temp folders whose maker is gone (a killed run's scratch, private and tools folders, a killed
    replay's checkout); the number removed."""
    removed = 0
    folder = folder or Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if owner_gone(entry.name) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += not os.path.lexists(entry.path)
    return removed


def carries(pid: int, token: str, variable: str = TOKEN) -> bool:
    """Whether the process has `variable`=`token` in its environment (False: gone, or not ours to read)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{variable}={token}".encode() in environ.split(b"\0")


def carriers(token: str) -> list[int]:
    """Every process of this host (that we may read) carrying `token`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and carries(int(entry.name), token):
            pids.append(int(entry.name))
    return pids


def reap_leftovers(path: Path) -> str:
    """What a killed run of this thread left (per its record): its processes killed, its temp folders removed; a
    line saying what was reaped ('' when nothing was)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        token, (owner, owner_start) = str(record["token"]), record["owner"]
        folders = [str(folder) for folder in record.get("folders", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if owner != os.getpid() and start_time(int(owner)) == owner_start:
        return ""  # its owner still runs: not ours to reap
    killed = 0
    for pid in carriers(token):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    command = record.get("command") or {}
    if isinstance(command.get("pgid"), int) and start_time(command["pgid"]) == command.get("start"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(command["pgid"], signal.SIGKILL)  # one that cleared its environment, still in the group
    removed = [folder for folder in folders if remove_temp_folder(Path(folder))]
    path.unlink(missing_ok=True)
    if not killed and not removed:
        return ""
    return f"reaped what a killed run left: {killed} processes, {len(removed)} temp folders"


def remove_temp_folder(folder: Path) -> bool:
    """Only our own temp folders: directly in the temp directory, named llm-ide-…, not a symlink."""
    ours = folder.name.startswith(FOLDER_PREFIX) and folder.parent == Path(tempfile.gettempdir())
    if not ours or folder.is_symlink() or not folder.is_dir():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()
