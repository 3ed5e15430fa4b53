from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from llm_ide.errors import ConfigError
from llm_ide.settings import Settings, deep_merge, validate_layers

PROMPTS_DIR = Path(__file__).parent / "prompts"
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: the default config in 5 ms, not 70
CONFIG_NAMES = ("default", "swebench")

__all__ = ["PROMPTS_DIR", "ConfigError", "Settings", "deep_merge", "load_config", "read_yaml", "validate_layers"]


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def resolve_config_path(name: str | Path) -> Path:
    """A bundled config by name (`default`, `swebench`) or a file path."""
    path = Path(name)
    if path.suffix in {".yaml", ".yml"} and path.exists():
        return path
    if str(name) in CONFIG_NAMES:
        return PROMPTS_DIR / f"{name}.yaml"
    raise ConfigError(f"config not found: {name} (neither a file nor one of {list(CONFIG_NAMES)})")


@cache
def bundled_config(name: str) -> Settings:
    """A bundled config (`default`, `swebench`), loaded once per process."""
    return load_config(name)


def load_config(base: str | Path = "default", overrides: list[str | Path] | None = None, **values: Any) -> Settings:
    """The bundled/base config (its `extends` chain first), each override file deep-merged in order, then `values`;
    validated once: a bad key or value raises ConfigError naming the file and the key path."""
    layers = _layers_with_extends(resolve_config_path(base), set())
    for override in overrides or []:
        path = Path(override)
        data = read_yaml(path)
        if "extends" in data:
            raise ConfigError(f"{path}: extends: only a base config may extend another; an override file cannot")
        layers.append((str(path), data))
    if values:
        layers.append(("settings", values))
    return validate_layers(layers)


def _layers_with_extends(path: Path, seen: set[Path]) -> list[tuple[str, dict[str, Any]]]:
    if path.resolve() in seen:
        raise ConfigError(f"{path}: extends: loops back to itself")
    data = read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return [(str(path), data)]
    parent_path = (path.parent / parent) if (path.parent / str(parent)).exists() else resolve_config_path(parent)
    return [*_layers_with_extends(parent_path, seen | {path.resolve()}), (str(path), data)]
