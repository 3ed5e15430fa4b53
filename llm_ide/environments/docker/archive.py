"""Tar archives to and from a container: a directory or one file in, files out with their exact mtimes."""

from __future__ import annotations

import io
import posixpath
import tarfile
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from llm_ide.environments.base import FileSnapshot


def tar_directory(
    source: Path,
    spool: tempfile.SpooledTemporaryFile[bytes],
    owner: tuple[int, int] = (0, 0),
    leave_out: list[Path] | None = None,
) -> None:
    """`source` archived as owned by `owner` (uid, gid): the commands' user in the container; the folders of
    `leave_out` inside it are not (the run's own output folder)."""
    inside = [Path(path) for path in leave_out or [] if Path(path).is_relative_to(source) and Path(path) != source]
    left = {posixpath.join(".", path.relative_to(source).as_posix()) for path in inside}

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if info.name in left:
            return None
        info.uid, info.gid = owner
        info.uname = info.gname = "root" if owner == (0, 0) else ""
        return info

    with tarfile.open(fileobj=spool, mode="w") as archive:
        archive.add(source, arcname=".", filter=owned)


def single_file_tar(name: str, data: bytes, owner: tuple[int, int] = (0, 0)) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = int(time.time())
        info.mode = 0o644
        info.uid, info.gid = owner
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def pax_mtime_ns(member: tarfile.TarInfo) -> int:
    exact = member.pax_headers.get("mtime")
    return int(Decimal(exact) * 1_000_000_000) if exact else int(member.mtime) * 1_000_000_000


def member_key(path: str) -> str:
    return posixpath.normpath(path).lstrip("/")


def read_tar(data: bytes, paths: list[str]) -> dict[str, FileSnapshot]:
    """The files of `paths` (by their normalised names) a tar of them holds, with their exact mtimes."""
    wanted: dict[str, list[str]] = {}
    for path in paths:
        wanted.setdefault(member_key(path), []).append(path)
    snapshots: dict[str, FileSnapshot] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if member.isfile() and (same := wanted.get(member_key(member.name))):
                handle = tar.extractfile(member)
                assert handle is not None
                snapshots.update(dict.fromkeys(same, FileSnapshot(handle.read(), pax_mtime_ns(member))))
    return snapshots
