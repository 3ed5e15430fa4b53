"""Where the user's own config file is (light: `--help` reads it to show the user's values beside the defaults)."""

from __future__ import annotations

import os
from pathlib import Path

from llm_ide.errors import ConfigError

USER_CONFIG_VARIABLE = "LLM_IDE_CONFIG"


def user_config_path() -> Path | None:
    """The user's own config file, merged under `--config` by the CLI: `$LLM_IDE_CONFIG` (`off`: none; a path that is
    not a file is an error; empty: as unset), else `$XDG_CONFIG_HOME/llm-ide/config.yaml` (`~/.config/…`) when it
    exists."""
    value = os.environ.get(USER_CONFIG_VARIABLE)
    if value == "off":
        return None
    if value:
        path = Path(value).expanduser()
        if not path.is_file():
            what = "a folder, not a config file" if path.is_dir() else "no such config file"
            raise ConfigError(f"{USER_CONFIG_VARIABLE}={value}: {what} (unset it, or =off for none)")
        return path
    path = default_user_config()
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a config file (move it, or set {USER_CONFIG_VARIABLE}=off)")
    return path if path.is_file() else None


def default_user_config() -> Path:
    """Where the user's config file is looked for when $LLM_IDE_CONFIG is unset."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "llm-ide" / "config.yaml"
