"""Files written so that a reader, a crash or a full disk never leaves a half-written one."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

UMASK = os.umask(0o022)
os.umask(UMASK)  # the process's, read once: a file written here gets the mode open() would give it, not mkstemp's 0600


def atomic_write(path: Path, data: str | bytes | Iterable[bytes], sync: bool = True) -> None:
    """Write a temporary file beside `path`, fsync it, rename it over `path`, fsync the folder: `path` holds either
    its old content or the new one, never a part; the temporary file is removed when anything fails. Without `sync`
    the same but for the fsyncs: a killed process's writes are kept (the page cache outlives it), not a crash's."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(fd, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~UMASK)  # the file's own
            if isinstance(data, str):
                handle.write(data.encode("utf-8"))
            elif isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync:
        with contextlib.suppress(OSError):  # some file systems cannot open or sync a directory
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)


NAME_MAX_CHARS = 200


def removed_if_can(path: Path | None) -> None:
    """`path` removed if it is there and can be: none given, gone, its folder replaced or read-only, it stays."""
    with contextlib.suppress(OSError):
        if path is not None:
            path.unlink(missing_ok=True)


def file_name_problem(name: object) -> str | None:
    """Why `name` (an id read from a file: an instance id, a run id) cannot name a file or folder in an output folder
    (a path separator, `.` or `..`, a control character, too long); None when it can."""
    if not isinstance(name, str) or not name:
        return "not a non-empty string"
    if name in (".", "..") or "/" in name or "\\" in name:
        return "a path, not a name"
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        return "holds a control character"
    if len(name) > NAME_MAX_CHARS:
        return f"longer than {NAME_MAX_CHARS} characters"
    return None
