from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import yaml

PROMPTS_DIR = Path(__file__).parent / "prompts"


class ConfigError(ValueError):
    pass


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = deepcopy(value)
    return merged


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
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
    bundled = PROMPTS_DIR / f"{Path(name).stem}.yaml"
    if bundled.exists():
        return bundled
    raise ConfigError(
        f"config not found: {name} (neither a file nor one of {sorted(p.stem for p in PROMPTS_DIR.glob('*.yaml'))})"
    )


def load_config(
    base: str | Path = "default", overrides: list[str | Path] | None = None, **values: Any
) -> dict[str, Any]:
    """The bundled/base config, its `extends` chain first, then each override file deep-merged in order."""
    config = _load_with_extends(resolve_config_path(base), set())
    for override in overrides or []:
        config = deep_merge(config, read_yaml(Path(override)))
    return deep_merge(config, values) if values else config


def _load_with_extends(path: Path, seen: set[Path]) -> dict[str, Any]:
    if path.resolve() in seen:
        raise ConfigError(f"{path}: `extends` loops back to itself")
    data = read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    parent_path = (path.parent / parent) if (path.parent / str(parent)).exists() else resolve_config_path(parent)
    return deep_merge(_load_with_extends(parent_path, seen | {path.resolve()}), data)
