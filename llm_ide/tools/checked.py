"""A local cache entry's checks, remembered: the `executable` and `check` steps of a tool taken from the cache run
once per entry and kind of environment, and again whenever something they depend on changed.

What they prove: the tool's entry point is there and runs (its environment's interpreter reachable in the sandbox,
its packages importing). What that depends on, and how each is known at a later run's start without running them:
- the interpreter the entry was built from: the cache key (each run probes it in the sandbox);
- the entry's files: a fingerprint (every path in it, and each file's type, mode, size, inode, mtime and ctime;
  byte code aside) taken before the checks passed, and compared at each later start;
- the environment: its kind, whether its commands are sandboxed, the user and limits they run under, the PATH and
  PYTHON* variables they get, and the checks' own commands (a marker per combination of these).
A missing, unreadable or different marker, or a changed fingerprint, runs the checks again. A docker environment
never takes them from a marker: each run's container is new (its image, user and view of the mounted cache)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_ide.environments.base import Environment
from llm_ide.tools.plan import Step

MARKER = ".checked-"  # + the context's hash, in the entry: the entry's fingerprint when its checks passed
BYTE_CODE = "__pycache__"


def fingerprint(entry: Path) -> str:
    """Every path under `entry` (its own bookkeeping at the top, `.complete` and the markers, and byte code aside),
    with each file's or link's type, mode, size, inode, mtime and ctime: an edit, a removal or an addition shows."""
    digest = hashlib.sha256()
    folders = [str(entry)]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as listing:
            for item in sorted(listing, key=lambda item: item.name):
                if (
                    item.name == BYTE_CODE
                    or item.name.endswith(".pyc")
                    or (folder == str(entry) and item.name[0] == ".")
                ):
                    continue
                if item.is_dir(follow_symlinks=False):
                    folders.append(item.path)
                    digest.update(f"{item.path}/\0".encode())
                    continue
                stat = item.stat(follow_symlinks=False)
                fields = (stat.st_mode, stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)
                digest.update(f"{item.path}\0{fields}\0".encode())
    return digest.hexdigest()


def context(env: Environment, checks: Sequence[Step]) -> str | None:
    """What the checks depend on outside the entry (the interpreter aside: it is in the entry's key); None for an
    environment that does not say (its checks always run)."""
    told = getattr(env, "tool_check_context", None)
    if told is None:
        return None
    material = {"kind": env.kind, "environment": told(), "checks": [step.command for step in checks]}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CheckMarker:
    path: Path
    fingerprint: str  # the entry's, taken before its checks run

    @classmethod
    def of(cls, entry: Path, env: Environment, checks: Sequence[Step]) -> CheckMarker | None:
        """The marker of these checks in `entry` (None: the entry cannot be read, so the checks run)."""
        if (told := context(env, checks)) is None:
            return None
        try:
            return cls(entry / f"{MARKER}{told}", fingerprint(entry))
        except OSError:
            return None

    def holds(self) -> bool:
        """The checks passed in this context with the entry as it is now."""
        try:
            return self.path.read_text(encoding="utf-8").strip() == self.fingerprint
        except (OSError, UnicodeDecodeError):
            return False

    def remember(self) -> None:
        """The checks passed: written whole (a run reading it meanwhile sees the old one or none); a cache that cannot
        be written runs them again next time."""
        partial = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex[:8]}.partial")
        try:
            partial.write_text(self.fingerprint + "\n", encoding="utf-8")
            os.replace(partial, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink()
