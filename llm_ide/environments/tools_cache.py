"""Where the tools' builds are cached on the host (llm_ide/tools/cache.py keeps them), the folder of the docker
builds that each container gets read-only, and the hold each run has on the cache while it goes on (`tools cache
--clear` is refused meanwhile: it removed the tools a run was using)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

log = logging.getLogger("llm_ide.environment")  # shown on the console as it happens

CACHE_VARIABLE = "LLM_IDE_TOOLS_CACHE"  # a folder, or `off`; default: $XDG_CACHE_HOME/llm-ide/tools
OFF = {"", "0", "off", "none", "false", "no"}
IN_USE = "in-use.lock"  # held shared by every run using the cache, for its life; `tools cache --clear` holds it alone


def default_root() -> Path | None:
    value = os.environ.get(CACHE_VARIABLE)
    if value is not None:
        return None if value.strip().lower() in OFF else Path(value).expanduser().absolute()
    return (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-ide" / "tools").absolute()


def docker_tools_cache() -> Path | None:
    """The host folder of the built trees of docker tools, mounted read-only into each container (cache on)."""
    root = default_root()
    if root is None:
        return None
    try:
        (root / "docker").mkdir(parents=True, exist_ok=True)
    except OSError as error:
        log.warning("the tool cache %s cannot be used (%s)", root, error.strerror or error)
        return None
    return root / "docker"


def lock_file(root: Path) -> IO[str] | None:
    """The cache's in-use lock file, opened (None where the cache folder cannot be written: no run uses it)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        return open(root / IN_USE, "a")  # noqa: SIM115 (closed by the callers)
    except OSError:
        return None


@contextlib.contextmanager
def cache_in_use(tools: bool) -> Iterator[None]:
    """The tool cache held, shared with the other runs, while a run with `tools` goes on (the cache off: nothing)."""
    root = default_root() if tools else None
    handle = lock_file(root) if root is not None else None
    with handle or contextlib.nullcontext():
        if handle is not None:
            fcntl.flock(handle, fcntl.LOCK_SH)  # (waits only while a --clear removes the entries)
        yield


@contextlib.contextmanager
def cache_alone(root: Path) -> Iterator[bool]:
    """The tool cache at `root` held by nothing else (True), or in use by a run going on (False)."""
    handle = lock_file(root) if root.is_dir() else None  # (no cache there: none made to clear it)
    with handle or contextlib.nullcontext():
        try:
            if handle is not None:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
