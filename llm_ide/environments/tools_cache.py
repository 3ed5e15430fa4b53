"""Where the tools' builds are cached on the host (llm_ide/tools/cache.py keeps them), and the folder of the docker
builds that each container gets read-only."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("llm_ide.environment")  # shown on the console as it happens

CACHE_VARIABLE = "LLM_IDE_TOOLS_CACHE"  # a folder, or `off`; default: $XDG_CACHE_HOME/llm-ide/tools
OFF = {"", "0", "off", "none", "false", "no"}


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
